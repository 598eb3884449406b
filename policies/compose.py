"""Whole-body actions from several policies, each owning a joint group of the robot.

ALMI trains a lower-body (locomotion) and an upper-body (motion tracking) policy against
each other; at run time their actions are stitched into one whole-body action in motor order.
"""

from __future__ import annotations

import numpy as np
import torch

from embody.robots import RobotSpec


class GroupedPolicy:
    """``parts`` maps a RobotSpec group name to (policy, observation function).

    Each observation function turns the shared observation (n, o) into that policy's input;
    each policy returns actions for its group's joints (n, len(group)). Groups must cover the
    robot's actuated joints exactly once.
    """

    def __init__(self, robot: RobotSpec, parts: dict[str, tuple]):
        self.robot, self.parts = robot, parts
        self.index = {g: torch.as_tensor(robot.group(g)) for g in parts}
        covered = np.sort(np.concatenate([robot.group(g) for g in parts]))
        if not np.array_equal(covered, robot.actuated):
            raise ValueError(f"groups {list(parts)} must cover each actuated joint of {robot.name} once")
        self.obs_size = None
        self.action_size = robot.n_actions

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → whole-body action (n, ``robot.n_actions``) in motor order, each group's
        columns from its own policy; same dtype and device as ``obs``."""
        action = torch.zeros(obs.shape[0], self.action_size, dtype=obs.dtype, device=obs.device)
        for group, (policy, observe) in self.parts.items():
            action[:, self.index[group]] = policy.act(observe(obs), deterministic=deterministic)
        return action

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        for policy, _ in self.parts.values():
            policy.reset(env_ids)
