"""Franka arms (Panda, FR3) through pylibfranka (extra ``franka``: ``pip install 'embody[franka]'``).

Commands run in libfranka's torque control: a daemon thread reads the robot state at 1 kHz
(``ActiveControlBase.readOnce``) and writes torques (``writeOnce(Torques)``) computed from the
latest supervised command, so the PD law sees a fresh state every millisecond, as a motor
driver would:

    tau = tau_ff + kp (q* − q) + kd (dq* − dq)     on enabled joints, 0 on disabled ones,

clipped to the spec's torque limits and to libfranka's torque rate (1000 N·m/s, applied the
way its ``limitRate`` does, against the last desired torque ``tau_J_d``). The robot adds its
own gravity compensation on top (libfranka's torque interface): a zero-torque command floats
the arm, damping brakes it, neither lets it fall. Commands that already carry gravity
compensation (embody's peg tasks shift PD targets by g(q)/kp, for a model without it) can set
``subtract_gravity=True``: libfranka's g(q) is then removed from PD commands (kp > 0 somewhere),
never from damping or zero torque. A stalled caller (no command for ``command_timeout_s``) gets
damping. The loop starts with the first command that asks for torque (the supervisor's
ZERO_TORQUE phase sends none, so connecting never moves the arm) and ends in ``close``.

Cartesian targets use the same loop with a Cartesian impedance law on libfranka's zero
Jacobian: ``tau = Jᵀ (K e − D J dq)``, e = (position error, rotation-vector error) in the base
frame, K and D from the CartesianCommand.

State: q, dq, tau_J (measured joint torques), O_T_EE (column-major) for ee_pos/ee_quat (the EE
frame set in Desk or by ``set_EE``), and K_F_ext_hat_K for ``wrench``: libfranka's external
wrench estimate in the stiffness frame K (= EE frame by default), payload removed, so it reads
about 0 at rest where a raw sensor would read the tool's weight (tare-based consumers and the
supervisor's |‖f‖ − ‖f₀‖| check are unaffected). Its sign is the counterforce of what acts on
the robot (libfranka issue #26), the sign a wrist sensor's reading changes by.

GIL: pylibfranka releases the GIL in none of its calls (its bindings have no
``gil_scoped_release``; ``Robot(host)`` against a silent server was measured to freeze every
thread). Hence the probe before connecting (see timeouts.py), and: the 1 kHz loop competes with
the caller's Python for the GIL, so keep the caller's work between commands short or in numpy /
torch calls that release it, or run the driver in its own process; the robot's communication
reflex stops the arm if too many ticks are missed. Verified against pylibfranka 0.21.3: API
names (.pyi stub), the connect request's wire format and the library's failure on an
incompatible server (loopback). Not verified without a robot: the control loop, the sign and
frame of K_F_ext_hat_K, and ``Model.zero_jacobian``'s return layout (both layouts handled).
"""

from __future__ import annotations

import math
import struct
import threading
import time

import numpy as np

from embody import extras
from embody.robots import RobotSpec, RobotState

from ..interface import CartesianCommand, JointCommand, RobotConnectionError
from ..realtime import scheduling_kept
from ..supervisor import SafetySupervisor
from .base import ArmDriver, log
from .poses import column_major_to_pose, quat_to_axis_angle
from .timeouts import endpoint, probe

FRANKA_PORT = 1337  # research_interface::robot::kCommandPort
# libfranka's TCP command messages (libfranka-common, research_interface/robot/service_types.h,
# #pragma pack(1), little-endian): CommandHeader {uint32 command, uint32 command_id, uint32 size},
# Connect::Request {uint16 version, uint16 udp_port}, Connect::Response {uint8 status, uint16 version}.
HEADER = struct.Struct("<III")
CONNECT_REQUEST = struct.Struct("<HH")
CONNECT_RESPONSE = struct.Struct("<BH")
CMD_CONNECT = 0
# Version 0 is no research-interface version: the robot answers kIncompatibleLibraryVersion with
# its own version and starts no session, so the probe leaves nothing behind.
PROBE_VERSION = 0
MAX_TORQUE_RATE = 1000.0  # N·m/s per joint (libfranka rate_limiting.h kMaxTorqueRate)
CONTROL_DT = 1e-3  # s: the robot's control period


def franka_hello() -> bytes:
    """A Connect request with PROBE_VERSION (the same message libfranka sends first)."""
    return HEADER.pack(CMD_CONNECT, 0, HEADER.size + CONNECT_REQUEST.size) + CONNECT_REQUEST.pack(PROBE_VERSION, 0)


def probe_franka(host: str, timeout_s: float) -> int:
    """Ask host:1337 to connect with PROBE_VERSION; the robot's research-interface version.
    RobotConnectionError unless a Franka controller answers in time."""
    n = HEADER.size + CONNECT_RESPONSE.size
    reply = probe(host, FRANKA_PORT, timeout_s, hello=franka_hello(), what="Franka controller", reply_bytes=n)
    if len(reply) < n or HEADER.unpack_from(reply)[0] != CMD_CONNECT:
        raise RobotConnectionError(
            f"{endpoint(host, FRANKA_PORT)} answered, but not as a Franka controller "
            f"(first bytes {reply!r}); is this the robot's address?"
        )
    return CONNECT_RESPONSE.unpack_from(reply, HEADER.size)[1]


def state_from_franka(s, t: float) -> RobotState:
    """RobotState (n = 1) from a pylibfranka RobotState ``s``; ``t`` [s] since connect."""
    row = lambda a: np.asarray(a, dtype=np.float64)[None]  # noqa: E731
    pos, quat = column_major_to_pose(s.O_T_EE)
    return RobotState(
        joint_pos=row(s.q),
        joint_vel=row(s.dq),
        joint_torque=row(s.tau_J),
        time=np.array([t]),
        ee_pos=pos[None],
        ee_quat=quat[None],
        wrench=row(s.K_F_ext_hat_K),
    )


def joint_torque(cmd: JointCommand, q: np.ndarray, dq: np.ndarray, torque_limit: np.ndarray) -> np.ndarray:
    """The motor law of a JointCommand at the measured q, dq (j,) → torque (j,) [N·m], 0 on disabled
    joints, clipped to ±torque_limit."""
    tau = cmd.tau + cmd.kp * (cmd.q - q) + cmd.kd * (cmd.dq - dq)
    return np.clip(np.where(cmd.enable, tau, 0.0), -torque_limit, torque_limit)


def rate_limited(
    tau: np.ndarray, tau_last: np.ndarray, dt: float = CONTROL_DT, max_rate: float = MAX_TORQUE_RATE
) -> np.ndarray:
    """``tau`` moved at most ``max_rate · dt`` from ``tau_last`` (the robot rejects faster changes)."""
    step = max_rate * dt
    return np.clip(tau, tau_last - step, tau_last + step)


def jacobian_6x7(raw) -> np.ndarray:
    """libfranka's zero Jacobian as (6, 7): accepts a (6, 7) array or 42 numbers in column-major order."""
    a = np.asarray(raw, dtype=np.float64)
    if a.shape == (6, 7):
        return a
    if a.size == 42:
        return a.reshape(7, 6).T  # 7 columns of 6
    raise ValueError(f"unexpected zero Jacobian of shape {a.shape}")


def cartesian_torque(
    J: np.ndarray, pos: np.ndarray, quat: np.ndarray, dq: np.ndarray, target: CartesianCommand, torque_limit: np.ndarray
) -> np.ndarray:
    """Cartesian impedance ``Jᵀ (K e − D J dq)`` (7,) [N·m] for the EE at pos (3,), quat (4,) w,x,y,z.

    e: position error (3,) [m] and the rotation vector taking the current orientation to the target
    (3,) [rad], both in the base frame; K, D (6,): the target's stiffness and damping.
    """
    w, x, y, z = quat
    conj = np.array([w, -x, -y, -z])
    err_quat = _quat_mul(np.asarray(target.quat, dtype=np.float64), conj)  # target ⊗ current⁻¹ (base frame)
    e = np.concatenate([np.asarray(target.pos) - pos, quat_to_axis_angle(err_quat)])
    wrench = np.asarray(target.stiffness) * e - np.asarray(target.damping) * (J @ dq)
    return np.clip(J.T @ wrench, -torque_limit, torque_limit)


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ]
    )


def _is_idle(cmd: JointCommand) -> bool:
    """A zero-torque command: nothing to apply, so no control loop is needed for it."""
    return not (np.any(cmd.kp > 0) or np.any(cmd.kd > 0) or np.any(cmd.tau != 0))


class FrankaArm(ArmDriver):
    """A Franka arm at ``host``; ``robot`` defaults to the peg_arm spec (the Panda of the simulation).

    enforce_realtime: libfranka's RealtimeConfig.kEnforce (needs a real-time kernel) or kIgnore.
    """

    name = "Franka arm"

    def __init__(
        self,
        host: str,
        supervisor: SafetySupervisor | None = None,
        robot: RobotSpec | None = None,
        *,
        enforce_realtime: bool = True,
        subtract_gravity: bool = False,
        command_timeout_s: float = 0.1,
        stop_timeout_s: float = 1.0,
    ):
        if robot is None:
            from embody.robots import get_robot

            robot = get_robot("peg_arm")
        if robot.n_joints != 7:
            raise ValueError(f"a Franka arm has 7 joints; robot {robot.name!r} has {robot.n_joints}")
        super().__init__(robot, supervisor)
        self.host, self.enforce_realtime, self.subtract_gravity = host, enforce_realtime, subtract_gravity
        self.command_timeout_s, self.stop_timeout_s = command_timeout_s, stop_timeout_s
        self.server_version: int | None = None
        self._franka = self._robot = self._model = None
        self._torque_limit = robot.torque_limit
        self._lock = threading.Lock()
        self._state: RobotState | None = None
        self._state_t = -math.inf
        self._joint: JointCommand | None = None  # the command the loop applies, or
        self._cart: CartesianCommand | None = None  # the Cartesian target it tracks
        self._cmd_t = -math.inf
        self._loop: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.stats = {"ticks": 0, "stalled_ticks": 0}

    # -- RobotInterface ----------------------------------------------------------------------
    def connect(self, timeout_s: float = 5.0) -> None:
        """Probe port 1337, then connect pylibfranka, read the first state and load the model;
        RobotConnectionError within ``timeout_s`` on a dead or silent robot."""
        if self._closed:
            raise RobotConnectionError("this FrankaArm was closed; make a new one to reconnect")
        if self._connected:
            return
        franka = extras.require("pylibfranka", "franka")
        self.server_version = probe_franka(self.host, timeout_s)
        where = endpoint(self.host, FRANKA_PORT)
        rt = franka.RealtimeConfig.kEnforce if self.enforce_realtime else franka.RealtimeConfig.kIgnore
        try:
            # Unbounded and holding the GIL (see timeouts.py): reached only right after the probe answered.
            with scheduling_kept():  # libfranka raises the caller's thread to SCHED_FIFO 99 and leaves it there
                robot = franka.Robot(self.host, rt)
                first = robot.read_once()
        except Exception as e:  # pylibfranka raises FrankaException or RuntimeError subclasses
            raise RobotConnectionError(
                f"libfranka could not connect to the Franka arm at {where} (its research "
                f"interface is version {self.server_version}): {e}"
            ) from e
        self._franka, self._robot = franka, robot
        try:
            self._model = robot.load_model()  # now, not while the 1 kHz loop needs the GIL
        except Exception as e:
            log.warning(
                "Franka arm %s: could not load the dynamics model (Cartesian targets and "
                "subtract_gravity unavailable): %s",
                self.host,
                e,
            )
        self._store(first)
        self._connected = True

    def read_state(self) -> RobotState:
        """The latest state (n = 1): from the control loop while it runs, else ``read_once``."""
        self._require_connected()
        self._raise_if_failed()
        if self._loop is None:
            try:
                self._store(self._robot.read_once())  # bounded by libfranka's own network timeouts
            except Exception as e:
                raise RobotConnectionError(f"lost the Franka arm at {endpoint(self.host, FRANKA_PORT)}: {e}") from e
        with self._lock:
            return self._state

    def state_age(self) -> float:
        """Seconds since the last robot state arrived from libfranka's control loop."""
        with self._lock:
            return time.monotonic() - self._state_t

    # -- ArmDriver ---------------------------------------------------------------------------
    def _execute(self, command: JointCommand) -> None:
        self._raise_if_failed()
        if self.subtract_gravity and self._model is None:
            raise RuntimeError("subtract_gravity needs libfranka's dynamics model, which did not load at connect")
        with self._lock:
            self._joint, self._cart, self._cmd_t = command.copy(), None, time.monotonic()
        if self._loop is None and not _is_idle(command):
            self._start_loop()

    def _execute_cartesian(self, command: CartesianCommand) -> None:
        self._raise_if_failed()
        if self._model is None:
            raise RuntimeError("Cartesian targets need libfranka's dynamics model, which did not load at connect")
        with self._lock:
            self._joint, self._cart, self._cmd_t = None, command, time.monotonic()
        if self._loop is None:
            self._start_loop()

    def _disconnect(self) -> None:
        """End the torque loop (its last command finishes the motion), stop the robot, drop it."""
        if self._loop is not None:
            self._stop.set()
            self._loop.join(self.stop_timeout_s)
            if self._loop.is_alive():
                log.warning("Franka arm %s: the control loop did not end within %g s", self.host, self.stop_timeout_s)
            self._loop = None
        if self._robot is not None:
            try:
                self._robot.stop()  # the robot then holds its pose with its own controller
            except Exception as e:
                log.warning("Franka arm %s: stop() failed while closing: %s", self.host, e)
        self._robot = self._model = None

    # -- the 1 kHz loop ----------------------------------------------------------------------
    def _start_loop(self) -> None:
        ready = threading.Event()
        self._stop.clear()
        self._loop = threading.Thread(
            target=self._control_loop, args=(ready,), name=f"franka-torque-{self.host}", daemon=True
        )
        self._loop.start()
        if not ready.wait(max(self.command_timeout_s, 0.5)):
            self.supervisor.estop("Franka torque control did not start")
            raise RobotConnectionError(
                f"the Franka arm at {endpoint(self.host, FRANKA_PORT)} did not start torque control in time"
            )
        self._raise_if_failed()

    def _control_loop(self, ready: threading.Event) -> None:
        try:
            control = self._robot.start_torque_control()
            ready.set()
            while True:
                raw, _ = control.readOnce()
                self._store(raw)
                stopping = self._stop.is_set()
                tau = np.zeros(7) if stopping else self._torque(raw)
                out = self._franka.Torques(rate_limited(tau, np.asarray(raw.tau_J_d)).tolist())
                out.motion_finished = stopping
                control.writeOnce(out)
                self.stats["ticks"] += 1
                if stopping:
                    return
        except BaseException as e:  # a reflex, a lost connection: damp at the supervisor, surface it
            self._error = e
            self.supervisor.estop(f"Franka control loop stopped: {e!r}")
            log.error("Franka arm %s: control loop stopped: %r", self.host, e)
        finally:
            ready.set()

    def _torque(self, raw) -> np.ndarray:
        """The torque of this tick (7,) for the latest command at the state ``raw``."""
        q, dq = np.asarray(raw.q), np.asarray(raw.dq)
        with self._lock:
            joint, cart, age = self._joint, self._cart, time.monotonic() - self._cmd_t
        if age > self.command_timeout_s:  # the caller stalled: brake rather than hold a stale target
            self.stats["stalled_ticks"] += 1
            return np.clip(-self.supervisor.config.damping_kd * dq, -self._torque_limit, self._torque_limit)
        if cart is None and joint is None:
            return np.zeros(7)
        if cart is not None:
            pos, quat = column_major_to_pose(raw.O_T_EE)
            return cartesian_torque(
                jacobian_6x7(self._model.zero_jacobian(raw)), pos, quat, dq, cart, self._torque_limit
            )
        tau = joint_torque(joint, q, dq, self._torque_limit)
        if self.subtract_gravity and np.any(joint.kp > 0):
            tau = np.clip(tau - np.asarray(self._model.gravity(raw)), -self._torque_limit, self._torque_limit)
        return tau

    # -- helpers -----------------------------------------------------------------------------
    def _store(self, raw) -> None:
        state = state_from_franka(raw, self._elapsed())
        with self._lock:
            self._state, self._state_t = state, time.monotonic()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(
                f"the Franka control loop stopped: {self._error!r}; the supervisor was e-stopped. "
                f"Clear the robot's error (e.g. pylibfranka Robot.automatic_error_recovery) and "
                f"reconnect"
            ) from self._error


__all__ = [
    "FrankaArm",
    "cartesian_torque",
    "franka_hello",
    "jacobian_6x7",
    "joint_torque",
    "probe_franka",
    "rate_limited",
    "state_from_franka",
]
