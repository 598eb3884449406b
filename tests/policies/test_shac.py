"""SHAC (policies/shac.py) over the differentiable cart-pole (sims/diff_env.py)."""

import json

import numpy as np
import pytest
import torch

from embody.policies.shac import SHAC, SHACConfig
from embody.sims.diff_env import DiffEnv
from embody.sims.vec_env import make_env


def shac(n_envs=4, **kw) -> SHAC:
    torch.manual_seed(0)
    env = DiffEnv(make_env("cartpole-swingup", n_envs=n_envs, seed=0))
    return SHAC(env, SHACConfig().policy(env.observation_size, env.action_size), SHACConfig(**kw))


def test_td_lambda_is_the_truncated_lambda_return():
    """Without dones: G^λ_t = (1 − λ) Σ_{k<T−t} λ^(k−1) G^(k)_t + λ^(T−t−1) G^(T−t)_t, the k-step returns G^(k)
    bootstrapped from next_values."""
    learner, rng = shac(horizon=5), np.random.default_rng(0)
    H, g, lam = 5, learner.config.gamma, learner.config.lam
    rewards, values = rng.normal(size=(H, 1)), rng.normal(size=(H, 1))
    got = learner.td_lambda(torch.tensor(rewards), torch.zeros(H, 1, dtype=torch.float64), torch.tensor(values))

    def k_step(t, k):
        return sum(g**i * rewards[t + i, 0] for i in range(k)) + g**k * values[t + k - 1, 0]

    for t in range(H):
        n = H - t
        want = (1 - lam) * sum(lam ** (k - 1) * k_step(t, k) for k in range(1, n)) + lam ** (n - 1) * k_step(t, n)
        assert got[t, 0].item() == pytest.approx(want, rel=1e-9)


def test_a_done_step_bootstraps_from_its_own_next_value_only():
    learner = shac(horizon=3)
    rewards = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)
    values = torch.tensor([[10.0], [20.0], [30.0]], dtype=torch.float64)
    dones = torch.tensor([[0.0], [1.0], [0.0]], dtype=torch.float64)
    got = learner.td_lambda(rewards, dones, values)
    assert got[1, 0].item() == pytest.approx(2.0 + learner.config.gamma * 20.0)  # step 1 ends its episode


def test_actor_loss_has_gradients_through_the_physics_and_nan_or_exploded_gradients_are_skipped():
    learner = shac(horizon=4)
    loss, buf = learner.rollout()
    assert buf["obs"].shape == (4, 4, 5) and buf["rewards"].shape == (4, 4)
    before = [p.detach().clone() for p in learner.optimizer.param_groups[0]["params"]]
    norm = learner.update_actor(loss)
    assert norm > 0 and learner.skipped == 0
    assert any(not torch.equal(b, p) for b, p in zip(before, learner.optimizer.param_groups[0]["params"]))
    loss, _ = learner.rollout()
    before = [p.detach().clone() for p in learner.optimizer.param_groups[0]["params"]]
    learner.update_actor(loss * float("nan"))
    learner.config.skip_grad_norm = 1e-12  # every gradient now counts as exploded
    loss, _ = learner.rollout()
    learner.update_actor(loss)
    assert learner.skipped == 2
    assert all(torch.equal(b, p) for b, p in zip(before, learner.optimizer.param_groups[0]["params"]))


@pytest.mark.slow
def test_shac_learns_to_swing_the_cartpole():
    """24 iterations of 64 envs × 32 steps (~50 k steps): the return of the last finished episodes beats the same
    learner's with the actor frozen (actor lr 0) by half again."""

    def final_return(actor_lr: float) -> float:
        returns = []
        shac(n_envs=64, actor_lr=actor_lr, critic_lr=1e-3).learn(
            64 * 32 * 24, lambda m: returns.append(m["episode_return"]) and False
        )
        return returns[-1]

    learned, frozen = final_return(1e-2), final_return(0.0)
    assert learned > 1.5 * frozen, (learned, frozen)


def test_train_with_shac_writes_a_run_that_evaluates_and_resumes(tmp_path, capsys):
    from embody.cli import main
    from embody.policies.actor_critic import ActorCritic
    from embody.runs import load_run_checkpoint

    out = tmp_path / "run"
    sets = ["shac.horizon=8", "shac.critic_iterations=2", "video=false", "eval_episodes=2"]
    argv = ["train", "cartpole-swingup", "--algo", "shac", "--envs", "4", "--steps", "64", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [32, 64] and (out / "eval.json").exists()
    ck = load_run_checkpoint(out)
    assert isinstance(ck.policy, ActorCritic) and ck.policy.config.squash and ck.meta["iteration"] == 2
    assert main(["train", "--resume", str(out), "--steps", "96"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [32, 64, 96]
    capsys.readouterr()
    assert main(["train", "h1_2-stand", "--algo", "shac", "--steps", "64", "--out", str(tmp_path / "h1")]) == 2
    assert "not differentiable" in capsys.readouterr().err and not (tmp_path / "h1").exists()
