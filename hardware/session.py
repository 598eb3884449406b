"""SupervisedSession: the one sequence that drives a robot through its safety supervisor.

::

    connect → ramp to the default pose → hold (→ on_hold) → POLICY: step(tick, t) at rate_hz → damping

``embody deploy``, ``embody replay --robot`` and teleoperation (``hardware.teleop``) all run it; they
differ only in their step function. A step reads the state and sends at most one command through the
driver (whose supervisor clamps it); it returns False to end the loop.

A fault in any stage ends the same way. Faults are: the supervisor latched DAMPING (stale or lost
state, a fall, over-temperature or speed, wrist force, an e-stop or SIGINT/SIGTERM, a non-finite or
malformed command), a stage that did not finish in time (the ramp), or a step that gave up
(``StepFailed``, e.g. a homing move that did not arrive). The loop stops, the driver is closed (which
damps the robot), and the summary names the stage and the reason; its ``exit_code`` is
``exits.FAILED`` (1). Nothing is raised. A bug in a step (any other exception) damps the robot the
same way (close runs in ``finally``) and keeps its traceback. A robot that cannot be reached at all
raises ``RobotConnectionError`` from ``connect`` (exit 2: check the interface or address).

The session starts from the supervisor's phase as it finds it: a driver already connected, ramped or
in POLICY (a test fixture, a second session on one connection) skips what is done.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Protocol

from embody import exits

from .interface import RobotInterface
from .realtime import POLICY_PRIORITY, realtime_thread
from .supervisor import Phase, PhaseError, SafetySupervisor

log = logging.getLogger("embody.hardware.session")

STAGES = ("connect", "ramp", "hold", "policy", "damping")


class StepFailed(RuntimeError):
    """Raised by a step to end the session in damping with this message as the fault's reason."""


class Step(Protocol):
    """One control tick of a SupervisedSession loop."""

    def __call__(self, tick: int, t: float) -> bool:
        """One control tick: ``tick`` 0, 1, …; ``t`` seconds since the loop began. Returns False to stop."""


@dataclass(frozen=True)
class SessionConfig:
    """Timings of a session [s, Hz]."""

    rate_hz: float = 50.0  # the step rate
    hold_s: float = 1.0  # in HOLD before on_hold and POLICY
    duration_s: float | None = None  # loop time limit; None: until the step returns False
    ramp_timeout_s: float = 5.0  # beyond the supervisor's ramp_s, for the ramp to reach HOLD
    connect_timeout_s: float = 10.0
    signals: bool = True  # SIGINT/SIGTERM → e-stop while the session runs (main thread only)
    realtime_priority: int | None = POLICY_PRIORITY  # the step loop under SCHED_FIFO where permitted; None: normal

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_hz) and self.rate_hz > 0):
            raise ValueError(f"SessionConfig.rate_hz must be a finite number > 0, got {self.rate_hz!r}")
        if not self.hold_s >= 0:
            raise ValueError(f"SessionConfig.hold_s must be >= 0, got {self.hold_s!r}")


@dataclass
class SessionSummary:
    """What a session did. ``reached``: the STAGES entered, in order; ``ended_in``: the supervisor's
    phase when the sequence ended, before the closing damping (POLICY: no fault); ``fault``/``stage``:
    the reason and the stage it ended, or None; ``rate_hz``: achieved, ticks / loop_s; ``events``: every
    phase transition, the closing damping's included; ``counters``: the supervisor's as the sequence
    ended, before the closing damping (whose e-stop would count as a fault)."""

    reached: list[str]
    ticks: int
    loop_s: float
    rate_hz: float
    ended_in: str
    fault: str | None
    stage: str | None
    events: list[dict] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No fault ended the session."""
        return self.fault is None

    @property
    def exit_code(self) -> int:
        """exits.OK, or exits.FAILED when a fault ended the session."""
        return exits.OK if self.ok else exits.FAILED

    def as_dict(self) -> dict:
        """The summary as JSON-ready values, with ``exit_code``."""
        return {**asdict(self), "exit_code": self.exit_code}


class _Fault(Exception):
    def __init__(self, reason: str, stage: str | None = None):
        super().__init__(reason)
        self.reason, self.stage = reason, stage


class SupervisedSession:
    """Runs ``step`` on ``driver`` inside the supervised sequence; see the module docstring.

    driver:  a RobotInterface (connected or not) with its ``supervisor``
    on_hold: called once in HOLD, after ``hold_s``, before POLICY (deploy releases a simulated band)
    """

    def __init__(
        self, driver: RobotInterface, config: SessionConfig = SessionConfig(), on_hold: Callable[[], None] | None = None
    ):
        self.driver, self.config, self.on_hold = driver, config, on_hold
        self.reached: list[str] = []
        self.ticks, self.loop_s = 0, 0.0

    @property
    def supervisor(self) -> SafetySupervisor:
        return self.driver.supervisor

    def run(self, step: Step) -> SessionSummary:
        """The whole sequence; always closes (damps) the driver. Returns the summary."""
        sup, fault, stage = self.supervisor, None, None
        signals = self.config.signals and threading.current_thread() is threading.main_thread()
        if signals:
            sup.install_signal_handlers()
        try:
            self._connect()
            self._ramp()
            self._hold()
            self._loop(step)
        except StepFailed as e:
            fault = str(e)
            sup.estop(fault)  # the supervisor's events name it too
        except _Fault as e:
            fault, stage = e.reason, e.stage
        finally:
            if fault is None and sup.phase is Phase.DAMPING:  # damped after the loop's last check
                fault, stage = damping_reason(sup), damping_stage(sup)
            ended_in = Phase.DAMPING.name if fault is not None else sup.phase.name
            stage = stage or self.reached[-1]
            if fault is not None and stage not in self.reached:  # the supervisor got there before we looked
                self.reached.append(stage)
            counters = dict(sup.counters)  # before the closing damping (an e-stop, counted as a fault)
            self.reached.append("damping")
            self.driver.close()  # damps: kp 0, kd damping_kd
            if signals:
                sup.uninstall_signal_handlers()
        if fault is not None:
            log.warning("session ended in %s by a fault: %s", stage, fault)
        return SessionSummary(
            self.reached,
            self.ticks,
            self.loop_s,
            self.ticks / self.loop_s if self.loop_s else 0.0,
            ended_in,
            fault,
            stage if fault is not None else None,
            events_of(sup),
            counters,
        )

    # -- the stages ------------------------------------------------------------------------------

    def _connect(self) -> None:
        self.reached.append("connect")
        if self.driver.state_age() == math.inf:  # inf before the first state (the protocol's promise)
            self.driver.connect(self.config.connect_timeout_s)

    def _ramp(self) -> None:
        sup = self.supervisor
        self._check()
        if sup.phase is not Phase.ZERO_TORQUE:
            return
        self.reached.append("ramp")
        self._start(sup.start_ramp)
        deadline = time.monotonic() + sup.config.ramp_s + self.config.ramp_timeout_s
        while sup.phase is Phase.RAMP:
            if time.monotonic() > deadline:
                self._give_up(
                    f"the ramp did not reach HOLD within {sup.config.ramp_s + self.config.ramp_timeout_s:g} s"
                )
            time.sleep(0.01)
        self._check()

    def _hold(self) -> None:
        sup = self.supervisor
        if sup.phase is not Phase.HOLD:
            self._check()
            return
        self.reached.append("hold")
        deadline = time.monotonic() + self.config.hold_s
        while time.monotonic() < deadline:
            self._check()
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
        self._check()
        if self.on_hold is not None:
            self.on_hold()
        self._start(sup.start_policy)

    def _loop(self, step: Step) -> None:
        self.reached.append("policy")
        period, limit = 1.0 / self.config.rate_hz, self.config.duration_s
        t0 = next_t = time.monotonic()
        try:
            with realtime_thread(self.config.realtime_priority, "session step loop"):
                while limit is None or time.monotonic() - t0 < limit:
                    self._check()
                    more = step(self.ticks, time.monotonic() - t0)
                    self.ticks += 1
                    self._check()
                    if not more:
                        break
                    next_t = pace(next_t, period)
        finally:
            self.loop_s = time.monotonic() - t0

    # -- faults ----------------------------------------------------------------------------------

    def _start(self, transition: Callable[[], None]) -> None:
        """A supervisor transition; a fault that came first (PhaseError) ends the session."""
        try:
            transition()
        except PhaseError as e:
            self._check()
            raise _Fault(str(e)) from None  # an e-stop pending: damped at the next tick

    def _check(self) -> None:
        """_Fault with the supervisor's reason once it damps."""
        sup = self.supervisor
        if sup.phase is Phase.DAMPING:
            raise _Fault(damping_reason(sup), damping_stage(sup))

    def _give_up(self, reason: str) -> None:
        self.supervisor.estop(reason)
        raise _Fault(reason)


def damping_reason(sup: SafetySupervisor) -> str:
    """Why ``sup`` damps: the reason of its latest transition into DAMPING."""
    return next((e.reason for e in reversed(sup.events) if e.new is Phase.DAMPING), "e-stop")


def damping_stage(sup: SafetySupervisor) -> str:
    """The stage ``sup`` damped in: the phase its latest transition into DAMPING left."""
    old = next((e.old for e in reversed(sup.events) if e.new is Phase.DAMPING), Phase.ZERO_TORQUE)
    return "connect" if old is Phase.ZERO_TORQUE else old.value


def events_of(sup: SafetySupervisor) -> list[dict]:
    """The supervisor's phase changes as dicts: ``t``, ``from``, ``to`` (phase names) and ``reason``."""
    return [{"t": e.time, "from": e.old.name, "to": e.new.name, "reason": e.reason} for e in sup.events]


def pace(next_t: float, period: float) -> float:
    """Sleep until the next tick; when late, restart the schedule from now (a catch-up burst of
    commands would be one big jump of the target)."""
    next_t += period
    now = time.monotonic()
    if next_t > now:
        time.sleep(next_t - now)
        return next_t
    return now


def step_of(ticks: Iterator) -> Step:
    """A Step from a generator that sends one command per ``yield`` (a sequence written top to
    bottom, as teleoperation's homing and episodes are); the loop ends when it returns."""
    done = object()
    return lambda tick, t: next(ticks, done) is not done


__all__ = [
    "STAGES",
    "SessionConfig",
    "SessionSummary",
    "Step",
    "StepFailed",
    "SupervisedSession",
    "damping_reason",
    "events_of",
    "pace",
    "step_of",
]
