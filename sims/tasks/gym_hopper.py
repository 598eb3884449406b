"""hopper: gymnasium's Hopper-v5 MDP on embody's simulator, differentiable (SHAC, D.VA).

Same model (robot ``gym_hopper``), frame skip 4 (0.008 s control period), reset noise (±0.005 uniform on qpos and
qvel), observation (qpos[1:] and clip(qvel, ±10): 11 values), termination (unhealthy: torso height ≤ 0.7 m, torso
angle outside ±0.2 rad, or any of qpos[2:], qvel outside ±100) and reward terms (forward velocity, healthy 1, control
cost 1e-3 Σ a²) as Hopper-v5, with these differences:

* the integrator is MuJoCo's Euler instead of RK4 (robots/gym_hopper.py: MuJoCo's transition derivatives need it);
* the forward term is the root's x velocity after the step (qvel[0]) instead of the finite difference of its
  position over the step (the reward sees one state, so that it is differentiable in that state alone);
* actions are gymnasium's ctrl in [-1, 1], clipped; the command is 200 N·m · action (gear 200).

Observation, reward terms and action mapping take numpy arrays or torch tensors (``differentiable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.arrays import like, namespace
from embody.robots import RobotState

from ..base import InitState, SimConfig
from ..task import Task, TaskConfig


@dataclass
class GymHopperConfig(TaskConfig):
    """hopper settings, Hopper-v5's defaults."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(decimation=4, control="torque"))
    max_episode_steps: int = 1000
    reward_weights: dict[str, float] = field(default_factory=lambda: {"forward": 1.0, "healthy": 1.0, "ctrl": -1e-3})
    healthy_z: float = 0.7
    healthy_angle: float = 0.2
    healthy_state: float = 100.0
    reset_noise: float = 5e-3


class GymHopper(Task):
    """Gymnasium's Hopper-v5 MDP on embody's simulator, differentiable (differences: module docstring)."""

    name = "hopper"
    robot_name = "gym_hopper"
    config_class = GymHopperConfig
    terminations_are_falls = True
    differentiable = True

    @property
    def observation_size(self) -> int:
        return 11

    @property
    def max_episode_return(self) -> float | None:
        return None  # the forward term is unbounded

    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        k, s, j = len(env_ids), self.config.reset_noise, self.robot.n_joints
        return InitState(
            joint_pos=self.robot.default_pose + self.rng.uniform(-s, s, (k, j)),
            joint_vel=self.rng.uniform(-s, s, (k, j)),
        )

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        """Joint torques: clip(a, -1, 1) times 200 N·m."""
        xp = namespace(action)
        return xp.clip(action, -1.0, 1.0) * like(self.robot.torque_limit[self.robot.actuated], action)

    def observe(self, state: RobotState) -> np.ndarray:
        """(n, 11): qpos[1:] (root z, root angle, thigh, leg, foot), clip(qvel, ±10); float32, or the tensors'
        dtype."""
        xp = namespace(state.joint_pos)
        obs = xp.concatenate([state.joint_pos[:, 1:], xp.clip(state.joint_vel, -10.0, 10.0)], axis=1)
        return obs.astype(np.float32) if xp is np else obs

    def _healthy(self, state: RobotState):
        c, q, v = self.config, state.joint_pos, state.joint_vel
        bounded = (abs(q[:, 2:]) < c.healthy_state).all(1) & (abs(v) < c.healthy_state).all(1)
        return bounded & (q[:, 1] > c.healthy_z) & (abs(q[:, 2]) < c.healthy_angle)

    def terminated(self, state: RobotState) -> np.ndarray:
        """Unhealthy (module docstring)."""
        return ~self._healthy(state)

    def reward_forward(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """The root's x velocity [m/s]."""
        return state.joint_vel[:, 0]

    def reward_healthy(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        return self._healthy(state) * 1.0

    def reward_ctrl(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """Σ ctrl² (ctrl = the clipped action)."""
        xp = namespace(action)
        return (xp.clip(action, -1.0, 1.0) ** 2).sum(1)
