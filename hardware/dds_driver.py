"""A RobotInterface over DDS, for any robot whose messages a ``Codec`` describes (extra ``hardware``).

A writer thread publishes commands at a fixed rate (500 Hz for the H1-2, as the vendor's deploy
code does), under SCHED_FIFO where the system allows it (hardware/realtime.py): each tick it asks
the safety supervisor for the command (which also runs the watchdog, so a policy that stops or a
robot that goes silent still ends in damping) and echoes what the robot asks to be echoed. States arrive from a DDS thread; those failing their CRC are
dropped and counted, malformed ones too. The policy runs at its own rate (50 Hz) and hands
commands over with ``send_command``. The writer thread never dies silently: a failure damps the
robot, and the next ``read_state``/``send_command`` raises it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Protocol

import numpy as np

from embody.robots import RobotSpec, RobotState

from .interface import HardwareError, JointCommand, RobotConnectionError
from .realtime import DEFAULT_PRIORITY, make_realtime, restore_gil_switch, shorten_gil_switch
from .supervisor import SafetySupervisor, SupervisorConfig

log = logging.getLogger("embody.hardware.dds")


class CrcMismatch(HardwareError):
    """A received message whose CRC does not match its contents."""


class Codec(Protocol):
    """One robot's messages on DDS: topics, cyclonedds types and both directions of the encoding.

    Samples are CDR bytes (encapsulation header + payload), written and taken raw.
    """

    command_topic: str
    command_type: type
    state_topic: str
    state_type: type

    def check(self) -> None:
        """Refuse to run (HardwareError) if the encoding disagrees with this cyclonedds."""

    def supervisor_config(self) -> SupervisorConfig:
        """The default supervisor settings for this robot."""

    def decode_state(self, data: bytes, n_joints: int, t: float) -> tuple[RobotState, int, dict]:
        """(RobotState n = 1 at time ``t``, id of the command the robot last applied or 0, values to
        echo in commands); HardwareError if malformed, CrcMismatch on a bad CRC."""

    def encode_command(self, cmd: JointCommand, echo: dict, seq: int | None) -> tuple[bytes, int]:
        """(CDR sample, command id = its CRC); ``seq`` numbers commands in a field the robot ignores."""

    def encode_state(self, state: RobotState, applied_id: int, tick: int) -> bytes:
        """The simulated robot's side: a CDR state sample."""

    def decode_command(self, data: bytes) -> tuple[JointCommand, int, dict]:
        """The simulated robot's side: (command, its id, echoed values); errors as ``decode_state``."""


def write(writer, data: bytes) -> None:
    """Publish a CDR sample on a cyclonedds DataWriter of the matching type (no Python serializer)."""
    from cyclonedds._clayer import ddspy_write
    from cyclonedds.core import DDSException

    ret = ddspy_write(writer._ref, data)
    if ret < 0:
        raise DDSException(ret, f"writing on {writer!r}")


def take(reader, n: int = 64) -> list[bytes]:
    """Raw CDR samples waiting on a cyclonedds DataReader (valid data only)."""
    from cyclonedds._clayer import ddspy_take
    from cyclonedds.core import DDSException, InstanceState, SampleState, ViewState

    ret = ddspy_take(reader._ref, SampleState.Any | ViewState.Any | InstanceState.Any, n)
    if isinstance(ret, int):
        raise DDSException(ret, f"taking from {reader!r}")
    return [data for data, info in ret if info.valid_data]


class DdsDriver:
    """A robot (or ``embody robot-sim ROBOT``) on ``iface``, DDS domain ``domain``, speaking ``codec``."""

    def __init__(
        self,
        codec: Codec,
        robot: RobotSpec,
        iface: str = "lo",
        domain: int = 0,
        supervisor: SafetySupervisor | None = None,
        rate_hz: float = 500.0,
        realtime_priority: int | None = DEFAULT_PRIORITY,
    ):
        self.codec, self.robot = codec, robot
        self.realtime_priority = realtime_priority  # SCHED_FIFO for the writer thread; None: normal priority
        self.supervisor = supervisor or SafetySupervisor(robot, codec.supervisor_config())
        self.iface, self.domain, self.period = iface, domain, 1.0 / rate_hz
        self._lock = threading.Condition()
        self._state: RobotState | None = None
        self._state_t = -np.inf
        self._echo: dict = {}  # what the robot asks each command to echo (the H1-2's mode_machine)
        self._request: JointCommand | None = None
        self._sent: JointCommand | None = None
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._writer = self._reader = None
        self.trace: dict[str, list] | None = None  # set to {} to record tick times and command→state latency
        self.stats = {
            "states": 0,
            "crc_errors": 0,
            "malformed": 0,
            "commands": 0,
            "overruns": 0,
            "max_state_gap_s": 0.0,
            "realtime": False,  # whether the writer thread got SCHED_FIFO
        }

    # -- RobotInterface --------------------------------------------------------------------
    def connect(self, timeout_s: float = 5.0) -> None:
        """Check the codec, open the DDS endpoints on ``iface`` and wait for the first state; RobotConnectionError after
        ``timeout_s``."""
        from . import dds

        c = self.codec
        c.check()
        self._writer, self._reader = dds.endpoints(
            self.domain,
            self.iface,
            (c.command_topic, c.command_type),
            (c.state_topic, c.state_type),
            self._on_state,
            self.realtime_priority,
        )
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._state is None and time.monotonic() < deadline:
                self._lock.wait(0.05)
        if self._state is None:
            raise RobotConnectionError(
                f"no valid {c.state_topic} on interface {self.iface!r}, DDS domain {self.domain} within "
                f"{timeout_s:g} s ({self.stats['crc_errors']} dropped for bad CRC): is the robot, or "
                f"`embody robot-sim {self.robot.name} --iface {self.iface} --domain {self.domain}`, running?"
            )
        self._thread = threading.Thread(target=self._write_loop, name=f"{self.robot.name}-command-writer", daemon=True)
        shorten_gil_switch()
        self._thread.start()

    def read_state(self) -> RobotState:
        """A copy of the latest state (n = 1); raises the listener's error if decoding failed, RobotConnectionError
        before ``connect``."""
        self._raise_if_failed()
        with self._lock:
            if self._state is None:
                raise RobotConnectionError("no state yet: call connect() first")
            return dataclasses.replace(self._state)  # the caller may set fields (deploy sets the task clock)

    def state_age(self) -> float:
        with self._lock:
            return time.monotonic() - self._state_t

    def send_command(self, command: JointCommand) -> JointCommand:
        """Hand ``command`` to the writer thread; returns the command of the next tick that carried it
        (or, if the writer is more than 10 ticks late, the last one it sent)."""
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
            restore_gil_switch()
        self._thread = None
        if self._reader is not None:
            # Remove the listener first: set_listener waits out a callback in flight. Deleting the reader
            # while one runs deadlocks cyclonedds (the callback wraps the dying reader in a new Entity,
            # whose __del__ deletes it a second time from the DDS thread; seen in CI).
            self._reader.set_listener(None)
        self._writer = self._reader = None  # deletes the DDS endpoints

    def __enter__(self) -> DdsDriver:
        if self._writer is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- threads ---------------------------------------------------------------------------
    def _on_state(self, reader) -> None:
        if reader is None:  # a callback racing the reader's deletion at close
            return
        for data in take(reader):
            now = time.monotonic()
            try:
                state, echoed, echo = self.codec.decode_state(data, self.robot.n_joints, now - self._t0)
            except CrcMismatch:
                self.stats["crc_errors"] += 1
                continue
            except HardwareError as e:
                self.stats["malformed"] += 1
                log.warning("dropped a malformed %s: %s", self.codec.state_topic, e)
                continue
            if self.trace is not None:
                self.trace.setdefault("arrivals", []).append(now)
                self._trace_latency(echoed, now)
            with self._lock:
                if self._state is not None:
                    self.stats["max_state_gap_s"] = max(self.stats["max_state_gap_s"], now - self._state_t)
                self._state, self._state_t, self._echo = state, now, echo
                self.stats["states"] += 1
                self._lock.notify_all()

    def _write_loop(self) -> None:
        self.stats["realtime"] = make_realtime(self.realtime_priority, f"{self.robot.name} command writer")
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
            log.exception("%s command writer failed", self.robot.name)
            self.supervisor.estop(f"command writer failed: {e!r}")
            damping = self.supervisor.step(None, np.inf, None)  # latches DAMPING now: no later tick will
            with self._lock:
                self._error, self._sent = e, damping
                self._lock.notify_all()
            self._send_best_effort(damping)

    def _tick(self) -> None:
        with self._lock:
            state, request, echo = self._state, self._request, self._echo
            age = time.monotonic() - self._state_t
        cmd = self.supervisor.step(state, age, request)
        # tracing numbers the commands (in a field the robot ignores) so that each command id is unique
        seq = None if self.trace is None else self.stats["commands"] & 0xFFFFFFFF
        data, command_id = self.codec.encode_command(cmd, echo, seq)
        write(self._writer, data)
        if self.trace is not None:
            self.trace.setdefault("ticks", []).append(time.monotonic())
            self.trace.setdefault("sent", {})[command_id] = time.monotonic()
        with self._lock:
            self._sent = cmd
            self.stats["commands"] += 1
            self._lock.notify_all()

    def _send_best_effort(self, damping: JointCommand) -> None:
        try:
            write(self._writer, self.codec.encode_command(damping, self._echo, None)[0])
        except Exception:  # the transport itself is gone; the robot's own timeout takes over
            log.exception("could not send damping after the writer failed")

    def _trace_latency(self, echoed_crc: int, now: float) -> None:
        """Command→state latency: robot-sim echoes the id of the command it last stepped with."""
        sent = self.trace.setdefault("sent", {}).pop(echoed_crc, None)
        if sent is not None:
            self.trace.setdefault("latency", []).append(now - sent)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RuntimeError(
                f"the {self.robot.name} command writer stopped: {self._error!r}; the robot was sent damping"
            ) from self._error
