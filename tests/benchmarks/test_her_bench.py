"""``embody bench her``: both sides (embody's SAC+HER and SB3's) train on a Gymnasium-Robotics goal task and report
success at the same env steps."""

import json

import pytest


@pytest.mark.slow
def test_a_short_her_bench_measures_both_sides(tmp_path):
    pytest.importorskip("gymnasium_robotics")
    from embody.benchmarks.her import main

    argv = ["--seeds", "1", "--steps", "1200", "--every", "600", "--eval", "2", "--hidden", "16", "16"]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["side"] for r in runs] == ["embody", "sb3"]
    for r in runs:
        assert [c[0] for c in r["curve"]] == [600, 1200] and all(0 <= c[1] <= 1 for c in r["curve"]), r
