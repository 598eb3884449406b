"""cartpole-swingup: swing the pole up from hanging and balance it (DeepMind Control Suite).

Same model, reset distribution and smooth reward as dm_control's swingup, with a 0.04 s
control period (4 physics steps of 0.01 s) over a 10 s episode: 250 steps, reward ≤ 1 per
step, so the maximum return is 250.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.arrays import like, namespace
from embody.robots import RobotState

from ..base import InitState, SimConfig
from ..rewards import tolerance
from ..task import Task, TaskConfig


@dataclass
class CartpoleSwingupConfig(TaskConfig):
    """cartpole-swingup settings; ``init_noise`` is the std of the initial state around the pole hanging down."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(physics_dt=0.01, decimation=4, control="torque"))
    max_episode_steps: int = 250
    reward_weights: dict[str, float] = field(default_factory=lambda: {"swingup": 1.0})
    camera: str | None = "fixed"
    init_noise: float = 0.01


class CartpoleSwingup(Task):
    """Swing the pole up from hanging down and balance it, by cart force (torque control)."""

    name = "cartpole-swingup"
    learning_bar = ("return", 0.7)
    robot_name = "cartpole"
    differentiable = True  # observe, reward and action_to_command take torch tensors too (sims/diff_env.py)
    config_class = CartpoleSwingupConfig
    train_defaults = {"n_envs": 256, "steps": 2_500_000, "ppo.lr_schedule": "linear"}  # adaptive LR oscillates here

    @property
    def observation_size(self) -> int:
        return 5  # cart x, cos θ, sin θ, cart ẋ, θ̇

    @property
    def max_episode_return(self) -> float | None:
        """Every step at ``swingup``'s maximum of 1 (``quadratic`` peaks at 0); None without ``swingup``."""
        w = self.config.reward_weights.get("swingup", 0.0)
        return float(self.config.max_episode_steps * w) if w > 0 else None

    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        k, s = len(env_ids), self.config.init_noise
        pos = s * self.rng.standard_normal((k, 2)) + np.array([0.0, np.pi])
        return InitState(joint_pos=pos, joint_vel=s * self.rng.standard_normal((k, 2)))

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        """Cart force: clip(a, -1, 1) times the actuator's torque limit."""
        xp = namespace(action)
        return xp.clip(action, -1.0, 1.0) * like(self.robot.torque_limit[self.robot.actuated], action)

    def observe(self, state: RobotState) -> np.ndarray:
        """(n, 5): cart x, cos θ, sin θ, cart ẋ, θ̇ (θ = 0 upright); float32, or the state's tensors' dtype."""
        x, th, v = state.joint_pos[:, 0], state.joint_pos[:, 1], state.joint_vel
        xp = namespace(x)
        obs = xp.stack([x, xp.cos(th), xp.sin(th), v[:, 0], v[:, 1]], axis=1)
        return obs.astype(np.float32) if xp is np else obs

    def reward_swingup(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """dm_control's smooth swingup reward: upright × centered × small control × small velocity."""
        xp = namespace(action)
        upright = (xp.cos(state.joint_pos[:, 1]) + 1) / 2
        centered = (1 + tolerance(state.joint_pos[:, 0], margin=2)) / 2
        u = xp.clip(action[:, 0], -1, 1)
        small_control = (4 + tolerance(u, margin=1, value_at_margin=0, sigmoid="quadratic")) / 5
        small_velocity = (1 + tolerance(state.joint_vel[:, 1], margin=5)) / 2
        return upright * centered * small_control * small_velocity

    def reward_quadratic(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """dflex's swing-up cost as a reward (SHAC's and D.VA's cart-pole): −(θ² + 0.1 θ̇² + 0.05 x² + 0.1 ẋ²), θ
        wrapped to [−π, π]. Off by default; its gradient is steepest hanging down, where ``swingup``'s vanishes."""
        xp = namespace(action)
        th = xp.arctan2(xp.sin(state.joint_pos[:, 1]), xp.cos(state.joint_pos[:, 1]))
        x, v = state.joint_pos[:, 0], state.joint_vel
        return -(th**2 + 0.1 * v[:, 1] ** 2 + 0.05 * x**2 + 0.1 * v[:, 0] ** 2)
