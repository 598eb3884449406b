"""``embody bench planning`` runs end to end in quick mode (structure only, no timing asserted)."""

import json
import math

import pytest

pytest.importorskip("up_fast_downward", reason="needs the planning extra")

PIECES = {"parse_s", "convert_s", "planner_s", "driver_s", "up_engine_s", "validate_s", "other_s"}


def test_bench_planning_measures_solve_and_the_fast_downward_driver(tmp_path, capsys):
    from embody.benchmarks import BENCHMARKS, run_benchmark

    assert BENCHMARKS["planning"] == "embody.benchmarks.planning"
    assert run_benchmark("planning", ["--quick", "--out", str(tmp_path)]) == 0
    r = json.loads((tmp_path / "results.json").read_text())
    assert r["target_ratio"] == 1.2 and "lama-first" in r["peer_command"]
    assert set(r["search"]) == {"blocks-12"} and set(r["small"]) == {"reverse-5", "tabletop-small"}
    for name, row in {**r["search"], **r["small"]}.items():
        for key in ("ours_s", "peer_s", "ratio"):
            assert math.isfinite(row[key]) and row[key] > 0, (name, key)
        assert row["ours_plan_length"] > 0 and row["peer_plan_length"] > 0, name
        assert set(row["pieces"]) == PIECES and all(v >= 0 for v in row["pieces"].values()), name
    assert (tmp_path / "pddl" / "blocks-12.pddl").exists()
    out = capsys.readouterr().out
    assert "| blocks-12 |" in out and "ours / peer ≤ 1.20" in out
