"""A task differentiated through its simulator, for first-order policy gradients (SHAC, D.VA).

``DiffEnv`` wraps a VecEnv whose task is ``differentiable`` (its observation, reward terms and action mapping take
tensors) and whose simulator has capability ``differentiable``. States are (n, d) float64 tensors in the
simulator's diff layout. ``step(x, action)`` returns the next state with gradients reaching ``x`` and ``action``
through the physics (sims/diff.py) and the task's reward, while the wrapped VecEnv takes the same step for
everything that is not differentiated — terminations, time limits, episode statistics, resets — so the numbers
the two paths report are the same ones. Reset states enter detached: a gradient never crosses an episode boundary.
While the reward is computed, the task's ``last_action`` is the previous step's action tensor, so a term on the
action rate differentiates through both actions; it carries its gradient only while the state does (a window that
starts from a detached state starts from a detached previous action too).

The wrapped env may be a ``PixelEnv``: its rendered, stacked frames (``obs``) are what a visual actor reads, outside
the gradient by construction (D.VA), while ``observe`` still gives the task's differentiable state observation.

Tasks with pushes (velocity kicks between steps) are refused: the kick would happen outside the gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from embody.robots import RobotState

from .base import UnsupportedTask
from .diff import differentiable_step, require_differentiable
from .vec_env import StepInfo, VecEnv


@dataclass
class DiffStep:
    """One differentiable step. ``x_next`` (n, d): the state the step reached (before any reset; for terminal
    values); ``x`` (n, d): where the next step starts (reset rows detached); ``reward`` (n,) tensor with gradients;
    ``terminated``, ``truncated`` (n,) bool numpy; ``info``: the VecEnv's StepInfo."""

    x_next: torch.Tensor
    x: torch.Tensor
    reward: torch.Tensor
    terminated: np.ndarray
    truncated: np.ndarray
    info: StepInfo


class DiffEnv:
    """See the module docstring; ``env`` is the VecEnv whose task and simulator are differentiated."""

    def __init__(self, env: VecEnv):
        task = env.task
        if not task.differentiable:
            raise UnsupportedTask(
                f"task {task.name!r} is not differentiable (its reward and observation are numpy-only)"
            )
        if task.sample_pushes() is not None:
            raise UnsupportedTask(f"task {task.name!r} pushes its robot between steps, outside the gradient")
        self.env, self.task, self.sim = env, task, require_differentiable(env.sim)
        self.n_envs, self.observation_size, self.action_size = env.n_envs, env.observation_size, env.action_size
        self.state_observation_size = getattr(env, "state_observation_size", env.observation_size)  # observe()'s
        self.obs: np.ndarray | None = None  # the wrapped env's last observation (n, o): of the state x last returned
        self.last_action = torch.from_numpy(task.last_action.copy())  # (n, a): the task's, as a tensor
        self._q, self._v = (torch.from_numpy(c) for c in self.sim.diff_joint_columns())

    def reset(self) -> torch.Tensor:
        """Reset every env; their states (n, d)."""
        self.obs, _ = self.env.reset()
        self.last_action = torch.from_numpy(self.task.last_action.copy())
        return torch.from_numpy(self.sim.diff_state())

    def robot_state(self, x: torch.Tensor) -> RobotState:
        """The differentiable part of a RobotState (joint positions and velocities) from states (n, d); the
        other fields are None, so that a task reading them fails loudly instead of differentiating a constant."""
        return RobotState(joint_pos=x[:, self._q], joint_vel=x[:, self._v], joint_torque=None, time=None)

    def observe(self, x: torch.Tensor) -> torch.Tensor:
        """The task's observation (n, o) of states x, differentiable."""
        return self.task.observe(self.robot_state(x))

    def step(self, x: torch.Tensor, action: torch.Tensor) -> DiffStep:
        """Advance every env from states ``x`` (n, d) under ``action`` (n, a); see DiffStep."""
        x_next = differentiable_step(self.sim, x, self.task.action_to_command(action))
        reward = self._reward(x_next, action, self.last_action if x.requires_grad else self.last_action.detach())
        self.obs, _, terminated, truncated, info = self.env.step(action.detach().cpu().numpy())
        done = torch.from_numpy(terminated | truncated)[:, None]
        x_start = torch.where(done, torch.from_numpy(self.sim.diff_state()).to(x_next), x_next)
        self.last_action = torch.where(done, torch.from_numpy(self.task.last_action).to(action), action)
        return DiffStep(x_next, x_start, reward, terminated, truncated, info)

    def _reward(self, x_next: torch.Tensor, action: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """The task's reward (n,) of ``x_next`` with ``previous`` as its ``last_action`` meanwhile."""
        numpy_last, self.task.last_action = self.task.last_action, previous.to(action)
        try:
            return self.task.reward(self.robot_state(x_next), action)[0]
        finally:
            self.task.last_action = numpy_last
