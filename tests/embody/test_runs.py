"""embody.runs: the one writer and reader of run directories."""

import subprocess
import sys

import pytest
import torch

from embody.config import to_dict
from embody.policies.actor_critic import ActorCritic
from embody.policies.checkpoint import CheckpointError
from embody.runs import build_env, evaluate_run, load_run, load_run_checkpoint, start_run, write_policy_run
from embody.train import resolve_config


def test_runs_imports_without_train():
    """train.py imports runs.py; runs.py reads TrainConfig lazily, so importing it alone must not cycle."""
    code = "import sys, embody.runs; assert 'embody.train' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_policy_trained_elsewhere_becomes_an_evaluable_run(tmp_path):
    cfg = resolve_config("cartpole-swingup", n_envs=2)
    env = build_env(cfg, n_envs=1)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    env.close()
    run = write_policy_run(tmp_path / "run", cfg, policy, {"env_steps": 0, "note": "x"})
    loaded, ckpt_dir = load_run(run)
    assert to_dict(loaded) == to_dict(cfg) and ckpt_dir == run / "checkpoint"
    ckpt = load_run_checkpoint(run)
    assert ckpt.meta["note"] == "x"
    for a, b in zip(ckpt.policy.state_dict().values(), policy.state_dict().values()):
        assert torch.equal(a, b)
    mean, sampled = evaluate_run(run, episodes=1), evaluate_run(run, episodes=1, deterministic=False)
    assert mean["task"] == "cartpole-swingup" and (mean["actions"], sampled["actions"]) == ("mean", "sampled")
    assert mean["return_mean"] != sampled["return_mean"]  # same seed: only the action noise differs


def test_training_keeps_snapshots_that_evaluate_like_the_checkpoint(tmp_path):
    from embody.train import snapshot_name, train

    cfg = resolve_config("cartpole-swingup", n_envs=4, steps=4 * 32 * 2, overrides=["video=false", "eval_episodes=1"])
    cfg.snapshots_s = [1e-9, 1e9]  # the first passes at once, the second never
    train(cfg, tmp_path / "run")
    assert snapshot_name(1e-9) == "checkpoint_1e-09s"
    assert (tmp_path / "run" / "checkpoint_1e-09s").is_dir() and not (tmp_path / "run" / snapshot_name(1e9)).exists()
    assert load_run_checkpoint(tmp_path / "run", checkpoint="checkpoint_1e-09s").meta["iteration"] == 1
    summary = evaluate_run(tmp_path / "run", episodes=1, checkpoint="checkpoint_1e-09s")
    assert summary["episodes"] == 1 and "survival_rate" not in summary  # cartpole's terminations are no falls


def test_a_checkpoint_is_checked_against_the_env_it_is_loaded_for(tmp_path):
    cart = resolve_config("cartpole-swingup")
    env = build_env(cart, n_envs=1)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cart.policy)
    run = write_policy_run(tmp_path / "run", cart, policy)
    load_run_checkpoint(run, expect=env)
    env.close()
    start_run(tmp_path / "run", resolve_config("peg-insert"))  # a config that no longer fits the checkpoint
    cfg, _ = load_run(tmp_path / "run")
    other = build_env(cfg, n_envs=1)
    with pytest.raises(CheckpointError, match="different observation/action spec"):
        load_run_checkpoint(run, expect=other)
    other.close()


def test_reward_terms_are_plotted_beside_the_learning_curve(tmp_path):
    from embody.runs import plot_learning_curve

    rows = [
        {"env_steps": i, "time_s": i, "episode_return": i, "reward/alive": 0.1, "reward/torques": -i} for i in range(5)
    ]
    plot_learning_curve(tmp_path, rows)
    assert (tmp_path / "learning_curve.png").stat().st_size > 1000
    assert (tmp_path / "reward_terms.png").stat().st_size > 1000
    (tmp_path / "plain").mkdir()
    plot_learning_curve(tmp_path / "plain", [{"env_steps": 1, "time_s": 1, "episode_return": 0}])
    assert not (tmp_path / "plain" / "reward_terms.png").exists()  # no named terms: no figure
