"""CompositePolicy: parts on blocks of the observation and action, saved and loaded as data."""

import pytest
import torch

from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
from embody.policies.checkpoint import load_checkpoint, save_checkpoint
from embody.policies.compose import CompositePolicy


def parts():
    cfg = ActorCriticConfig(actor_hidden=[8], critic_hidden=[8])
    torch.manual_seed(0)
    return ActorCritic(5, 3, 2, cfg), ActorCritic(4, 2, 0, cfg)


def test_each_part_reads_its_observation_block_and_fills_its_action_block():
    lower, upper = parts()
    policy = CompositePolicy.of([(lower, (0, 5), (0, 3)), (upper, (5, 9), (3, 5))])
    obs = torch.randn(6, 9)
    action = policy.act(obs)
    assert action.shape == (6, 5) and policy.obs_size == 9 and policy.action_size == 5
    torch.testing.assert_close(action[:, :3], lower.act(obs[:, :5]))
    torch.testing.assert_close(action[:, 3:], upper.act(obs[:, 5:]))


def test_a_composite_checkpoint_round_trips_as_data(tmp_path):
    lower, upper = parts()
    policy = CompositePolicy.of([(lower, (0, 5), (0, 3)), (upper, (5, 9), (3, 5))])
    save_checkpoint(tmp_path / "ckpt", policy, {"task": "t"})
    back = load_checkpoint(tmp_path / "ckpt", expect_spec={"task": "t"}).policy
    assert isinstance(back, CompositePolicy) and back.layout == policy.layout
    obs = torch.randn(4, 9)
    torch.testing.assert_close(back.act(obs), policy.act(obs))


def test_action_blocks_must_tile_the_action():
    lower, upper = parts()
    with pytest.raises(ValueError, match="tile"):
        CompositePolicy.of([(lower, (0, 5), (0, 3)), (upper, (5, 9), (4, 6))])
    with pytest.raises(ValueError, match="tile"):
        CompositePolicy.of([(lower, (0, 5), (0, 3)), (upper, (5, 9), (0, 2))])
