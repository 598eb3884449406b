"""RobotInterface: the one protocol that real robots and simulated robots both serve.

Shapes use ``j`` for the robot's spec joints in hardware motor order (RobotSpec.joints).
A driver reads state as a RobotState with ``n = 1`` and sends a JointCommand through its
safety supervisor; ``send_command`` returns what was actually sent after clamping.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from embody import exits
from embody.robots import RobotSpec, RobotState

if TYPE_CHECKING:  # supervisor.py imports JointCommand from here
    from .supervisor import SafetySupervisor


class HardwareError(ValueError):
    """Bad hardware input: an unknown robot or target, a missing network interface, a malformed message."""

    exit_code = exits.INPUT


class RobotConnectionError(ConnectionError):
    """A robot could not be reached in time or stopped answering; the message says which and where."""

    exit_code = exits.INPUT


@dataclass
class JointCommand:
    """A low-level command for every joint, as a motor driver executes it.

    Each motor applies ``tau + kp (q − q_m) + kd (dq − dq_m)``, limited to its torque limit.

    q, dq, tau: (j,) position [rad], velocity [rad/s] targets and feed-forward torque [N·m]
    kp, kd:     (j,) gains [N·m/rad], [N·m·s/rad]
    enable:     (j,) bool; False leaves the motor passive (Unitree motor mode 0)
    """

    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    kp: np.ndarray
    kd: np.ndarray
    enable: np.ndarray

    @classmethod
    def zero_torque(cls, n_joints: int) -> JointCommand:
        """Enabled motors that apply no torque at all (kp = kd = tau = 0)."""
        z = np.zeros(n_joints)
        return cls(q=z.copy(), dq=z.copy(), tau=z.copy(), kp=z.copy(), kd=z.copy(), enable=np.ones(n_joints, bool))

    @classmethod
    def damping(cls, n_joints: int, kd: float) -> JointCommand:
        """Pure joint damping (kp = 0): the safe state on any fault or exit."""
        cmd = cls.zero_torque(n_joints)
        cmd.kd[:] = kd
        return cmd

    @classmethod
    def pd(cls, robot: RobotSpec, q: np.ndarray) -> JointCommand:
        """Hold position targets ``q`` (j,) with the spec's gains."""
        cmd = cls.zero_torque(robot.n_joints)
        cmd.q[:], cmd.kp[:], cmd.kd[:] = q, robot.kp, robot.kd
        return cmd

    @classmethod
    def pd_actuated(cls, robot: RobotSpec, targets: np.ndarray) -> JointCommand:
        """Hold the actuated joints at ``targets`` (a,) (a task's ``action_to_command`` row, a recorded
        ``embody.joint_target``) and every other joint at the default pose, with the spec's gains."""
        q = robot.default_pose.copy()
        q[robot.actuated] = targets
        return cls.pd(robot, q)

    def copy(self) -> JointCommand:
        """A deep copy (every array copied)."""
        return JointCommand(**{f.name: np.array(getattr(self, f.name), copy=True) for f in fields(self)})

    def is_finite(self) -> bool:
        """Whether every field but ``enable`` is finite."""
        return all(np.isfinite(getattr(self, f.name)).all() for f in fields(self) if f.name != "enable")


@dataclass
class CartesianCommand:
    """An end-effector impedance target for arms (world = arm base frame).

    pos: (3,) [m]; quat: (4,) w,x,y,z; stiffness, damping: (6,) translational then rotational
    """

    pos: np.ndarray
    quat: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray


@runtime_checkable
class RobotInterface(Protocol):
    """A connected robot. Use as a context manager: ``with driver: ...`` connects and, on exit
    (also on exceptions), damps the robot and closes the connection.

    ``supervisor`` is the SafetySupervisor every command passes; a caller may replace it before
    ``connect`` (deploy does, with the run's ramp time) but never while the robot runs."""

    robot: RobotSpec
    supervisor: SafetySupervisor

    def connect(self, timeout_s: float = 5.0) -> None:
        """Reach the robot and wait for its first state; RobotConnectionError after ``timeout_s``."""

    def read_state(self) -> RobotState:
        """The latest state (n = 1), without a privileged part."""

    def state_age(self) -> float:
        """Seconds since the latest valid state arrived (inf before the first)."""

    def send_command(self, command: JointCommand) -> JointCommand:
        """Pass ``command`` through the safety supervisor and send it; returns what was sent."""

    def close(self) -> None:
        """Stop sending and release the connection; closing twice is harmless."""
        ...

    def __enter__(self) -> RobotInterface: ...

    def __exit__(self, *exc) -> None: ...
