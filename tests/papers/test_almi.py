"""ALMI (papers/almi): the lower-body task's clip curricula."""

import json

import numpy as np
import pytest

from embody.papers.almi.tasks import TRAIN_FAMILIES, AlmiLowerConfig
from embody.robots.motion import FAMILIES
from embody.sims.vec_env import make_env


def lower_env(n=8, **clips):
    cfg = AlmiLowerConfig()
    cfg.randomization.enabled = False
    for k, v in clips.items():
        setattr(cfg.clips, k, v)
    env = make_env("almi-lower", n_envs=n, seed=0, config=cfg)
    env.reset()
    return env


def test_the_upper_body_plays_clips_at_the_curriculum_amplitude():
    env = lower_env()
    task = env.task
    up, q0 = task.upper, task.q0
    clip_frame = task.frames[task.clip, task.frame]
    np.testing.assert_allclose(task.upper_targets()[:, up], q0[up] + 0.1 * (clip_frame - q0[up]))
    task.training = False  # evaluation: the whole library at full amplitude
    np.testing.assert_allclose(task.upper_targets()[:, up], clip_frame)
    assert task.curriculum_levels()["amplitude"] == 1.0 and task.curriculum_levels()["slice"] == 1.0
    held_out = set(FAMILIES) - set(TRAIN_FAMILIES)
    assert held_out and {"boxing", "carry"} <= held_out  # whole families no stage trains on


def test_levels_rise_while_the_legs_survive_and_fall_when_they_do_not():
    env = lower_env(amplitude=0.3, slice=0.3)
    task = env.task
    task.steps[:] = 1000
    task.fell[:] = False
    task.on_reset(np.arange(8))  # eight episodes ended without a fall
    assert task.amplitude == pytest.approx(0.305) and task.slice == pytest.approx(0.305)
    task.steps[:] = 100
    task.fell[:] = True
    task.on_reset(np.arange(8))  # eight falls
    assert task.amplitude == pytest.approx(0.3) and task.slice == pytest.approx(0.3)  # floored at the start level
    assert task.curriculum_levels()["amplitude"] == pytest.approx(0.3)


def test_clips_that_make_the_legs_fall_are_sorted_last_and_drawn_late():
    env = lower_env(slice=0.25)
    task = env.task
    n_clips = len(task.lengths)
    hard = np.arange(0, n_clips, 2)
    task.steps[:] = 50
    for _ in range(20):
        task.clip[:] = task.rng.choice(hard, 8)
        task.fell[:] = True
        task.on_reset(np.arange(8))
    scored = np.flatnonzero(task.difficulty > 0)
    assert scored.size and set(scored) <= set(hard)
    assert set(task.order[-scored.size :]) == set(scored)  # the clips that made the legs fall come last
    drawn = task.draw_clips(2000)
    assert not np.isin(drawn, task.order[int(np.ceil(task.slice * n_clips)) :]).any()  # only the easy slice
    task.training = False
    assert len(np.unique(task.draw_clips(5000))) == n_clips
    fresh = lower_env(slice=0.25).task  # a resumed run continues the sorted library and the levels
    fresh.restore_curriculum(json.loads(json.dumps(task.curriculum_state())))
    np.testing.assert_array_equal(fresh.order, task.order)
    assert (fresh.slice, fresh.amplitude) == (task.slice, task.amplitude)


def test_a_short_run_moves_the_curricula():
    env = lower_env(n=16)
    rng = np.random.default_rng(0)
    for _ in range(60):
        env.step(rng.uniform(-1, 1, (16, 12)))  # random legs fall: the levels stay at the start
    assert env.task.amplitude == pytest.approx(0.1) and env.task.difficulty.max() > 0


def untrained_run(tmp_path, task):
    """A run directory holding a fresh (untrained) policy for ``task``."""
    from embody.papers.almi.train import untrained_run as make

    return make(task, tmp_path / task)


def test_the_whole_body_tracks_with_nine_joints_and_holds_the_wrists_at_the_reference():
    from embody.papers.almi.tasks import TRACKED, AlmiConfig

    cfg = AlmiConfig()
    cfg.randomization.enabled = False
    env = make_env("almi", n_envs=2, seed=0, config=cfg)
    obs, _ = env.reset()
    task = env.task
    assert obs.shape == (2, 77 + 80) and env.action_size == 21
    a = np.random.default_rng(0).uniform(-1, 1, (2, 21))
    targets = task.action_to_command(a)
    tracked = [task.robot.joint_names.index(n) for n in TRACKED]
    np.testing.assert_allclose(targets[:, tracked], task.q0[tracked] + 0.25 * a[:, 12:], atol=1e-12)
    held = np.setdiff1d(task.upper, tracked)  # forearm twist and wrists
    np.testing.assert_allclose(targets[:, held], task.reference[:, held])
    np.testing.assert_allclose(
        task.upper_observe(env.sim.state())[:, 6:15], task.reference[:, tracked] - task.q0[tracked]
    )


def test_stages_drive_the_other_part_with_its_frozen_policy(tmp_path):
    from embody.papers.almi.tasks import AlmiLowerConfig, AlmiUpperConfig
    from embody.policies.checkpoint import CheckpointError
    from embody.runs import load_run_checkpoint

    lower_run, upper_run = untrained_run(tmp_path, "almi-lower"), untrained_run(tmp_path, "almi-upper")
    cfg = AlmiUpperConfig(lower_policy=str(lower_run))
    env = make_env("almi-upper", n_envs=2, seed=0, config=cfg)
    env.reset()
    lower_obs = env.task.lower_observe(env.task.state)
    env.step(np.zeros((2, 9)))
    expected = load_run_checkpoint(lower_run).policy.act(torch_tensor(lower_obs), deterministic=True).numpy()
    np.testing.assert_allclose(env.task.leg_action, expected, atol=1e-6)
    env = make_env("almi-lower", n_envs=2, seed=0, config=AlmiLowerConfig(upper_policy=str(upper_run)))
    env.reset()
    env.step(np.zeros((2, 12)))
    assert np.abs(env.task.upper_action).max() > 0  # the upper policy acted
    with pytest.raises(CheckpointError, match="different observation/action spec"):
        make_env("almi-upper", n_envs=1, config=AlmiUpperConfig(lower_policy=str(upper_run)))


def torch_tensor(x):
    import torch

    return torch.as_tensor(x)


def test_compose_makes_one_whole_body_run_and_refuses_missing_or_wrong_parts(tmp_path, capsys):
    from embody.cli import main
    from embody.policies.compose import CompositePolicy
    from embody.runs import evaluate_run, load_run_checkpoint

    lower, upper = untrained_run(tmp_path, "almi-lower"), untrained_run(tmp_path, "almi-upper")
    argv = ["almi", "compose", "--lower", str(lower), "--scale", "tiny", "--out", str(tmp_path / "whole")]
    assert main(argv + ["--upper", str(upper)]) == 0
    policy = load_run_checkpoint(tmp_path / "whole").policy
    assert isinstance(policy, CompositePolicy) and policy.obs_size == 157 and policy.action_size == 21
    assert evaluate_run(tmp_path / "whole", episodes=1, n_envs=1)["task"] == "almi"
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert main(argv + ["--upper", str(tmp_path / "empty")]) == 2  # a directory holding only one part
    assert f"{tmp_path / 'empty' / 'checkpoint'} is not an embody checkpoint" in capsys.readouterr().err
    assert main(argv + ["--upper", str(lower)]) == 2
    assert "holds a almi-lower policy, not almi-upper" in capsys.readouterr().err


@pytest.mark.slow
def test_the_tiny_alternation_runs_end_to_end_and_resumes(tmp_path, capsys):
    from embody.cli import main
    from embody.policies.compose import CompositePolicy
    from embody.runs import MetricsLog, load_run_checkpoint

    out = tmp_path / "almi"
    assert main(["almi", "train", "--scale", "tiny", "--out", str(out)]) == 0
    for stage in ("lower-1", "upper-1", "lower-2", "upper-2"):
        assert (out / "stages" / stage / "eval.json").is_file()
    assert isinstance(load_run_checkpoint(out).policy, CompositePolicy) and (out / "eval.json").is_file()
    capsys.readouterr()
    assert main(["almi", "train", "--scale", "tiny", "--out", str(out)]) == 0  # every stage is done: skipped
    assert capsys.readouterr().err.count(": done (") == 4
    killed = out / "stages" / "upper-2"  # as if the process died after its last checkpoint, before its evaluation
    (killed / "eval.json").unlink()
    rows = MetricsLog(killed).rows()
    assert main(["almi", "train", "--scale", "tiny", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count(": done (") == 3 and f"{killed}: resuming from its checkpoint" in err
    assert MetricsLog(killed).rows() == rows and (killed / "eval.json").is_file()  # no step trained twice


@pytest.mark.slow
def test_deploy_steps_add_a_lower_stage_against_the_joint_velocity_limits(tmp_path):
    """The stage the committed checkpoint went through: the speed penalty, unclipped after half its steps, from
    the last lower stage with the last upper part frozen; the whole-body run composes its legs."""
    import json

    from embody.cli import main
    from embody.runs import load_run

    out = tmp_path / "almi"
    assert main(["almi", "train", "--scale", "tiny", "--out", str(out), "--deploy-steps", "512"]) == 0
    cfg, _ = load_run(out / "stages" / "lower-deploy")
    assert cfg.steps == 512 and cfg.init_from == str(out / "stages" / "lower-2")
    assert cfg.env["upper_policy"] == str(out / "stages" / "upper-2")
    assert cfg.env["reward_weights"]["dof_vel_limits"] == -5.0
    assert cfg.env["legged"]["unclipped"] == ["dof_vel_limits"] and cfg.env["legged"]["unclipped_from_steps"] == 256
    meta = json.loads((out / "checkpoint" / "checkpoint.json").read_text())
    assert json.dumps(meta).count(str(out / "stages" / "lower-deploy")) == 1  # the composite's legs


def test_eval_reports_each_method_on_held_out_motions(tmp_path, capsys):
    import json

    from embody.cli import main
    from embody.papers.almi.evaluate import HELD_OUT
    from embody.papers.almi.train import compose, make_config

    lower, upper = untrained_run(tmp_path, "almi-lower"), untrained_run(tmp_path, "almi-upper")
    runs = [tmp_path / "study" / m / f"seed{s}" for m, s in (("almi", 0), ("almi", 1), ("whole", 0))]
    for run in runs:
        compose(lower, upper, run, make_config("tiny"))
    assert set(HELD_OUT) == {"boxing", "overhead reach", "carry"}
    out = tmp_path / "eval"
    assert main(["almi", "eval", *map(str, runs), "--episodes", "2", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["methods"]
    assert set(results) == {"almi", "whole"} and len(results["almi"]["runs"]) == 2
    low, mean, high = results["almi"]["survival"][1], results["almi"]["survival"][0], results["almi"]["survival"][2]
    assert low <= mean <= high
    assert "| almi | 2 |" in (out / "report.md").read_text() and (out / "survival_vs_intensity.png").is_file()
    capsys.readouterr()
    assert main(["almi", "eval", str(lower), "--episodes", "1", "--out", str(out)]) == 2
    assert "an almi (whole-body) run is needed, this one trained almi-lower" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["almi", "eval", str(runs[0]), "--clips", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert f"{tmp_path / 'empty'}: the motion library holds no .safetensors clips" in capsys.readouterr().err


@pytest.mark.slow
def test_the_tiny_study_trains_every_method_with_its_deploy_stage_and_reports(tmp_path, capsys):
    import json
    import shutil

    from embody.cli import main
    from embody.papers.almi.policies import ReferencePolicy
    from embody.papers.almi.study import METHODS
    from embody.runs import load_run_checkpoint

    out = tmp_path / "study"
    assert main(["almi", "study", "--scale", "tiny", "--deploy-steps", "192", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["methods"]
    assert set(results) == set(METHODS)
    steps = {m: results[m]["env_steps"][0] for m in METHODS}  # every stage counted: 4 stages of 768, then 192
    assert all(s >= 4 * 768 + 192 for s in steps.values()), steps
    deployed = [
        out / "almi/seed0/stages/lower-deploy",
        out / "open-loop/seed0/stages/lower-deploy",
        out / "whole-body/seed0",
    ]
    for run in deployed:  # every method's last stage against the joint velocity limits
        config = (run / "config.yaml").read_text()
        assert "dof_vel_limits: -5.0" in config and "unclipped_from_steps: 96" in config, run
    assert (out / "whole-body/seed0/stages/whole-body/eval.json").is_file()
    open_loop = load_run_checkpoint(out / "open-loop" / "seed0").policy
    assert isinstance(open_loop.parts[1], ReferencePolicy)  # no upper policy: the reference, open loop
    assert "| whole-body | 1 |" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "jobs").glob("*.json")) == sorted(f"seed0-{m}.json" for m in METHODS)
    for method in METHODS:  # the runs gone (another session): the job files alone give the same report
        shutil.rmtree(out / method)
    report = (out / "report.md").read_text()
    assert main(["almi", "study", "--scale", "tiny", "--deploy-steps", "192", "--out", str(out)]) == 0
    assert (out / "report.md").read_text() == report and not (out / "almi").exists()
    (out / "report.md").unlink()
    assert main(["almi", "study", "--scale", "tiny", "--deploy-steps", "192", "--report", "--out", str(out)]) == 0
    assert (out / "report.md").read_text() == report.replace("--out", "--report --out")
    assert main(["almi", "study", "--report", "--out", str(tmp_path / "none")]) == 2
    assert f"{tmp_path / 'none' / 'jobs'}: no finished jobs to report" in capsys.readouterr().err


def test_export_dataset_records_clips_times_commands_with_a_language_task(tmp_path, capsys):
    from embody.cli import main
    from embody.datasets.format import load
    from embody.papers.almi.train import compose, make_config
    from embody.robots import get_robot
    from embody.robots.motion import generate_library

    lower, upper = untrained_run(tmp_path, "almi-lower"), untrained_run(tmp_path, "almi-upper")
    compose(lower, upper, tmp_path / "whole", make_config("tiny"))
    clips = generate_library(get_robot("h1_2"), families=("wave", "carry"))
    for i in (0, 18):  # "wave left, …" and "carry, …" (wave right comes between)
        clips[i].save(tmp_path / "clips" / f"{i:02d}.safetensors")
    argv = ["almi", "export-dataset", str(tmp_path / "whole"), "--clips", str(tmp_path / "clips"), "--commands", "2"]
    assert main(argv + ["--seconds", "0.2", "--no-video", "--out", str(tmp_path / "ds")]) == 0
    ds = load(tmp_path / "ds")
    assert ds.num_episodes == 4
    assert {ds.task(i) for i in range(4)} == {
        "stand still while waving the left hand",
        "walk forward slowly while waving the left hand",
        "stand still while holding both arms as if carrying a box",
        "walk forward slowly while holding both arms as if carrying a box",
    }
    ep = ds.episode(0)
    assert ep["embody.base_pose"].shape == (ds.row(0).length, 7) and ep["embody.imu"].shape[1] == 10
    assert main(argv[:-2] + ["--commands", "11", "--out", str(tmp_path / "x")]) == 2  # 10 templates
    argv[2] = str(lower)  # one part, not the whole body: was a KeyError traceback
    assert main(argv + ["--out", str(tmp_path / "y")]) == 2
    assert "an almi (whole-body) run is needed, this one trained almi-lower" in capsys.readouterr().err


def test_bench_learning_times_the_frozen_part_and_knows_almi_lower():
    from embody.benchmarks.learning import bars, rollout_rates

    assert bars()["almi-lower"] == ("length", 5.0)
    rates = rollout_rates("almi-lower", ["n_envs=4"], steps=3)
    assert set(rates) == {"one policy", "two policies"} and min(rates.values()) > 0
