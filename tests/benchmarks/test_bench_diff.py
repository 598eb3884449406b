"""``embody bench diff`` runs end to end (no timing asserted)."""

import json


def test_bench_diff_measures_gradients_and_frames_for_each_differentiable_task(tmp_path, capsys):
    from embody.benchmarks.diff import TASKS, main

    assert main(["--quick", "--size", "32", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert set(rows) == set(TASKS)
    for row in rows.values():
        assert row["plain_env_steps_per_s"] > 0 and row["diff_env_steps_per_s"] > 0 and row["cost_ratio"] > 0
        assert row["tiled_frames_per_s"] > 0 and row["renderer_frames_per_s"] > 0
    assert "| hopper |" in capsys.readouterr().out
