"""The Unitree H1-2 driver: RobotInterface over DDS (unitree_hg LowCmd_/LowState_, extra ``hardware``).

A writer thread publishes rt/lowcmd at 500 Hz, as the vendor's deploy code does: each tick it
asks the safety supervisor for the command (which also runs the watchdog, so a policy that
stops or a robot that goes silent still ends in damping) and echoes the robot's mode_machine.
States arrive on rt/lowstate from a DDS thread; those failing the CRC are dropped and counted.
The policy runs at its own rate (50 Hz) and hands commands over with ``send_command``.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from embody.robots import RobotSpec, RobotState

from ..interface import HardwareError, JointCommand, RobotConnectionError
from ..supervisor import SafetySupervisor, SupervisorConfig
from . import messages as msg
from . import wire

log = logging.getLogger("embody.hardware.h1_2")

WRITER_HZ = 500.0
POLICY_HZ = 50.0


def state_from_lowstate(arrays: dict, n_joints: int, t: float) -> RobotState:
    """RobotState (n = 1) from ``messages.lowstate_arrays``: the first ``n_joints`` motors, torso IMU."""
    row = lambda a: np.asarray(a, dtype=np.float64)[None]  # noqa: E731
    return RobotState(
        joint_pos=row(arrays["q"][:n_joints]), joint_vel=row(arrays["dq"][:n_joints]),
        joint_torque=row(arrays["tau_est"][:n_joints]), time=np.array([t]),
        imu_quat=row(arrays["quaternion"]), imu_gyro=row(arrays["gyroscope"]),
        imu_accel=row(arrays["accelerometer"]), motor_temperature=row(arrays["temperature"][:n_joints]),
    )


def lowcmd_packed(cmd: JointCommand, mode_machine: int, reserve: tuple | None = None) -> np.ndarray:
    """The packed LowCmd_ (crc filled) for ``cmd`` over the first j of the 35 motor slots; the rest stay
    passive (mode 0). mode_pr 0: the pitch/roll ankle mode the spec's joints describe."""
    rows = np.zeros((6, msg.NUM_MOTORS))  # np.pad costs ~30 µs per call; this is the hot path
    rows[:, :len(cmd.q)] = (cmd.q, cmd.dq, cmd.tau, cmd.kp, cmd.kd, cmd.enable)
    q, dq, tau, kp, kd, mode = rows
    return msg.lowcmd_record(q=q, dq=dq, tau=tau, kp=kp, kd=kd, mode=mode.astype(np.uint8), mode_pr=0,
                             mode_machine=mode_machine, reserve=reserve)


class H1_2Driver:
    """The H1-2 (or the simulated H1-2 of ``embody robot-sim h1_2``) on ``iface``, DDS domain ``domain``."""

    def __init__(self, iface: str = "lo", domain: int = 0, supervisor: SafetySupervisor | None = None,
                 robot: RobotSpec | None = None, rate_hz: float = WRITER_HZ):
        from embody.robots import get_robot

        self.robot = robot or get_robot("h1_2")
        self.supervisor = supervisor or SafetySupervisor(self.robot, SupervisorConfig())
        self.iface, self.domain, self.period = iface, domain, 1.0 / rate_hz
        self._lock = threading.Condition()
        self._state: RobotState | None = None
        self._state_t = -np.inf
        self._mode_machine = 0
        self._request: JointCommand | None = None
        self._sent: JointCommand | None = None
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._writer = self._reader = None
        self.trace: dict[str, list] | None = None  # set to {} to record tick times and command→state latency
        self.stats = {"states": 0, "crc_errors": 0, "malformed": 0, "commands": 0, "overruns": 0, "max_state_gap_s": 0.0}

    # -- RobotInterface --------------------------------------------------------------------
    def connect(self, timeout_s: float = 5.0) -> None:
        from .. import dds

        wire.check_against_cyclonedds()
        self._writer, self._reader = dds.endpoints(self.domain, self.iface, (msg.TOPIC_LOWCMD, msg.LowCmd_),
                                                   (msg.TOPIC_LOWSTATE, msg.LowState_), self._on_state)
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._state is None and time.monotonic() < deadline:
                self._lock.wait(0.05)
        if self._state is None:
            raise RobotConnectionError(
                f"no valid {msg.TOPIC_LOWSTATE} on interface {self.iface!r}, DDS domain {self.domain} within "
                f"{timeout_s:g} s ({self.stats['crc_errors']} dropped for bad CRC): is the robot, or "
                f"`embody robot-sim h1_2 --iface {self.iface} --domain {self.domain}`, running?")
        self._thread = threading.Thread(target=self._write_loop, name="h1_2-lowcmd-writer", daemon=True)
        self._thread.start()

    def read_state(self) -> RobotState:
        self._raise_if_failed()
        with self._lock:
            if self._state is None:
                raise RobotConnectionError("no state yet: call connect() first")
            return self._state

    def state_age(self) -> float:
        with self._lock:
            return time.monotonic() - self._state_t

    def send_command(self, command: JointCommand) -> JointCommand:
        """Hand ``command`` to the writer thread; returns the command of the next tick that carried it."""
        self._raise_if_failed()
        if len(command.q) != self.robot.n_joints:
            raise ValueError(f"command for {len(command.q)} joints; the {self.robot.name} has {self.robot.n_joints}")
        with self._lock:
            self._request = command.copy()
            ticks = self.stats["commands"]
            self._lock.wait_for(lambda: self.stats["commands"] > ticks or self._error is not None, 10 * self.period)
            self._raise_if_failed()
            return self._sent

    def close(self) -> None:
        """Damp the robot, keep sending damping a few ticks so it lands, then stop."""
        if self._thread is not None and self._thread.is_alive():
            self.supervisor.estop("driver closing")
            time.sleep(10 * self.period)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
        self._thread = None
        self._writer = self._reader = None  # deletes the DDS endpoints

    def __enter__(self) -> "H1_2Driver":
        if self._writer is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- threads ---------------------------------------------------------------------------
    def _on_state(self, reader) -> None:
        if reader is None:  # a callback racing the reader's deletion at close
            return
        for data in wire.take(reader):
            try:
                packed = wire.from_cdr(data, "LowState_")
            except HardwareError as e:
                self.stats["malformed"] += 1
                log.warning("dropped a malformed %s: %s", msg.TOPIC_LOWSTATE, e)
                continue
            if not msg.packed_crc_ok(packed):
                self.stats["crc_errors"] += 1
                continue
            now = time.monotonic()
            arrays = msg.lowstate_arrays(packed)
            if self.trace is not None:
                self.trace.setdefault("arrivals", []).append(now)
                self._trace_latency(int(arrays["reserve"][0]), now)
            state = state_from_lowstate(arrays, self.robot.n_joints, now - self._t0)
            with self._lock:
                if self._state is not None:
                    self.stats["max_state_gap_s"] = max(self.stats["max_state_gap_s"], now - self._state_t)
                self._state, self._state_t, self._mode_machine = state, now, arrays["mode_machine"]
                self.stats["states"] += 1
                self._lock.notify_all()

    def _write_loop(self) -> None:
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                self._tick()
                next_t += self.period
                delay = next_t - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -self.period:  # fell behind by a whole tick: count it, don't burst
                    self.stats["overruns"] += 1
                    next_t = time.monotonic()
        except BaseException as e:  # never die silently: damp, record, and make the next call raise
            log.exception("H1-2 command writer failed")
            self.supervisor.estop(f"command writer failed: {e!r}")
            damping = self.supervisor.step(None, np.inf, None)  # latches DAMPING now: no later tick will
            with self._lock:
                self._error, self._sent = e, damping
                self._lock.notify_all()
            self._send_best_effort(damping)

    def _tick(self) -> None:
        with self._lock:
            state, request, mode_machine = self._state, self._request, self._mode_machine
            age = time.monotonic() - self._state_t
        cmd = self.supervisor.step(state, age, request)
        # tracing numbers the commands (in a field the robot ignores) so that each CRC is unique
        seq = None if self.trace is None else (self.stats["commands"] & 0xFFFFFFFF, 0, 0, 0)
        packed = lowcmd_packed(cmd, mode_machine, seq)
        wire.write(self._writer, wire.to_cdr(packed, "LowCmd_"))
        if self.trace is not None:
            self.trace.setdefault("ticks", []).append(time.monotonic())
            self.trace.setdefault("sent", {})[int(packed[-4:].view("<u4")[0])] = time.monotonic()
        with self._lock:
            self._sent = cmd
            self.stats["commands"] += 1
            self._lock.notify_all()

    def _send_best_effort(self, damping: JointCommand) -> None:
        try:
            wire.write(self._writer, wire.to_cdr(lowcmd_packed(damping, self._mode_machine), "LowCmd_"))
        except Exception:  # the transport itself is gone; the robot's own timeout takes over
            log.exception("could not send damping after the writer failed")

    def _trace_latency(self, echoed_crc: int, now: float) -> None:
        """Command→state latency: robot-sim echoes the CRC of the command it last stepped with."""
        sent = self.trace.setdefault("sent", {}).pop(echoed_crc, None)
        if sent is not None:
            self.trace.setdefault("latency", []).append(now - sent)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"the H1-2 command writer stopped: {self._error!r}; the robot was sent damping") \
                from self._error
