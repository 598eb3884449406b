"""gym-humanoid: gymnasium's Humanoid-v5 MDP on embody's simulator, for speed benchmarks.

Same model (robot ``gym_humanoid``), frame skip 5 (0.015 s control period), reset noise
(±0.01 uniform on qpos and qvel; the quaternion renormalized), termination (torso height
outside (1.0, 2.0)) and reward terms as Humanoid-v5, with these differences, all cheap to state:

* actions are gymnasium's ctrl / 0.4, in [-1, 1]; the command is ``0.4 * gear * action``;
* the observation is qpos[2:] and qvel (45 values, Humanoid-v5 without cinert, cvel,
  qfrc_actuator and cfrc_ext), with the joint columns in actuator order;
* the forward term uses the torso's x velocity instead of the center of mass's (RobotState
  carries no body positions), and there is no contact cost (weight 5e-7 in Humanoid-v5).

It reads the privileged base state (height, orientation, velocity) into the policy
observation, as Humanoid-v5 does: a simulation benchmark task, not a deployable one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.config import Span
from embody.robots import RobotState
from embody.rotations import quat_rotate

from ..base import InitState, SimConfig
from ..task import Task, TaskConfig


@dataclass
class GymHumanoidConfig(TaskConfig):
    """gym-humanoid settings, Gymnasium's Humanoid-v5 defaults; ``healthy_z`` is the torso height range [m] that counts
    as upright."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(decimation=5, control="torque"))
    max_episode_steps: int = 1000
    reward_weights: dict[str, float] = field(default_factory=lambda: {"healthy": 5.0, "forward": 1.25, "ctrl": -0.1})
    healthy_z: Span = (1.0, 2.0)
    reset_noise: float = 0.01


class GymHumanoid(Task):
    """Gymnasium's Humanoid-v5 MDP on embody's simulator, for speed benchmarks (differences: module docstring)."""

    name = "gym-humanoid"
    robot_name = "gym_humanoid"
    config_class = GymHumanoidConfig

    CTRL_MAX = 0.4  # gymnasium's ctrlrange

    @property
    def observation_size(self) -> int:
        return 5 + 6 + 2 * self.robot.n_joints  # z, quat, base velocity, joints

    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        k, s, j = len(env_ids), self.config.reset_noise, self.robot.n_joints
        u = lambda *shape: self.rng.uniform(-s, s, shape)  # noqa: E731
        quat = np.array([1.0, 0, 0, 0]) + u(k, 4)
        return InitState(
            joint_pos=self.robot.default_pose + u(k, j),
            joint_vel=u(k, j),
            base_pos=np.array(self.robot.default_base_pos) + u(k, 3),
            base_quat=quat / np.linalg.norm(quat, axis=1, keepdims=True),
            base_lin_vel=u(k, 3),
            base_ang_vel=u(k, 3),
        )

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        return np.clip(action, -1.0, 1.0) * self.robot.torque_limit

    def observe(self, state: RobotState) -> np.ndarray:
        """(n, 11 + 2j): torso z, torso quaternion w,x,y,z, joint positions, world linear velocity, body angular
        velocity, joint velocities."""
        p = state.privileged
        world_lin_vel = quat_rotate(p.base_quat, p.base_lin_vel)  # MuJoCo's qvel[:3]
        return np.concatenate(
            [p.base_pos[:, 2:], p.base_quat, state.joint_pos, world_lin_vel, p.base_ang_vel, state.joint_vel], axis=1
        ).astype(np.float32)

    def _healthy(self, state: RobotState) -> np.ndarray:
        lo, hi = self.config.healthy_z
        z = state.privileged.base_pos[:, 2]
        return (lo < z) & (z < hi)

    def terminated(self, state: RobotState) -> np.ndarray:
        """The torso height left ``healthy_z``."""
        return ~self._healthy(state)

    def reward_healthy(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        return self._healthy(state).astype(np.float64)

    def reward_forward(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """Forward (world x) velocity of the base [m/s]."""
        p = state.privileged
        return quat_rotate(p.base_quat, p.base_lin_vel)[:, 0]

    def reward_ctrl(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """Gymnasium's sum of squared ctrl."""
        return np.sum((self.CTRL_MAX * np.clip(action, -1.0, 1.0)) ** 2, axis=1)
