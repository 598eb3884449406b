"""arm-reach: peg_arm brings the peg tip to a sampled target above the board, and holds it.

Actions: absolute joint-position targets around a home pose, q* = q_home + action_scale · a
(a clipped to [-1, 1]), sent through joint PD with gravity compensation (tasks/arm_common.py).
Chosen over delta targets (q* += scale · a) because it trains fastest with PPO: the map from
action to the pose the arm settles in is stationary, so the optimal action for a target is a
constant that a small MLP learns directly; delta targets integrate the exploration noise into
a random walk of the target and make the optimum depend on the history. The home pose puts
the tip at ``home_tip`` with the peg pointing down (solved with the robot-side inverse
kinematics at construction).

Episode: 3 s at 25 Hz (75 control steps of 10 physics steps of 4 ms: free-space reaching needs no
finer step, and it halves the simulation cost; the arm's PD is integrated implicitly). The target is drawn
uniformly from the box [target_low, target_high] (m, robot base frame; the board's hole mouth
is at z = 0) at each reset; the arm starts at the home pose plus uniform joint noise. No early
termination: the arm must reach and hold, and the episode counts as a success when the tip is
within ``success_radius`` (2 cm) of the target at its end.

Observation (33): q − q_home (7), q̇ (7), tip position (3) and orientation quaternion w,x,y,z
(4, MuJoCo's frame-sensor sign), tared wrist wrench (6, see arm_common.py), target (3), target − tip (3).
Privileged observation (3): the target (a reach target is observed anyway; the slot keeps the
teacher/critic interface of the peg tasks).

Reward: weighted named terms (``reward_<name>``): ``reach`` 1 − tanh(d / 0.1) and
``precise`` 1 − tanh(d / 0.01) on the tip-target distance d, minus ``action_rate`` ‖aₜ − aₜ₋₁‖²
and ``joint_vel`` ‖q̇‖².

The tip's pose comes from the robot-side kinematics of the joint positions (``tip_pose``), not
from the simulator's site sensors, which lag the state by one physics step.

Differentiable (SHAC, D.VA; sims/diff_env.py): observation, reward terms and action mapping also
take torch tensors. On that path the tared wrench (``WRENCH`` columns) is the reading the numpy
step took, without a gradient: the F/T sensor's derivatives are not part of the simulator's
transition Jacobians, so a policy's dependence on the wrench is not differentiated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.arrays import like, namespace
from embody.config import ConfigError
from embody.robots import RobotState
from embody.robots.peg_arm.kinematics import DOWN

from ..base import InitState, SimConfig
from ..task import Task, TaskConfig
from .arm_common import WRENCH_SOURCES, ArmIO


@dataclass
class ArmReachConfig(TaskConfig):
    """arm-reach settings; positions in metres, robot base frame."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(physics_dt=0.004, decimation=10, control="pd"))
    max_episode_steps: int = 75
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {"reach": 1.0, "precise": 1.0, "action_rate": -0.05, "joint_vel": -0.002}
    )
    target_low: list[float] = field(default_factory=lambda: [0.4, -0.15, 0.05])  # m, base frame
    target_high: list[float] = field(default_factory=lambda: [0.6, 0.15, 0.25])
    home_tip: list[float] = field(default_factory=lambda: [0.5, 0.0, 0.15])  # tip position of the home pose
    action_scale: float = 0.5  # rad per unit action
    init_noise: float = 0.1  # rad, uniform joint noise around home at reset
    success_radius: float = 0.02  # m
    tare_steps: int = 2
    wrench_source: str = "ft"  # ft | joint_torque (see arm_common.py)


def check_reachable(io: ArmIO, points: np.ndarray, q0: np.ndarray, what: str, tol: float = 1e-3) -> np.ndarray:
    """IK solutions (k, 7) for the tip at ``points`` (k, 3) pointing down; ConfigError if any is out of reach."""
    q = io.model.ik(points, DOWN[None], np.tile(q0, (len(points), 1)), iters=200)
    err = np.linalg.norm(io.model.ee_pose(q)[0] - points, axis=1)
    if (err > tol).any():
        bad = points[np.argmax(err)]
        raise ConfigError(
            f"{what} {bad.round(3).tolist()} is out of the arm's reach with the peg pointing down "
            f"(closest: {err.max() * 100:.1f} cm away)"
        )
    return q


class ArmReach(Task):
    """peg_arm brings the peg tip to a target and holds it (observation, reward: module docstring)."""

    name = "arm-reach"
    learning_bar = ("success", 0.9)
    differentiable = True  # observe, reward and action_to_command take torch tensors too (module docstring)
    WRENCH = slice(21, 27)  # the tared wrench's columns in the observation
    robot_name = "peg_arm"
    config_class = ArmReachConfig
    # 500k env steps: ~100 s at ~5k steps/s on 2 cores, 100% success over 100 evaluation episodes
    train_defaults = {"n_envs": 128, "steps": 500_000, "ppo.n_steps": 25, "ppo.lr": 1e-3, "policy.init_std": 0.5}

    def __init__(self, config: ArmReachConfig, robot, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        c = config
        lo, hi = np.asarray(c.target_low, float), np.asarray(c.target_high, float)
        if lo.shape != (3,) or hi.shape != (3,) or (lo > hi).any():
            raise ConfigError(
                f"target_low {c.target_low} and target_high {c.target_high} must be 3 coordinates with low <= high"
            )
        if lo[2] < 0.02:
            raise ConfigError(f"targets must stay above the board (target_low z >= 0.02 m), got {lo[2]}")
        for name in ("action_scale", "success_radius"):
            if not getattr(c, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(c, name)}")
        if c.init_noise < 0:
            raise ConfigError(f"init_noise must be >= 0, got {c.init_noise}")
        if c.wrench_source not in WRENCH_SOURCES:
            raise ConfigError(f"wrench_source must be one of {list(WRENCH_SOURCES)}, got {c.wrench_source!r}")
        self.lo, self.hi = lo, hi
        self.io = ArmIO(robot, n_envs, c.tare_steps, c.wrench_source)
        home_tip = np.asarray(c.home_tip, float)[None]
        self.home = check_reachable(self.io, home_tip, robot.default_pose, "home_tip")[0]
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
        check_reachable(self.io, corners, self.home, "target box corner")
        self.target = np.tile((lo + hi) / 2, (n_envs, 1))
        self.tip = np.zeros((n_envs, 3))

    @property
    def observation_size(self) -> int:
        return 33

    @property
    def privileged_size(self) -> int:
        return 3

    def requirements(self) -> frozenset[str]:
        return super().requirements() | self.io.requirements()

    # -- episode -------------------------------------------------------------------------
    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        k, s = len(env_ids), self.config.init_noise
        q = np.clip(self.home + self.rng.uniform(-s, s, (k, 7)), self.robot.lower, self.robot.upper)
        return InitState(joint_pos=q, joint_vel=np.zeros((k, 7)))

    def on_reset(self, env_ids: np.ndarray) -> None:
        super().on_reset(env_ids)
        self.io.on_reset(env_ids)

    def sample_commands(self, env_ids: np.ndarray) -> None:
        """Draw new targets uniformly in [target_low, target_high] for ``env_ids``."""
        self.target[env_ids] = self.rng.uniform(self.lo, self.hi, (len(env_ids), 3))

    def after_step(self, action: np.ndarray) -> None:
        super().after_step(action)
        self.io.after_step()

    def action_to_command(self, action):
        """PD targets q_home + action_scale · clip(a, -1, 1), gravity compensated (numpy or torch)."""
        clipped = namespace(action).clip(action, -1.0, 1.0)
        return self.io.pd_command(like(self.home, action) + self.config.action_scale * clipped)

    # -- observation ---------------------------------------------------------------------
    def observe(self, state: RobotState):
        """(n, 33): q − q_home, q̇, tip position, tip quaternion w,x,y,z, tared wrench, target, target − tip.
        numpy float32, or a float64 tensor with gradients (the wrench a constant: module docstring)."""
        q = state.joint_pos
        xp = namespace(q)
        tip, quat = self.tip_pose(state)
        if xp is np:
            wrench, self.tip = self.io.observe(state), tip
        else:
            wrench = like(self.io.wrench, q)
        target = like(self.target, q)
        obs = xp.concatenate([q - like(self.home, q), state.joint_vel, tip, quat, wrench, target, target - tip], 1)
        return obs.astype(np.float32) if xp is np else obs

    def tip_pose(self, state: RobotState):
        """The peg tip's position (n, 3) and quaternion (n, 4) from the robot-side kinematics of the joint
        positions, as a real arm's controller reports it (libfranka's O_T_EE), on both paths alike. MuJoCo's
        frame sensors read the pose one physics step before the state (they are computed before the last
        integration): up to ~7 mm behind while the arm moves fast."""
        model, q = self.io.model, state.joint_pos
        return model.ee_pose(q)[0], model.ee_quat(q)

    def privileged_observe(self, state: RobotState) -> np.ndarray:
        """(n, 3): the target."""
        return self.target.astype(np.float32)

    def distance(self, state: RobotState):
        """Tip-target distance (n,) [m] (numpy or torch)."""
        tip = self.tip_pose(state)[0]
        return namespace(tip).sqrt(((tip - like(self.target, tip)) ** 2).sum(1))

    def success(self, state: RobotState) -> np.ndarray:
        return self.distance(state) < self.config.success_radius

    # -- reward terms ------------------------------------------------------------------------
    def reward_reach(self, state: RobotState, action):
        """1 − tanh(d / 0.1 m) on the tip-target distance d."""
        d = self.distance(state)
        return 1.0 - namespace(d).tanh(d / 0.1)

    def reward_precise(self, state: RobotState, action):
        """1 − tanh(d / 0.01 m) on the tip-target distance d."""
        d = self.distance(state)
        return 1.0 - namespace(d).tanh(d / 0.01)

    def reward_action_rate(self, state: RobotState, action):
        """‖aₜ − aₜ₋₁‖² on actions clipped to [-1, 1]."""
        xp = namespace(action)
        return ((xp.clip(action, -1, 1) - xp.clip(like(self.last_action, action), -1, 1)) ** 2).sum(1)

    def reward_joint_vel(self, state: RobotState, action):
        """‖q̇‖² [rad²/s²]."""
        return (state.joint_vel**2).sum(1)


__all__ = ["ArmReach", "ArmReachConfig", "check_reachable"]
