"""PPO: a short run on cartpole, GAE by hand, and bootstrapping of time-limit truncations."""

import math

import numpy as np
import pytest
import torch
from policy_helpers import cartpole, small_mlp

from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
from embody.policies.ppo import PPO, PPOConfig, RolloutBuffer
from embody.sims.vec_env import StepInfo


def test_two_iterations_on_cartpole():
    env = cartpole(n_envs=8, max_episode_steps=12)
    ppo = PPO(env, small_mlp(5, 1), PPOConfig(n_steps=16, epochs=2, minibatches=2))
    rows = []
    ppo.learn(2 * 16 * 8, rows.append)
    assert [r["iteration"] for r in rows] == [1, 2] and ppo.env_steps == 256
    for r in rows:
        assert all(math.isfinite(v) for v in r.values()), r
        assert r["episodes"] > 0
        assert {k for k in r if k.startswith("reward/")} == {f"reward/{k}" for k in env.task.config.reward_weights}
    env.close()


def test_the_update_runs_on_its_own_threads_and_gives_them_back():
    env = cartpole(n_envs=4, max_episode_steps=12)
    seen = []
    ppo = PPO(env, small_mlp(5, 1), PPOConfig(n_steps=8, epochs=1, minibatches=1), update_threads=2)
    update = ppo.update
    ppo.update = lambda *a: (seen.append(torch.get_num_threads()), update(*a))[1]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ppo.learn(8 * 4)
        assert seen == [2] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    env.close()


def test_symmetry_adds_each_minibatch_mirror_image_and_needs_a_mirror():
    from embody.policies.ppo import _TorchMirror
    from embody.sims.task import Mirror, SignedPermutation

    swap = SignedPermutation(np.array([1, 0]), np.array([1.0, -1.0]))
    mirror = _TorchMirror(Mirror(swap, SignedPermutation(np.array([0]), np.array([-1.0])), swap), "cpu")
    b = {
        "obs": torch.tensor([[1.0, 2.0]]),
        "critic_obs": torch.tensor([[1.0, 2.0, 3.0]]),
        "actions": torch.tensor([[4.0, 5.0]]),
        "advantages": torch.tensor([0.5]),
    }
    out = mirror.augment(b)
    assert out["obs"].tolist() == [[1.0, 2.0], [2.0, -1.0]]
    assert out["critic_obs"].tolist() == [[1.0, 2.0, 3.0], [2.0, -1.0, -3.0]]
    assert out["actions"].tolist() == [[4.0, 5.0], [5.0, -4.0]] and out["advantages"].tolist() == [0.5, 0.5]
    env = cartpole(n_envs=2)
    with pytest.raises(ValueError, match="mirror symmetry"):
        PPO(env, small_mlp(5, 1), PPOConfig(symmetry=True), mirror=env.task.mirror())
    env.close()


def test_kl_reads_the_rollouts_own_samples_not_the_policys_asymmetry():
    """With the learning rate at 0 only the normalizers move the policy, so the logged KL is ~0 even when the policy
    is far from symmetric (a mirrored sample's old log-probability is its original's; the old code read 0.71)."""
    from embody.sims.task import Mirror, SignedPermutation

    env = cartpole(n_envs=4, max_episode_steps=12)
    flip = lambda d: SignedPermutation(np.arange(d), -np.ones(d))  # noqa: E731
    policy = small_mlp(5, 1)
    with torch.no_grad():
        policy.actor[-1].bias.fill_(0.5)  # mean 0.5 everywhere: the mirrored action -a is unlikely under it
    ppo = PPO(
        env,
        policy,
        PPOConfig(n_steps=8, lr=0.0, lr_schedule="constant", symmetry=True),
        mirror=Mirror(flip(5), flip(0), flip(1)),
    )
    buf = RolloutBuffer(8, 4, 5, policy.critic_size, 1, ppo.device)
    ppo.collect(buf, [])
    stats = ppo.update(buf, 0.0)
    assert abs(stats["kl"]) < 1e-4 and stats["policy_loss"] != 0.0
    env.close()


def test_gae_by_hand():
    buf = RolloutBuffer(3, 1, 1, 1, 1, torch.device("cpu"))
    buf.rewards[:, 0] = torch.tensor([1.0, 2.0, 3.0])
    buf.values[:, 0] = torch.tensor([0.5, 1.0, 1.5])
    buf.dones[:, 0] = torch.tensor([0.0, 1.0, 0.0])  # the episode ends at t = 1
    g, lam, last = 0.9, 0.8, torch.tensor([2.0])
    buf.compute_gae(last, g, lam)
    d2 = 3.0 + g * 2.0 - 1.5  # bootstraps from last_value
    d1 = 2.0 - 1.0  # done: no bootstrap
    d0 = 1.0 + g * 1.0 - 0.5
    adv = [d0 + g * lam * d1, d1, d2]  # nothing flows back across the episode end
    torch.testing.assert_close(buf.advantages[:, 0], torch.tensor(adv))
    torch.testing.assert_close(buf.returns[:, 0], torch.tensor(adv) + buf.values[:, 0])


class StepCounterEnv:
    """Two envs whose observation is their step count; env 0 is truncated after 3 steps,
    env 1 terminates after 2. Every step pays reward 1."""

    n_envs, observation_size, privileged_size, action_size = 2, 1, 0, 1

    def __init__(self):
        self.t = np.zeros(2)

    def _obs(self) -> np.ndarray:
        return self.t[:, None].astype(np.float32)

    def reset(self):
        self.t[:] = 0
        return self._obs(), np.zeros((2, 0), np.float32)

    def step(self, action):
        self.t += 1
        truncated, terminated = np.array([self.t[0] >= 3, False]), np.array([False, self.t[1] >= 2])
        final, done = self._obs(), truncated | terminated
        lengths = self.t[done].astype(np.int64)
        self.t[done] = 0
        empty = np.zeros((2, 0), np.float32)
        info = StepInfo(empty, final, empty, lengths * 1.0, lengths, None, {}, np.zeros(2, bool))
        return self._obs(), np.ones(2, np.float32), terminated, truncated, info


def test_truncation_bootstraps_from_the_final_observation():
    policy = ActorCritic(1, 1, 0, ActorCriticConfig(critic_hidden=[], normalize_obs=False))
    with torch.no_grad():  # V(s) = 2 s + 0.5, a single linear layer
        policy.critic[0].weight.fill_(2.0)
        policy.critic[0].bias.fill_(0.5)
    cfg = PPOConfig(n_steps=6, gamma=0.9)
    ppo = PPO(StepCounterEnv(), policy, cfg)
    buf = RolloutBuffer(6, 2, 1, 1, 1, torch.device("cpu"))
    ppo.collect(buf, [])
    bootstrap = 1.0 + 0.9 * (2.0 * 3 + 0.5)  # V(final obs = 3), not V(reset obs = 0)
    torch.testing.assert_close(buf.rewards[:, 0], torch.tensor([1, 1, bootstrap, 1, 1, bootstrap]))
    torch.testing.assert_close(buf.rewards[:, 1], torch.ones(6))  # termination: no bootstrap
    torch.testing.assert_close(buf.dones[:, 0], torch.tensor([0.0, 0, 1, 0, 0, 1]))
    torch.testing.assert_close(buf.dones[:, 1], torch.tensor([0.0, 1, 0, 1, 0, 1]))
    torch.testing.assert_close(buf.values[:, 0], torch.tensor([0.5, 2.5, 4.5, 0.5, 2.5, 4.5]))
