"""``embody bench driving`` runs end to end in quick mode (structure only, no timing asserted)."""

import json
import math

import pytest

pytest.importorskip("highway_env", reason="needs the driving extra")


def test_bench_driving_compares_ours_with_raw_highway_env(tmp_path, capsys):
    from embody.benchmarks import BENCHMARKS, run_benchmark

    assert BENCHMARKS["driving"] == "embody.benchmarks.driving"
    assert run_benchmark("driving", ["--quick", "--out", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "results.json").read_text())
    assert set(r["env_steps_per_s"]) == {"raw", "ours", "ours+expert", "raw-fast", "ours-fast"}
    for name, rate in r["env_steps_per_s"].items():
        assert math.isfinite(rate) and rate > 0, name
    assert r["fast"] == {"vehicles": 12, "simulation_hz": 5, "policy_hz": 5, "traffic_collisions": False}
    assert "| ours-fast |" in capsys.readouterr().out
