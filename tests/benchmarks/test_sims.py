"""``embody bench sims --quick`` measures every installed adapter and its raw engine (no timing asserted)."""

import json
import math

import pytest

from embody.sims import installed_simulators


@pytest.mark.slow
def test_quick_bench_sims_covers_every_installed_adapter(tmp_path):
    from embody.benchmarks.sims import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    assert {r["sim"] for r in result["rows"]} == set(installed_simulators())
    for r in result["rows"]:
        for key in ("steps_per_s", "physics_steps_per_s", "raw_physics_steps_per_s", "overhead_ratio"):
            assert math.isfinite(r[key]) and r[key] > 0, (r, key)
    if "genesis" in installed_simulators():
        assert [b["n_envs"] for b in result["genesis_batched"]] == [1, 4]
