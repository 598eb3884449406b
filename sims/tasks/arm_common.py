"""What the peg_arm tasks (arm-reach, peg-insert) share: gravity compensation, the tared
wrist wrench and the proprioceptive observation. Composition, not a base class.

Gravity compensation. peg_arm's model has none (a real Panda's controller adds it); the
tasks add it here, from the robot-side model (robots/peg_arm/kinematics.py): a PD target q*
is sent as q* + g(q*) / kp, where g(q*) holds the arm still at q*, so the arm settles on the
target instead of sagging (~0.04 rad at joint 4 without it).

Tared wrench. RobotState.wrench is the raw F/T reading (it carries the weight of hand, fingers
and peg). A real sensor is zeroed with the arm at rest before a task starts; here the tare is
the raw reading of the observation ``tare_steps`` control steps after each reset, during which
the arm holds its reset pose whatever the action (the reset state itself is not a reading at
rest in every engine: right after a reset MuJoCo's sensors see the arm beginning to fall, as no
gravity compensation has acted yet, and PyBullet computes joint reaction forces only while
stepping). The tared wrench reads 0 until the tare is taken. The tare removes
the gravity load for the wrist orientation at tare time, so it stays exact while the wrist
keeps that orientation (both tasks keep the peg pointing down).

``wrench_source="joint_torque"`` estimates the same quantity from the joint torques instead, as
a Panda without a wrist sensor does (franka_ros' O_F_ext_hat_K), for simulators without F/T
sensing (Genesis): the external wrench at the tip is (Jᵀ)⁺ (g(q) − τ) (quasi-static: inertial
forces are ignored), and the sensor would read its opposite, moved to the F/T site and
expressed in the site's frame. It is tared the same way.
"""

from __future__ import annotations

import numpy as np

from embody.arrays import like, namespace
from embody.robots import RobotSpec, RobotState
from embody.robots.peg_arm.kinematics import ArmModel

WRENCH_SOURCES = ("ft", "joint_torque")


class ArmIO:
    """Per-task helper over ``n`` envs of a peg_arm spec."""

    def __init__(self, robot: RobotSpec, n_envs: int, tare_steps: int = 2, wrench_source: str = "ft"):
        if wrench_source not in WRENCH_SOURCES:
            raise ValueError(f"wrench_source must be one of {list(WRENCH_SOURCES)}, got {wrench_source!r}")
        if tare_steps < 0:
            raise ValueError(f"tare_steps must be >= 0, got {tare_steps}")
        self.robot, self.n = robot, n_envs
        self.model = ArmModel(robot)
        self.tare_steps, self.wrench_source = tare_steps, wrench_source
        self.kp = robot.kp[robot.actuated]
        self.steps = np.zeros(n_envs, dtype=np.int64)  # control steps since reset
        self.tare = np.zeros((n_envs, 6))
        self.tared = np.zeros(n_envs, dtype=bool)
        self.q = np.tile(robot.default_pose, (n_envs, 1))  # the joint positions last observed
        self.q_hold = self.q.copy()  # the pose at reset, held until the tare is taken
        self.wrench = np.zeros((n_envs, 6))  # the tared wrench last observed

    def requirements(self) -> set[str]:
        """``ee_pose``, and ``wrench`` when the wrench comes from the F/T sensor."""
        return {"ee_pose", "wrench"} if self.wrench_source == "ft" else {"ee_pose"}

    def on_reset(self, env_ids: np.ndarray) -> None:
        """Restart the tare for ``env_ids``: their wrench reads zero until it is re-tared."""
        self.steps[env_ids] = 0
        self.tared[env_ids] = False
        self.tare[env_ids] = 0.0

    def after_step(self) -> None:
        """Count a control step (the tare is taken after ``tare_steps``)."""
        self.steps += 1

    def pd_command(self, q_target):
        """Joint targets (n, 7) → PD command with gravity compensation, within the joint limits (numpy or torch).
        Envs not yet tared hold their reset pose (the sensor is zeroed at rest)."""
        xp = namespace(q_target)
        holding = like(self.steps < self.tare_steps, q_target) > 0
        q = xp.where(holding[:, None], like(self.q_hold, q_target), q_target)
        q = xp.clip(q, like(self.robot.lower, q), like(self.robot.upper, q))
        return q + self.model.gravity_torque(q) / like(self.kp, q)

    def raw_wrench(self, state: RobotState) -> np.ndarray:
        """Untared wrist wrench (n, 6), force [N] then moment [N m] in the F/T sensor frame: the sensor's reading
        (``ft``), or estimated from joint torques minus gravity torques through the Jacobian (``joint_torque``)."""
        if self.wrench_source == "ft":
            return state.wrench
        m, q = self.model, state.joint_pos
        tau_ext = m.gravity_torque(q) - state.joint_torque[:, self.robot.actuated]
        ext = (np.linalg.pinv(m.jacobian(q).swapaxes(1, 2)) @ tau_ext[..., None])[..., 0]  # (n, 6) at the tip
        tip, _ = m.ee_pose(q)
        site, R = m.ft_pose(q)
        force, moment = -ext[:, :3], -(ext[:, 3:] + np.cross(tip - site, ext[:, :3]))
        return np.concatenate([np.einsum("nji,nj->ni", R, force), np.einsum("nji,nj->ni", R, moment)], axis=1)

    def observe(self, state: RobotState) -> np.ndarray:
        """Remember the state for the action mapping; returns the tared wrench (n, 6)."""
        self.q = state.joint_pos.copy()
        new = self.steps == 0
        self.q_hold[new] = self.q[new]
        raw = self.raw_wrench(state)
        due = ~self.tared & (self.steps >= self.tare_steps)
        self.tare[due], self.tared[due] = raw[due], True
        self.wrench = np.where(self.tared[:, None], raw - self.tare, 0.0)
        return self.wrench
