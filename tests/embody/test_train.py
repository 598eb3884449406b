import pytest
import torch

from embody.policies.checkpoint import load_checkpoint
from embody.train import resolve_config, train


@pytest.mark.slow
def test_ppo_learns_cartpole_swingup(tmp_path):
    """A short run (1M env steps, ~40 s on 2 cores) gets most of the way: ≥ 60% of max return.
    The full default run and 3 seeds are in `embody bench learning`."""
    cfg = resolve_config("cartpole-swingup", steps=1_000_000, seed=0)
    cfg.video = False
    summary = train(cfg, tmp_path / "run")
    assert summary["return_fraction_of_max"] >= 0.6, summary


def test_cuda_request_without_a_gpu_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the cuda path runs instead (embody train --device cuda)")
    cfg = resolve_config("cartpole-swingup", steps=100, device="cuda")
    from embody.config import ConfigError

    with pytest.raises(ConfigError, match="CUDA"):
        train(cfg, tmp_path / "run")


def test_a_run_can_start_from_another_runs_policy(tmp_path):
    from embody.runs import load_run_checkpoint

    cfg = resolve_config("cartpole-swingup", steps=512, n_envs=8, seed=0)
    cfg.video, cfg.eval_episodes = False, 1
    train(cfg, tmp_path / "first")
    first = load_run_checkpoint(tmp_path / "first").policy
    cfg.init_from, cfg.steps, cfg.ppo.lr = str(tmp_path / "first"), 0, 0.0  # no update: the weights carry over
    train(cfg, tmp_path / "second")
    second = load_run_checkpoint(tmp_path / "second").policy
    for (k, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, msg=k)
    cfg.init_from = str(tmp_path / "missing")
    with pytest.raises(Exception, match="missing"):
        train(cfg, tmp_path / "third")
    assert not (tmp_path / "third").exists()  # refused before a run directory was made


def test_eval_episodes_zero_trains_without_a_final_evaluation(tmp_path):
    from embody.config import ConfigError

    cfg = resolve_config("cartpole-swingup", steps=256, n_envs=8, seed=0)
    cfg.video, cfg.eval_episodes = False, 0
    assert train(cfg, tmp_path / "run") == {"eval_episodes": 0}
    assert (tmp_path / "run" / "checkpoint").exists() and not (tmp_path / "run" / "eval.json").exists()
    cfg.eval_episodes = -1
    with pytest.raises(ConfigError, match="eval_episodes = -1"):
        train(cfg, tmp_path / "negative")


def test_checkpoints_come_by_report_count_and_by_training_time():
    from embody.train import CheckpointClock, TrainConfig

    by_time = CheckpointClock(TrainConfig(checkpoint_every=1000, checkpoint_minutes=1.0), time_s=100.0)
    # reports 25 s apart (a resumed run starts its clock at its saved time): due each time 60 s have passed
    assert [by_time(100.0 + 25 * i) for i in range(1, 7)] == [False, False, True, False, False, True]
    by_count = CheckpointClock(TrainConfig(checkpoint_every=2, checkpoint_minutes=0.0), time_s=0.0)
    assert [by_count(1e6 * i) for i in range(1, 5)] == [False, True, False, True]


def test_ctrl_c_saves_a_checkpoint_and_says_how_to_resume(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    argv = [sys.executable, "-m", "embody.cli", "train", "cartpole-swingup", "--envs", "8", "--steps", "10000000"]
    proc = subprocess.Popen([*argv, "--set", "ppo.n_steps=8", "--out", str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    metrics = out / "metrics.csv"
    while time.monotonic() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) > 1):
        time.sleep(0.2)  # until the first iteration is logged
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"interrupted: its last checkpoint is in {out}; `embody train --resume {out}` continues" in err
    assert load_checkpoint(out / "checkpoint").meta["env_steps"] > 0


def test_a_resumed_run_continues_the_tasks_curricula(tmp_path):
    """h1_2-velocity's penalty level and training step count (for reward_onset_steps) are saved with the
    checkpoint and restored by --resume, not restarted."""
    from embody.runs import load_run_checkpoint

    cfg = resolve_config("h1_2-velocity", steps=2 * 4 * 24, n_envs=4, seed=0, overrides=["ppo.n_steps=24"])
    cfg.video, cfg.eval_episodes, cfg.max_time_s = False, 0, 0.0
    train(cfg, tmp_path / "run")
    saved = load_run_checkpoint(tmp_path / "run").meta["curriculum"]
    assert saved["trained_steps"] == 2 * 4 * 24 and 0.1 <= saved["penalty_level"] <= 1.0
    cfg.steps = 3 * 4 * 24
    train(cfg, tmp_path / "run", resume=True)
    assert load_run_checkpoint(tmp_path / "run").meta["curriculum"]["trained_steps"] == 3 * 4 * 24
