"""The DrivingSim protocol: one scenario API over every driving backend.

Everything crossing this interface is in the road frame (see frames.py): x forward along the
road, y to the left, heading [rad] counter-clockwise, SI units. One ego, one scene per
instance: driving backends are the one exception to embody's batching rule (highway-env is a
pure-Python loop per vehicle); runner.py spreads episodes over at most two worker processes.

Actions (``step``):
  * continuous: ndarray (2,) = [acceleration m/s², steering angle rad, positive turns left],
    clipped to ±ACCEL_MAX, ±STEER_MAX; ``normalize_action``/``denormalize_action`` map to [-1, 1]
    for learned policies;
  * meta-actions: one of META_ACTIONS (a name or its index): lane changes and ±5 m/s target
    speed steps, executed by the backend's lane and speed controllers until the next action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from embody import exits

ACCEL_MAX = 5.0  # [m/s²], highway-env's ContinuousAction range
STEER_MAX = np.pi / 4  # [rad]
META_ACTIONS = ("LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER")
SPEED_STEP = 5.0  # [m/s] per FASTER/SLOWER

EGO_FEATURES = ("x", "y", "heading", "speed", "lateral_offset", "heading_error")
OTHER_FEATURES = ("presence", "dx", "dy", "dvx", "dvy", "heading", "speed")

Action = np.ndarray | str | int


class DrivingError(ValueError):
    """Bad driving input (a scenario, an actor, an action); the message says which and where."""

    exit_code = exits.INPUT


class SimulatorUnavailable(ConnectionError):
    """A simulator server could not be reached in time; the message names host:port and the timeout."""

    exit_code = exits.UNREACHABLE


class UnsupportedFeature(DrivingError):
    """A backend cannot do what was asked (e.g. exact cloning in CARLA); the message says so."""


@dataclass
class ActorState:
    """One vehicle in the road frame. ``lane``: lane index in its road segment (0 = leftmost), -1 off road."""

    name: str
    kind: str  # "ego", "traffic", "behavior", "scripted"
    x: float
    y: float
    heading: float
    speed: float
    lane: int
    crashed: bool = False


@dataclass
class Observation:
    """What the ego perceives.

    ego:    (6,) EGO_FEATURES — road-frame pose and speed; lateral_offset [m] from the current
            lane's centre (positive left) and heading_error [rad] against the lane's direction
    others: (K, 7) OTHER_FEATURES of the K nearest vehicles within perception range, nearest
            first, zero rows (presence 0) when fewer: positions and velocities relative to the
            ego, in road-frame axes; heading and speed absolute
    image:  (H, W, 3) uint8 bird's-eye view centred on the ego, or None when not requested;
            highway-env: aligned with its world (on highway and merge roads the road frame:
            +x to the right, +y up), CARLA: a camera above the ego, turning with it
    t:      seconds since reset
    """

    ego: np.ndarray
    others: np.ndarray
    t: float
    image: np.ndarray | None = None

    def flat(self) -> np.ndarray:
        """(6 + 7K,) float32: the kinematic features as one vector for a policy."""
        return np.concatenate([self.ego, self.others.ravel()]).astype(np.float32)


@dataclass
class StepMetrics:
    """Per-step safety and progress measures.

    collision:  the ego touched another vehicle or an obstacle (latched for the episode)
    off_road:   the ego's centre is outside every lane
    progress_m: distance travelled along the road since reset [m] (speed projected on the lane direction)
    ttc_s:      time to collision with the nearest vehicle ahead in the ego's lane at constant
                speeds [s]; inf when there is none or it is not closing in; 0 when touching
    lead_gap_m: bumper-to-bumper gap to that vehicle [m]; inf when there is none
    speed:      ego speed [m/s]
    """

    t: float
    collision: bool
    off_road: bool
    progress_m: float
    ttc_s: float
    lead_gap_m: float
    speed: float


@dataclass
class StepResult:
    """One control step's outcome; ``done`` with ``reason`` "collision", "time" or "end_of_road" ("" while running)."""

    obs: Observation
    metrics: StepMetrics
    done: bool
    reason: str = ""  # "collision", "time", "end_of_road", or ""
    info: dict = field(default_factory=dict)


@runtime_checkable
class DrivingSim(Protocol):
    """One scenario in one driving simulator, stepped closed-loop at ``dt`` (the control period)."""

    name: ClassVar[str]
    exact_clone: ClassVar[bool]  # True: restore_state reproduces continuations bit for bit
    dt: float

    def reset(self, seed: int | None = None) -> Observation:
        """Build the scenario afresh (traffic drawn from ``seed``, default the scenario's)."""

    def step(self, action: Action) -> StepResult:
        """Apply ``action`` for one control period."""

    def observe(self, image: bool = False) -> Observation:
        """The ego's current Observation; ``image`` adds the bird's-eye view (slower)."""
        ...

    def metrics(self) -> StepMetrics:
        """The current StepMetrics (what ``step`` reports, without stepping)."""
        ...

    def actors(self) -> list[ActorState]:
        """Every vehicle in the scene, the ego first."""

    def expert_action(self) -> np.ndarray:
        """The privileged expert's continuous action (2,) for the current state."""

    def clone_state(self) -> object:
        """An opaque snapshot for branching; restore it any number of times."""

    def restore_state(self, state: object) -> None:
        """Return to a snapshot from this sim's ``clone_state``; raises DrivingError for another sim's or scenario's."""
        ...

    def render(self, size: tuple[int, int] | None = None, scale: float | None = None) -> np.ndarray:
        """Bird's-eye RGB (H, W, 3) uint8 centred on the ego; ``size`` (W, H) px, ``scale`` px/m."""

    def close(self) -> None: ...


def parse_action(action: Action) -> tuple[str, np.ndarray | str]:
    """("continuous", (2,) clipped) or ("meta", name); anything else raises DrivingError."""
    if isinstance(action, (str, np.str_)):
        name = str(action).upper()
        if name not in META_ACTIONS:
            raise DrivingError(f"unknown meta-action {action!r}; valid: {', '.join(META_ACTIONS)}")
        return "meta", name
    if isinstance(action, (int, np.integer)):
        if not 0 <= int(action) < len(META_ACTIONS):
            raise DrivingError(f"meta-action index {action} out of range 0..{len(META_ACTIONS) - 1}")
        return "meta", META_ACTIONS[int(action)]
    a = np.asarray(action, dtype=np.float64).reshape(-1)
    if a.shape != (2,) or not np.all(np.isfinite(a)):
        raise DrivingError(f"a continuous action is [acceleration, steering] (2 finite numbers), got {action!r}")
    return "continuous", np.array([np.clip(a[0], -ACCEL_MAX, ACCEL_MAX), np.clip(a[1], -STEER_MAX, STEER_MAX)])


def normalize_action(action: np.ndarray) -> np.ndarray:
    """Physical [acc, steer] → [-1, 1]²."""
    return np.clip(np.asarray(action, dtype=np.float64) / np.array([ACCEL_MAX, STEER_MAX]), -1.0, 1.0)


def denormalize_action(action: np.ndarray) -> np.ndarray:
    """[-1, 1]² → physical [acc, steer]."""
    return np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0) * np.array([ACCEL_MAX, STEER_MAX])


def time_to_collision(gap: float, v_ego: float, v_lead: float) -> float:
    """Seconds until a bumper gap ``gap`` closes at constant speeds; inf if not closing, 0 if touching."""
    if gap <= 0.0:
        return 0.0
    closing = v_ego - v_lead
    return gap / closing if closing > 1e-9 else float("inf")


def nearest_others(ego_xy: np.ndarray, ego_v: np.ndarray, states: np.ndarray, k: int, radius: float) -> np.ndarray:
    """The OTHER_FEATURES block (k, 7) from road-frame rows (n, 5) of x, y, heading, speed, and the
    ego's position (2,) and velocity (2,)."""
    out = np.zeros((k, len(OTHER_FEATURES)))
    if len(states) == 0 or k == 0:
        return out
    d = np.hypot(states[:, 0] - ego_xy[0], states[:, 1] - ego_xy[1])
    idx = [i for i in np.argsort(d, kind="stable") if d[i] < radius][:k]
    for row, i in enumerate(idx):
        x, y, h, v = states[i, :4]
        vx, vy = v * np.cos(h), v * np.sin(h)
        out[row] = (1.0, x - ego_xy[0], y - ego_xy[1], vx - ego_v[0], vy - ego_v[1], h, v)
    return out


def summarize(steps: list[StepMetrics], reason: str) -> dict:
    """One episode's metrics as plain JSON-ready values (inf becomes None)."""

    def num(v: float) -> float | None:
        return None if not np.isfinite(v) else round(float(v), 4)

    if not steps:
        return {"steps": 0, "ended_by": reason}
    return {
        "steps": len(steps),
        "duration_s": num(steps[-1].t),
        "collision": any(s.collision for s in steps),
        "off_road_steps": sum(s.off_road for s in steps),
        "progress_m": num(steps[-1].progress_m),
        "mean_speed": num(float(np.mean([s.speed for s in steps]))),
        "min_ttc_s": num(min(s.ttc_s for s in steps)),
        "min_lead_gap_m": num(min(s.lead_gap_m for s in steps)),
        "ended_by": reason,
    }


def driving_score(summary: dict, reference_m: float) -> float:
    """One episode's driving score in [0, 1] from ``summarize``'s dict (a simplified NAVSIM/nuPlan-style score):
    1[no collision] · 1[never off road] · min(1, progress_m / reference_m), ``reference_m`` the progress the episode
    is measured against (an unobstructed cruise, or the expert's on the same seed)."""
    if summary.get("collision") or summary.get("off_road_steps", 0) > 0:
        return 0.0
    return float(min(1.0, (summary.get("progress_m") or 0.0) / max(reference_m, 1e-9)))
