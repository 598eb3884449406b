"""What the UR and Franka drivers share: the supervisor in front of every command, the gate
for Cartesian targets, connection bookkeeping and the context manager."""

from __future__ import annotations

import logging
import time

import numpy as np

from embody.robots import RobotSpec, RobotState

from ..interface import CartesianCommand, JointCommand, RobotConnectionError
from ..supervisor import Phase, SafetySupervisor, SupervisorConfig

log = logging.getLogger("embody.hardware.arms")


def arm_supervisor(robot: RobotSpec) -> SafetySupervisor:
    """The default supervisor for a fixed-base arm: no IMU, so no tilt check."""
    return SafetySupervisor(robot, SupervisorConfig(max_tilt_rad=None))


def checked_cartesian(command: CartesianCommand) -> tuple[np.ndarray, np.ndarray]:
    """(pos (3,), unit quat (4,)) of ``command``; ValueError for a wrong shape, non-finite values
    or a zero quaternion (nothing non-finite may reach a library)."""
    pos, quat = np.asarray(command.pos, dtype=np.float64), np.asarray(command.quat, dtype=np.float64)
    if pos.shape != (3,) or quat.shape != (4,):
        raise ValueError(f"CartesianCommand needs pos (3,) and quat (4,), got {pos.shape} and {quat.shape}")
    gains = [np.asarray(command.stiffness, dtype=np.float64), np.asarray(command.damping, dtype=np.float64)]
    if not all(np.isfinite(a).all() for a in (pos, quat, *gains)):
        raise ValueError(f"non-finite CartesianCommand: pos {pos}, quat {quat}")
    norm = float(np.linalg.norm(quat))
    if norm < 0.5:  # a unit quaternion with rounding, not garbage
        raise ValueError(f"CartesianCommand.quat {quat} is not a unit quaternion (norm {norm:.3g})")
    return pos, quat / norm


class ArmDriver:
    """Base of the arm drivers. Subclasses implement ``connect``, ``read_state``, ``state_age``,
    ``_execute`` (send a supervised JointCommand), ``_execute_cartesian`` and ``_disconnect``."""

    name = "arm"

    def __init__(self, robot: RobotSpec, supervisor: SafetySupervisor | None):
        self.robot = robot
        self.supervisor = supervisor if supervisor is not None else arm_supervisor(robot)
        if self.supervisor.robot.n_joints != robot.n_joints:
            raise ValueError(
                f"the supervisor is for {self.supervisor.robot.name!r} "
                f"({self.supervisor.robot.n_joints} joints), the driver for {robot.name!r} "
                f"({robot.n_joints} joints)"
            )
        self._t0 = time.monotonic()
        self._connected = False
        self._closed = False

    # -- RobotInterface ----------------------------------------------------------------------
    def read_state(self) -> RobotState:
        raise NotImplementedError

    def state_age(self) -> float:
        raise NotImplementedError

    def send_command(self, command: JointCommand) -> JointCommand:
        """Pass ``command`` (j,) through the supervisor and send what it returns; returns that."""
        self._require_connected()
        n = self.robot.n_joints
        if np.shape(command.q) != (n,):
            raise ValueError(f"command for {np.shape(command.q)} joints; the {self.robot.name} has {n}")
        sent = self.supervisor.step(self.read_state(), self.state_age(), command)
        self._execute(self._finite(sent))
        return sent

    def send_cartesian(self, command: CartesianCommand) -> CartesianCommand | None:
        """Send an end-effector target to the arm's own Cartesian controller, if the supervisor allows.

        The supervisor speaks joint commands, so a Cartesian target is gated rather than clamped:
        each call steps the supervisor without a joint request (its state checks run: watchdog,
        over-speed, wrist force, workspace) and the target goes out only while the phase is
        POLICY, its position clipped into the supervisor's workspace box when one is configured.
        Otherwise the supervisor's own command (hold, ramp or damping) is executed instead and
        None is returned. Returns the CartesianCommand sent.
        """
        self._require_connected()
        pos, quat = checked_cartesian(command)
        fallback = self.supervisor.step(self.read_state(), self.state_age(), None)
        if self.supervisor.phase is not Phase.POLICY:
            self._execute(self._finite(fallback))
            return None
        box = self.supervisor.config.workspace
        if box is not None:
            pos = np.clip(pos, box[0], box[1])
        sent = CartesianCommand(
            pos=pos,
            quat=quat,
            stiffness=np.array(command.stiffness, dtype=np.float64),
            damping=np.array(command.damping, dtype=np.float64),
        )
        self._execute_cartesian(sent)
        return sent

    def close(self) -> None:
        """Stop the arm and disconnect; safe to call twice and after a failed connect."""
        if self._closed:
            return
        self._closed = True
        try:
            self._disconnect()
        finally:
            self._connected = False

    def __enter__(self):
        if not self._connected:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, timeout_s: float = 5.0) -> None:
        raise NotImplementedError

    # -- for subclasses ----------------------------------------------------------------------
    def _execute(self, command: JointCommand) -> None:
        raise NotImplementedError

    def _execute_cartesian(self, command: CartesianCommand) -> None:
        raise NotImplementedError

    def _disconnect(self) -> None:
        raise NotImplementedError

    def _elapsed(self) -> float:
        """Seconds since the driver was made: RobotState.time on hardware."""
        return time.monotonic() - self._t0

    def _require_connected(self) -> None:
        if self._closed:
            raise RobotConnectionError(f"the {self.name} driver is closed")
        if not self._connected:
            raise RobotConnectionError(f"the {self.name} driver is not connected: call connect() first")

    def _finite(self, command: JointCommand) -> JointCommand:
        """The supervisor promises finite commands; a broken promise must still never reach the
        library: the arm is damped instead and the caller gets RuntimeError."""
        if not command.is_finite():
            self._execute(JointCommand.damping(self.robot.n_joints, self.supervisor.config.damping_kd))
            raise RuntimeError(
                f"the safety supervisor returned a non-finite command; it was not sent, the "
                f"{self.name} was damped instead: {command}"
            )
        return command


__all__ = ["ArmDriver", "arm_supervisor", "checked_cartesian"]
