"""RandomPolicy: the one uniform-random baseline (benchmarks, the blindfolded study, task tests)."""

import torch

from embody.policies.base import Policy, RandomPolicy


def test_random_policy_shape_range_and_seed():
    obs = torch.zeros(64, 5)
    policy = RandomPolicy(5, 3, seed=7)
    assert isinstance(policy, Policy) and (policy.obs_size, policy.action_size) == (5, 3)
    a = policy.act(obs)
    assert a.shape == (64, 3) and a.dtype == torch.float32
    assert a.min() >= -1.0 and a.max() <= 1.0 and a.std() > 0.4  # uniform on [-1, 1]: std 0.577
    torch.manual_seed(123)  # the global RNG does not touch the policy's own generator
    assert torch.equal(RandomPolicy(5, 3, seed=7).act(obs), a)
    assert not torch.equal(RandomPolicy(5, 3, seed=8).act(obs), a)
    assert not torch.equal(policy.act(obs), a)  # a stream, not one draw repeated
    policy.reset()


def test_random_policy_draws_what_the_blindfolded_baseline_drew():
    """The study's random baseline (once its own class in papers/blindfolded/peg.py): seeded torch.rand
    mapped to [-1, 1], so folding it into this class changed none of its numbers."""
    gen = torch.Generator().manual_seed(3)
    policy = RandomPolicy(33, 3, seed=3)
    for n in (16, 5):
        assert torch.equal(policy.act(torch.zeros(n, 33)), torch.rand(n, 3, generator=gen) * 2 - 1)
