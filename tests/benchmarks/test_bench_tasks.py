"""``embody bench tasks`` and ``embody bench learning`` run end to end (no timing asserted)."""

import json
import math

import pytest

from embody.sims import installed_simulators


def test_bench_tasks_measures_each_task_on_each_simulator(tmp_path):
    from embody.benchmarks.tasks import main

    assert (
        main(
            [
                "--task",
                "cartpole-swingup",
                "h1_2-velocity",
                "--sim",
                "mujoco",
                "--envs",
                "2",
                "--steps",
                "3",
                "--frames",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    rows = json.loads((tmp_path / "results.json").read_text())
    assert [(r["task"], r["sim"]) for r in rows] == [("cartpole-swingup", "mujoco"), ("h1_2-velocity", "mujoco")]
    for r in rows:
        for key in ("env_steps_per_s", "physics_only_per_s", "ratio", "camera_frames_per_s", "video_frames_per_s"):
            assert math.isfinite(r[key]) and r[key] > 0, (r, key)
        assert r["camera_size"] == "320x240" and r["video_size"] == "640x480"


@pytest.mark.slow
def test_bench_tasks_reports_unsupported_pairs_instead_of_failing(tmp_path):
    from embody.benchmarks.tasks import main

    assert main(["--task", "h1_2-stand", "--envs", "2", "--steps", "2", "--frames", "0", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {r["sim"] for r in rows} == set(installed_simulators())
    for r in rows:
        assert "unsupported" in r or r["env_steps_per_s"] > 0


@pytest.mark.slow
def test_bench_learning_trains_evaluates_and_compares_with_random(tmp_path, capsys):
    from embody.benchmarks.learning import main

    assert (
        main(
            [
                "--task",
                "cartpole-swingup",
                "--seeds",
                "1",
                "--first-seed",
                "2",
                "--budget",
                "120",  # the step count ends it; the budget only guards against a hang (a loaded machine is slow)
                "--steps",
                "20000",
                "--set",
                "n_envs=64",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["random"]["episodes"] == 20 and result["random"]["length_mean"] == 250
    (seed,) = result["seeds"]
    assert seed["seed"] == 2 and seed["env_steps"] >= 20000 and math.isfinite(seed["eval"]["return_mean"])
    assert 0 < seed["collect_s"] and 0 < seed["update_s"] and seed["collect_s"] + seed["update_s"] <= seed["train_s"]
    assert "ms per 1,000 env steps" in capsys.readouterr().out
    assert (tmp_path / "learning.png").stat().st_size > 1000


def test_bench_learning_measures_raw_physics_and_judges_tracking():
    from embody.benchmarks.learning import bars, passes, raw_physics_rate

    assert raw_physics_rate("cartpole-swingup", ["n_envs=4"], seconds=0.2) > 0
    bar = bars()["h1_2-velocity"]
    good = {"lin_vel_error": 0.2, "yaw_rate_error": 0.25, "survival_rate": 0.96}
    assert passes(bar, good, {})
    for key, worse in (("lin_vel_error", 0.3), ("yaw_rate_error", 0.35), ("survival_rate", 0.9)):
        assert not passes(bar, {**good, key: worse}, {})


def test_a_raw_rate_measured_under_load_is_flagged(capsys):
    from embody.benchmarks.learning import print_speed

    row = {"train_s": 10.0, "steps_per_s": 1000.0, "env_steps": 10_000, "collect_s": 6.0, "update_s": 3.0}
    print_speed([row], raw=2000.0)  # raw physics alone would take 5 s of the rollout's 6: fine
    assert "something else ran" not in capsys.readouterr().out
    print_speed([row], raw=1000.0)  # 10 s of raw physics inside a 6 s rollout: the raw measure was disturbed
    assert "something else ran" in capsys.readouterr().out
