"""Universal Robots arms through ur_rtde (extra ``ur``: ``pip install 'embody[ur]'``).

State comes from ``rtde_receive.RTDEReceiveInterface``, whose own thread keeps the latest
RTDE package (500 Hz on e-Series); the getters return it without touching the network.
Commands go to ``rtde_control.RTDEControlInterface``, which uploads ur_rtde's control script
to the robot. A JointCommand is executed with ``servoJ``: position targets q only, tracked by
the UR controller with its own gains (``servo_gain``, ``lookahead_s``); dq, tau, kp and kd are
not sent. kp still matters here: the supervisor clips q into the window where
``|kp (q − q_m)| ≤ torque_limit``, i.e. at most ``torque_limit / kp`` (0.1 rad with
``ur5e_spec``'s gains) from the measured pose per command. A command the servo cannot express
(kp = 0 on a joint, as in damping or zero torque, or a disabled joint: a UR joint cannot be
made passive) stops the servo with ``servoStop``: the arm decelerates and holds its pose.

API names were checked against ur-rtde 1.6.5 (installed: ``dir()`` and pybind signatures);
the receive path and the connect path were exercised against a loopback RTDE server. Not
verified without a robot: servoJ/servoL/servoStop/stopScript behaviour, the frame and sign of
``getFtRawWrench`` (UR documents it as the raw sensor reading, not payload-compensated; other
code transforms it "from sensor frame to base frame") and the controller's timestamp rate.
"""

from __future__ import annotations

import math
import struct
import time
from pathlib import Path

import numpy as np

from embody import extras
from embody.robots import Joint, RobotSpec, RobotState, Sensors

from ..interface import CartesianCommand, JointCommand, RobotConnectionError
from ..supervisor import SafetySupervisor
from .base import ArmDriver, log
from .poses import axis_angle_to_quat, quat_to_axis_angle, quat_to_matrix
from .timeouts import BlockingCaller, call_with_timeout, endpoint, probe

RTDE_PORT = 30004  # fixed in ur_rtde: the constructors take a host only
DASHBOARD_PORT = 29999  # RTDEControlInterface uses the dashboard server (remote-control check)
RTDE_REQUEST_PROTOCOL_VERSION = 86  # 'V'; RTDE packets: >H size (header included), >B type, payload
RTDE_PROTOCOL_VERSION = 2
WRENCH_SOURCES = ("ft_raw", "tcp_force")

# UR5e published limits (UR5e technical specification, as recalled; re-check against your
# robot's datasheet): every joint ±360°, 180°/s; max joint torque 150 N·m for the size-3 joints
# (base, shoulder, elbow) and 28 N·m for the size-1 wrists.
UR5E_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3")
UR5E_TORQUE = (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)  # N·m
UR5E_VELOCITY = math.pi  # rad/s
UR5E_HOME = (0.0, -math.pi / 2, math.pi / 2, -math.pi / 2, -math.pi / 2, 0.0)  # elbow up, tool down
CLOCK_DRIFT = 1e-3  # s/s: how fast the clock-offset estimate may rise (1000 ppm ≫ real drift)
SERVO_STEP_RAD = 0.1  # kp = torque / this: the supervisor's torque window then bounds a servoJ step


def ur5e_spec() -> RobotSpec:
    """A minimal RobotSpec of the UR5e for the supervisor: limits, a home pose, nominal gains.

    There is no model file (``mjcf`` is empty: nothing simulates this spec). kp is chosen so that
    the supervisor keeps each servoJ target within SERVO_STEP_RAD of the measured pose; kd only
    sizes the supervisor's gain clamp (servoJ sends neither).
    """
    joints = tuple(
        Joint(
            name,
            lower=-2 * math.pi,
            upper=2 * math.pi,
            velocity_limit=UR5E_VELOCITY,
            torque_limit=t,
            kp=t / SERVO_STEP_RAD,
            kd=0.02 * t / SERVO_STEP_RAD,
            default=q0,
        )
        for name, t, q0 in zip(UR5E_JOINTS, UR5E_TORQUE, UR5E_HOME)
    )
    return RobotSpec(
        name="ur5e",
        joints=joints,
        mjcf=Path(),
        floating_base=False,
        groups={"arm": tuple(range(6))},
        sensors=Sensors(ee_site="tcp", ft_site="ft_sensor"),
        description="Universal Robots UR5e (hardware only: no model file); TCP and payload as set on the teach pendant",
    )


def rtde_hello() -> bytes:
    """RTDE_REQUEST_PROTOCOL_VERSION (v2): the first packet every RTDE client sends."""
    return struct.pack(">HBH", 5, RTDE_REQUEST_PROTOCOL_VERSION, RTDE_PROTOCOL_VERSION)


def probe_rtde(host: str, timeout_s: float) -> None:
    """Ask host:30004 for RTDE protocol version 2; RobotConnectionError unless an RTDE server answers in time."""
    reply = probe(host, RTDE_PORT, timeout_s, hello=rtde_hello(), what="UR RTDE server", reply_bytes=3)
    if len(reply) < 3 or reply[2] != RTDE_REQUEST_PROTOCOL_VERSION:
        raise RobotConnectionError(
            f"{endpoint(host, RTDE_PORT)} answered, but not as a UR RTDE server "
            f"(first bytes {reply!r}); is this the robot's address?"
        )


def tcp_pose_to_pos_quat(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UR pose [x, y, z, rx, ry, rz] (m, rotation vector in rad) → position (3,), quaternion (4,) w,x,y,z."""
    pose = np.asarray(pose, dtype=np.float64)
    return pose[:3].copy(), axis_angle_to_quat(pose[3:6])


def pos_quat_to_tcp_pose(pos: np.ndarray, quat: np.ndarray) -> list[float]:
    """Position (3,) and quaternion (4,) w,x,y,z → UR pose [x, y, z, rx, ry, rz]."""
    return [*map(float, pos), *map(float, quat_to_axis_angle(quat))]


class URArm(ArmDriver):
    """A UR arm at ``host``; ``robot`` defaults to ``ur5e_spec()``.

    control=False connects read-only (RTDE receive only: monitoring, data collection); sending
    then raises. wrench: "ft_raw" reads ``getFtRawWrench`` (raw tool-flange sensor reading, not
    payload-compensated, PolyScope ≥ 5.9), "tcp_force" reads ``getActualTCPForce`` (base frame,
    payload-compensated) rotated into the TCP frame. call_timeout_s bounds each blocking
    control call (ur_rtde releases the GIL in them, so the bound holds).
    """

    name = "UR arm"

    def __init__(
        self,
        host: str,
        supervisor: SafetySupervisor | None = None,
        robot: RobotSpec | None = None,
        *,
        control: bool = True,
        servo_period_s: float = 0.002,
        lookahead_s: float = 0.1,
        servo_gain: float = 300.0,
        stop_decel: float = 10.0,
        wrench: str = "ft_raw",
        call_timeout_s: float = 1.0,
    ):
        if wrench not in WRENCH_SOURCES:
            raise ValueError(f"wrench must be one of {list(WRENCH_SOURCES)}, got {wrench!r}")
        robot = robot or ur5e_spec()
        if robot.n_joints != 6:
            raise ValueError(f"a UR arm has 6 joints; robot {robot.name!r} has {robot.n_joints}")
        super().__init__(robot, supervisor)
        self.host, self.control, self.wrench_source = host, control, wrench
        # servoJ/servoL: time = period, lookahead_time in [0.03, 0.2] s, gain in [100, 2000] (UR script manual)
        self.servo_period_s, self.lookahead_s, self.servo_gain = servo_period_s, lookahead_s, servo_gain
        self.stop_decel, self.call_timeout_s = stop_decel, call_timeout_s
        self._recv = self._ctrl = None
        self._caller: BlockingCaller | None = None
        self._servoing = False
        self._ts0 = self._last_ts = None  # controller timestamps [s]
        self._offset: float | None = None  # smallest (our clock − controller timestamp) seen [s]
        self._offset_t = -math.inf

    # -- RobotInterface ----------------------------------------------------------------------
    def connect(self, timeout_s: float = 5.0) -> None:
        """Probe RTDE (and the dashboard, for control), construct ur_rtde's interfaces, wait for
        the first state; RobotConnectionError within about ``timeout_s`` on a dead or silent robot."""
        if self._closed:
            raise RobotConnectionError("this URArm was closed; make a new one to reconnect")
        if self._connected:
            return
        rtde_receive = extras.require("rtde_receive", "ur")
        rtde_control = extras.require("rtde_control", "ur") if self.control else None
        deadline = time.monotonic() + timeout_s
        remaining = lambda: max(deadline - time.monotonic(), 1e-3)  # noqa: E731
        probe_rtde(self.host, remaining())
        if self.control:
            probe(self.host, DASHBOARD_PORT, remaining(), what="UR dashboard server", reply_bytes=1)
        where = endpoint(self.host, RTDE_PORT)
        try:
            # Unbounded and holding the GIL (see timeouts.py): reached only right after the probe answered.
            self._recv = rtde_receive.RTDEReceiveInterface(self.host)
            if self.control:
                self._caller = BlockingCaller(f"ur_rtde control {self.host}")
                self._ctrl = rtde_control.RTDEControlInterface(self.host)
        except RuntimeError as e:
            self._release()
            raise RobotConnectionError(f"ur_rtde could not connect to the UR arm at {where}: {e}") from e
        while not self._poll_timestamp():
            if time.monotonic() > deadline:
                self._release()
                raise RobotConnectionError(
                    f"connected to RTDE at {where}, but no robot state arrived within {timeout_s:g} s"
                )
            time.sleep(0.002)
        self._ts0 = self._last_ts
        self._connected = True

    def read_state(self) -> RobotState:
        """The latest RTDE state (n = 1): joints (1, 6), TCP pose, wrench (1, 6) force then torque."""
        self._require_connected()
        r = self._recv
        try:
            self._poll_timestamp()
            q, dq, tau = r.getActualQ(), r.getActualQd(), r.getTargetMoment()
            pos, quat = tcp_pose_to_pos_quat(r.getActualTCPPose())
            wrench = self._wrench(r, quat)
        except RuntimeError as e:
            raise RobotConnectionError(
                f"lost the RTDE state of the UR arm at {endpoint(self.host, RTDE_PORT)}: {e}"
            ) from e
        row = lambda a: np.asarray(a, dtype=np.float64)[None]  # noqa: E731
        return RobotState(
            joint_pos=row(q),
            joint_vel=row(dq),
            joint_torque=row(tau),
            time=np.array([self._last_ts - self._ts0]),
            ee_pos=pos[None],
            ee_quat=quat[None],
            wrench=row(wrench),
        )

    def state_age(self) -> float:
        """Seconds since the controller produced the latest state, on our clock (inf before the
        first state or once RTDE disconnected); see ``_poll_timestamp``."""
        if self._recv is None or not self._poll_timestamp():
            return math.inf
        return max(time.monotonic() - self._last_ts - self._offset, 0.0)

    # -- ArmDriver ---------------------------------------------------------------------------
    def _execute(self, command: JointCommand) -> None:
        self._require_control()
        if np.all(command.enable) and np.all(command.kp > 0):
            ok = self._call(
                "servoJ",
                self._ctrl.servoJ,
                [float(x) for x in command.q],
                0.5,
                0.5,
                # speed and acceleration: unused by servoj (UR script manual); ur_rtde's examples pass 0.5
                self.servo_period_s,
                self.lookahead_s,
                self.servo_gain,
            )
            self._servoing = True
            self._check_ok(ok, "servoJ")
        elif self._servoing:  # damping, zero torque or a passive joint: stop and hold
            self._servoing = False
            self._check_ok(self._call("servoStop", self._ctrl.servoStop, self.stop_decel), "servoStop")

    def _execute_cartesian(self, command: CartesianCommand) -> None:
        """servoL to the pose; stiffness and damping are not sent (the UR controller's own gains)."""
        self._require_control()
        pose = pos_quat_to_tcp_pose(command.pos, command.quat)
        ok = self._call(
            "servoL", self._ctrl.servoL, pose, 0.5, 0.5, self.servo_period_s, self.lookahead_s, self.servo_gain
        )
        self._servoing = True
        self._check_ok(ok, "servoL")

    def _disconnect(self) -> None:
        """servoStop (if servoing), stopScript, disconnect: each bounded; failures are logged."""
        steps = []
        if self._ctrl is not None:
            if self._servoing:
                steps.append(("servoStop", self._ctrl.servoStop, (self.stop_decel,)))
            steps += [("stopScript", self._ctrl.stopScript, ()), ("control disconnect", self._ctrl.disconnect, ())]
        for what, fn, args in steps:
            try:
                self._call(what, fn, *args)
            except Exception as e:  # keep going: the remaining steps still free the robot
                log.warning("UR arm %s: %s failed while closing: %s", self.host, what, e)
        self._servoing = False
        self._release()

    # -- helpers -----------------------------------------------------------------------------
    def _wrench(self, r, quat: np.ndarray) -> np.ndarray:
        if self.wrench_source == "ft_raw":
            return np.asarray(r.getFtRawWrench(), dtype=np.float64)
        w = np.asarray(r.getActualTCPForce(), dtype=np.float64)
        R = quat_to_matrix(quat)  # TCP → base; rotate base-frame force and torque into the TCP frame
        return np.concatenate([R.T @ w[:3], R.T @ w[3:]])

    def _poll_timestamp(self) -> bool:
        """Track the controller timestamp; False without a live state.

        The timestamp is mapped onto our clock by the smallest lag (arrival minus controller
        time) seen so far, so a silence shows up as age even when the first poll after it is
        also the first to see the last package. The estimate may rise by CLOCK_DRIFT per second,
        so drift between the two clocks never reads as age.
        """
        try:
            if not self._recv.isConnected():
                return False
            ts = float(self._recv.getTimestamp())
        except RuntimeError:  # no data package yet
            return False
        if not math.isfinite(ts):
            return False
        now = time.monotonic()
        lag = now - ts
        if self._offset is None:
            self._offset = lag
        else:
            self._offset = min(self._offset + CLOCK_DRIFT * (now - self._offset_t), lag)
        self._offset_t, self._last_ts = now, ts
        return True

    def _call(self, what: str, fn, *args):
        if self._caller is None:
            raise RobotConnectionError(f"UR arm {self.host}: no control connection for {what}")
        return self._caller.call(fn, *args, timeout_s=self.call_timeout_s, what=what)

    def _check_ok(self, ok, what: str) -> None:
        if ok is False:  # ur_rtde returns False when the controller refused (protective stop, script stopped)
            self.supervisor.estop(f"UR controller refused {what}")
            raise RuntimeError(
                f"the UR controller at {self.host} refused {what} (protective or emergency stop, "
                f"or the control script is not running); the supervisor was e-stopped"
            )

    def _require_control(self) -> None:
        if not self.control:
            raise RuntimeError(f"UR arm {self.host} is connected read-only (control=False)")

    def _release(self) -> None:
        """Disconnect the receive interface and drop the library objects (bounded, best effort)."""
        recv, self._recv, self._ctrl = self._recv, None, None
        if recv is not None:
            try:
                call_with_timeout(recv.disconnect, self.call_timeout_s, f"ur_rtde receive disconnect ({self.host})")
            except Exception as e:
                log.warning("UR arm %s: receive disconnect failed: %s", self.host, e)
        if self._caller is not None:
            self._caller.close()
            self._caller = None


__all__ = ["URArm", "probe_rtde", "pos_quat_to_tcp_pose", "rtde_hello", "tcp_pose_to_pos_quat", "ur5e_spec"]
