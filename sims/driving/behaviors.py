"""Parameterized behavior models for scenario actors, independent of the backend.

Each model is a dataclass of parameters that, called with an ActorContext at every simulation
step, returns a Command: the lane to be in and either a desired speed (tracked with IDM
car-following, so the actor never drives into the vehicle ahead of it) or a direct
acceleration (which ignores the vehicle ahead: hard braking). The backend turns the Command
into steering with its lane controller. Models keep their phase across calls (a fresh copy per
actor and per reset; cloned with the scene state).

  lane-follow  keep a lane at a speed
  overtake     catch up with the ego, pass it on a side lane, return in front of it
  cut-in       drive past the ego on a neighbouring lane, then change into the ego's lane ahead of it
  hard-brake   cruise, then brake at a fixed deceleration (at a time, or when the ego closes in)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from .base import ActorState, DrivingError

VEHICLE_LENGTH = 5.0  # [m], highway-env's and roughly a CARLA sedan's


@dataclass
class ActorContext:
    """What a behavior sees at one step. ``gap_to_ego``: the ego's longitudinal position minus
    the actor's, along the actor's lane, centre to centre [m] (> 0: the ego is ahead)."""

    t: float
    dt: float
    me: ActorState
    ego: ActorState
    lanes: int
    gap_to_ego: float


@dataclass
class Command:
    """Target ``lane`` (0 = leftmost) and a desired ``speed`` [m/s] (IDM) or an ``acceleration`` [m/s²]."""

    lane: int
    speed: float | None = None
    acceleration: float | None = None


class Behavior(Protocol):
    """A scripted actor's policy: called once per control step with the actor's ActorContext, returns its Command."""

    name: ClassVar[str]

    def __call__(self, ctx: ActorContext) -> Command: ...


def _clip_lane(lane: int, lanes: int) -> int:
    return max(0, min(int(lane), lanes - 1))


def _brake(ctx: ActorContext, decel: float, min_speed: float) -> float:
    """The deceleration that reaches ``min_speed`` without overshooting it in one step."""
    return -min(decel, max(0.0, ctx.me.speed - min_speed) / max(ctx.dt, 1e-6))


@dataclass
class LaneFollow:
    """Keep ``lane`` (None: the lane the actor starts in) at ``speed``, following the vehicle ahead (IDM)."""

    name: ClassVar[str] = "lane-follow"
    speed: float = 25.0
    lane: int | None = None

    def __call__(self, ctx: ActorContext) -> Command:
        if self.lane is None:
            self.lane = ctx.me.lane
        return Command(_clip_lane(self.lane, ctx.lanes), speed=self.speed)


@dataclass
class Overtake:
    """Follow the ego until within ``trigger_gap`` behind it in its lane, pass on the ``side`` lane
    (the other side where there is none) at ``speed``, and return to the ego's lane once
    ``return_gap`` m (bumper to bumper) ahead of it."""

    name: ClassVar[str] = "overtake"
    speed: float = 30.0
    side: Literal["left", "right"] = "left"
    trigger_gap: float = 40.0
    return_gap: float = 10.0
    phase: str = "follow"  # follow → pass → return (state, not a parameter)

    def __post_init__(self) -> None:
        self._home: int | None = None
        self._pass_lane: int | None = None

    def __call__(self, ctx: ActorContext) -> Command:
        if self._home is None:
            self._home = ctx.me.lane
        if self.phase == "follow":
            if ctx.me.lane == ctx.ego.lane and 0.0 < ctx.gap_to_ego < self.trigger_gap:
                step = -1 if self.side == "left" else 1
                lane = ctx.me.lane + step
                if not 0 <= lane < ctx.lanes:
                    lane = ctx.me.lane - step
                if 0 <= lane < ctx.lanes:
                    self.phase, self._pass_lane = "pass", lane
            return Command(self._home if self.phase == "follow" else self._pass_lane, speed=self.speed)
        if self.phase == "pass":
            if -ctx.gap_to_ego - VEHICLE_LENGTH >= self.return_gap:
                self.phase, self._home = "return", ctx.ego.lane
            else:
                return Command(self._pass_lane, speed=self.speed)
        return Command(_clip_lane(self._home, ctx.lanes), speed=self.speed)


@dataclass
class CutIn:
    """Drive in the starting lane at ``speed``; once its rear is ``trigger_ahead`` m in front of the
    ego's front bumper, change into ``target_lane`` (None: the ego's lane at that moment) and
    continue at ``after_speed`` (None: ``speed``)."""

    name: ClassVar[str] = "cut-in"
    speed: float = 30.0
    trigger_ahead: float = 5.0
    target_lane: int | None = None
    after_speed: float | None = None
    phase: str = "approach"  # approach → cut (state)

    def __post_init__(self) -> None:
        self._home: int | None = None
        self._target: int | None = None

    def __call__(self, ctx: ActorContext) -> Command:
        if self._home is None:
            self._home = ctx.me.lane
        if self.phase == "approach":
            if -ctx.gap_to_ego - VEHICLE_LENGTH >= self.trigger_ahead:
                self.phase = "cut"
                self._target = self.target_lane if self.target_lane is not None else ctx.ego.lane
            else:
                return Command(self._home, speed=self.speed)
        speed = self.after_speed if self.after_speed is not None else self.speed
        return Command(_clip_lane(self._target, ctx.lanes), speed=speed)


@dataclass
class HardBrake:
    """Cruise in the starting lane at ``speed``; from ``at_time`` [s] (or, if ``trigger_gap`` is set,
    as soon as the ego is that close behind, centre to centre) brake at ``decel`` [m/s²] down to
    ``min_speed`` and hold it."""

    name: ClassVar[str] = "hard-brake"
    speed: float = 25.0
    at_time: float = 3.0
    decel: float = 7.0
    min_speed: float = 0.0
    trigger_gap: float | None = None
    phase: str = "cruise"  # cruise → brake (state)

    def __post_init__(self) -> None:
        self._lane: int | None = None

    def __call__(self, ctx: ActorContext) -> Command:
        if self._lane is None:
            self._lane = ctx.me.lane
        if self.phase == "cruise":
            near = self.trigger_gap is not None and -self.trigger_gap < ctx.gap_to_ego < 0.0
            if (self.trigger_gap is None and ctx.t >= self.at_time) or near:
                self.phase = "brake"
            else:
                return Command(self._lane, speed=self.speed)
        return Command(self._lane, acceleration=_brake(ctx, self.decel, self.min_speed))


BEHAVIORS: dict[str, type] = {b.name: b for b in (LaneFollow, Overtake, CutIn, HardBrake)}
_STATE_FIELDS = {"phase"}


def make_behavior(name: str, params: dict | None = None) -> Behavior:
    """A fresh behavior ``name`` with ``params``; unknown names or parameters list the valid ones."""
    if name not in BEHAVIORS:
        raise DrivingError(f"unknown behavior {name!r}; valid: {', '.join(sorted(BEHAVIORS))}")
    cls = BEHAVIORS[name]
    valid = [f.name for f in dataclasses.fields(cls) if f.name not in _STATE_FIELDS]
    unknown = sorted(set(params or {}) - set(valid))
    if unknown:
        raise DrivingError(f"behavior {name!r}: unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        return cls(**(params or {}))
    except TypeError as e:
        raise DrivingError(f"behavior {name!r}: {e}") from None


def idm_acceleration(
    speed: float,
    desired: float,
    gap: float | None = None,
    lead_speed: float = 0.0,
    a_max: float = 3.0,
    b: float = 5.0,
    d0: float = 10.0,
    time_gap: float = 1.5,
    delta: float = 4.0,
) -> float:
    """The Intelligent Driver Model with highway-env's constants: ``gap`` is centre to centre [m]
    (None: nothing ahead), ``d0`` the jam distance including one car length."""
    acc = a_max * (1.0 - (max(speed, 0.0) / max(abs(desired), 1e-3)) ** delta)
    if gap is not None:
        wanted = d0 + speed * time_gap + speed * (speed - lead_speed) / (2.0 * math.sqrt(a_max * b))
        acc -= a_max * (wanted / max(gap, 1e-3)) ** 2
    return acc
