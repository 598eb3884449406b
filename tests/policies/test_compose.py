import pytest
import torch

from embody.policies.compose import GroupedPolicy
from embody.robots import get_robot


class Constant:
    def __init__(self, value, size):
        self.value, self.size, self.resets = value, size, 0

    def act(self, obs, deterministic=True):
        return torch.full((obs.shape[0], self.size), self.value)

    def reset(self, env_ids=None):
        self.resets += 1


def test_lower_and_upper_body_policies_fill_their_groups():
    h1 = get_robot("h1_2")
    lower, upper = Constant(1.0, 12), Constant(2.0, 15)
    policy = GroupedPolicy(h1, {"lower_body": (lower, lambda o: o[:, :4]), "upper_body": (upper, lambda o: o)})
    action = policy.act(torch.zeros(3, 10))
    assert action.shape == (3, 27)
    assert (action[:, :12] == 1).all() and (action[:, 12:] == 2).all()
    policy.reset()
    assert lower.resets == upper.resets == 1


def test_groups_must_cover_the_robot():
    h1 = get_robot("h1_2")
    with pytest.raises(ValueError, match="cover"):
        GroupedPolicy(h1, {"legs": (Constant(0, 12), lambda o: o)})
