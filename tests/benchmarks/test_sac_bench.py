"""``embody bench sac``: both SACs (embody's and stable-baselines3's, from the dev extra) train on the same task
with the same settings and the report carries both rates."""

import json
import math


def test_a_short_sac_bench_measures_both_sides(tmp_path, capsys):
    from embody.benchmarks.sac import main

    argv = ["--steps", "600", "--envs", "4", "--learning-starts", "200", "--hidden", "16", "16", "--out", str(tmp_path)]
    assert main(argv) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    for side in ("embody", "sb3"):
        row = result["rows"][side]
        assert row["updates"] == 200 and row["env_steps_per_s"] > 0 and row["grad_steps_per_s"] > 0, side
    assert math.isfinite(result["speed_ratio"]) and "speed embody / SB3" in capsys.readouterr().out
