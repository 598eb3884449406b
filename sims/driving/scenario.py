"""Scenario definitions (typed config dataclasses) and the registry of named scenarios.

A Scenario says which road (kind, lanes), what background traffic (count, density, behavior
model), where the ego starts, which behavior-model actors to place around the ego, which
scripted actors to replay (waypoints, usually from an actors CSV), and how to simulate (rates,
duration, observation sizes). ``--set key=value`` overrides work on it like on any embody config
(``embody drive highway --set traffic.vehicles=10``).

Fast settings (``fast_settings`` / ``embody drive --fast``): highway-env spends its time in a
pure-Python loop over vehicle pairs, so speed comes from fewer vehicles and fewer integration
steps: at most 12 background vehicles, one simulation step per control step (5 Hz instead of
15 Hz: coarser IDM/MOBIL reactions) and no traffic–traffic collision checks (the ego's still
count). They change the dynamics slightly; say so when reporting numbers from them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

from embody.config import Span
from embody.registry import Registry

from .actors import Trajectory


@dataclass
class RoadSpec:
    """``kind``: highway (straight, ``lanes`` lanes), merge (2 lanes + an on-ramp), roundabout (2-lane
    ring, 4 entries)."""

    kind: Literal["highway", "merge", "roundabout"] = "highway"
    lanes: int = 4  # highway only
    speed_limit: float = 30.0  # [m/s], highway only
    length: float = 10000.0  # [m], highway only


@dataclass
class TrafficSpec:
    """Background vehicles, placed around the ego at random (from the reset seed).

    model: idm (IDM + MOBIL lane changes), idm-keep-lane, linear, aggressive, defensive (highway-env's
    variants), constant (no control: constant speed and heading)
    density: 1 = highway-env's default spacing (12 m + 1 s × speed between vehicles of a lane); 2 = half
    merging: vehicles entering from the on-ramp (merge) or from the other entries (roundabout)
    """

    vehicles: int = 20
    density: float = 1.0
    model: Literal["idm", "idm-keep-lane", "linear", "aggressive", "defensive", "constant"] = "idm"
    speed_range: Span = (21.0, 27.0)
    merging: int = 2
    collisions: bool = True  # check traffic–traffic collisions (the ego's are always checked)


@dataclass
class EgoSpec:
    """Start in ``lane`` (0 = leftmost) ``x`` m along the start road at ``speed``; the expert cruises
    at ``target_speed``."""

    lane: int = 1
    x: float = 150.0
    speed: float = 25.0
    target_speed: float = 28.0
    lane_change: bool = True  # the expert may change lanes (MOBIL)
    destination: str = ""  # roundabout: exit road (highway-env node, default "nxs": straight on)


@dataclass
class ActorSpec:
    """A behavior-model actor ``dx`` m ahead of the ego's start (negative: behind) in ``lane``."""

    name: str = "actor"
    lane: int = 0
    dx: float = 30.0
    speed: float = 25.0
    behavior: str = "lane-follow"  # a name in behaviors.BEHAVIORS
    params: dict = field(default_factory=dict)  # the behavior's parameters (behaviors.py)


@dataclass
class SimSettings:
    """Timing, observation and rendering settings shared by every sim that runs a scenario."""

    simulation_frequency: int = 15  # [Hz] integration steps
    policy_frequency: int = 5  # [Hz] control steps (dt = 1 / policy_frequency)
    duration_s: float = 30.0
    terminate_on_collision: bool = True
    obs_vehicles: int = 8  # K in Observation.others
    perception_m: float = 100.0
    image_size: tuple[int, int] = (128, 128)  # (W, H) of the observation's bird's-eye image
    image_scale: float = 2.5  # [px/m]
    video_size: tuple[int, int] = (640, 240)
    video_scale: float = 5.0
    seed: int = 0


@dataclass
class Scenario:
    """A road, its traffic, the ego, behavior actors and scripted trajectories; ``dt`` is the control period [s]."""

    name: str = "custom"
    description: str = ""
    road: RoadSpec = field(default_factory=RoadSpec)
    traffic: TrafficSpec = field(default_factory=TrafficSpec)
    ego: EgoSpec = field(default_factory=EgoSpec)
    actors: list[ActorSpec] = field(default_factory=list)
    scripted: dict[str, Trajectory] = field(default_factory=dict)  # replayed waypoints, road frame
    settings: SimSettings = field(default_factory=SimSettings)

    @property
    def dt(self) -> float:
        return 1.0 / self.settings.policy_frequency

    def with_scripted(self, actors: dict[str, Trajectory]) -> Scenario:
        """A copy with ``actors`` added (replacing same-named ones)."""
        s = copy.deepcopy(self)
        s.scripted.update(actors)
        return s


def fast_settings(scenario: Scenario, max_vehicles: int = 12) -> Scenario:
    """A copy of ``scenario`` with the fast settings described in this module's docstring."""
    s = copy.deepcopy(scenario)
    s.traffic.vehicles = min(s.traffic.vehicles, max_vehicles)
    s.traffic.collisions = False
    s.settings.simulation_frequency = s.settings.policy_frequency
    s.name = f"{s.name}+fast"
    return s


def traffic_slots(
    rng,
    traffic: TrafficSpec,
    ego_x: float,
    lanes: list[int],
    x_min: float,
    x_max: float,
    keep_clear: list[tuple[int, float]],
) -> list[tuple[int, float, float]]:
    """Random (lane, x, speed) for ``traffic.vehicles`` background vehicles on a straight stretch.

    Vehicles spread ~30 % behind and ~70 % ahead of ``ego_x`` at the density's spacing, at least
    half a spacing (≥ 12 m) apart within a lane, and clear of 25 m behind to 30 m ahead of every
    (lane, x) in ``keep_clear`` (the ego and the behavior actors). Fewer come back when they do not fit.
    """
    lo, hi = traffic.speed_range
    spacing = (12.0 + 0.5 * (lo + hi)) / max(traffic.density, 1e-3)
    spread = traffic.vehicles * spacing / max(len(lanes), 1)
    a, b = max(x_min, ego_x - 0.3 * spread), min(x_max, ego_x + 0.7 * spread + 30.0)
    min_gap = max(12.0, 0.5 * spacing)
    taken = [(lane, x, True) for lane, x in keep_clear]
    out: list[tuple[int, float, float]] = []
    for _ in range(50 * traffic.vehicles):
        if len(out) >= traffic.vehicles or b <= a:
            break
        lane, x = int(rng.choice(lanes)), float(rng.uniform(a, b))
        if any(
            lane == other and -(25.0 if clear else min_gap) < x - px < (30.0 if clear else min_gap)
            for other, px, clear in taken
        ):
            continue
        out.append((lane, x, float(rng.uniform(lo, hi))))
        taken.append((lane, x, False))
    return out


# ---------------------------------------------------------------- named scenarios


def highway() -> Scenario:
    """In-domain: 4-lane highway, moderate IDM/MOBIL traffic."""
    return Scenario(
        "highway",
        "in-domain: 4-lane highway, moderate IDM/MOBIL traffic",
        RoadSpec("highway", lanes=4),
        TrafficSpec(vehicles=20, density=1.0),
        EgoSpec(lane=1),
    )


def highway_dense() -> Scenario:
    """Out-of-domain: the highway with twice the density and slower traffic."""
    return Scenario(
        "highway-dense",
        "out-of-domain: the highway with twice the density and slower traffic",
        RoadSpec("highway", lanes=4),
        TrafficSpec(vehicles=40, density=2.0, speed_range=(17.0, 23.0)),
        EgoSpec(lane=1, speed=22.0, target_speed=28.0),
    )


def merge() -> Scenario:
    """Out-of-domain road: 2-lane highway with vehicles merging from an on-ramp."""
    return Scenario(
        "merge",
        "out-of-domain road: 2-lane highway with vehicles merging from an on-ramp",
        RoadSpec("merge"),
        TrafficSpec(vehicles=6, density=1.0, speed_range=(22.0, 28.0), merging=3),
        EgoSpec(lane=1, x=30.0, speed=25.0, target_speed=28.0),
        settings=SimSettings(duration_s=20.0),
    )


def roundabout() -> Scenario:
    """Out-of-domain road: 2-lane roundabout, the ego goes straight through."""
    return Scenario(
        "roundabout",
        "out-of-domain road: 2-lane roundabout, ego goes straight through",
        RoadSpec("roundabout", speed_limit=20.0),
        TrafficSpec(vehicles=6, density=1.0, speed_range=(12.0, 16.0), merging=2),
        EgoSpec(lane=0, x=125.0, speed=8.0, target_speed=12.0, destination="nxs"),
        settings=SimSettings(duration_s=20.0, video_size=(400, 400), video_scale=3.0),
    )


def cut_in() -> Scenario:
    """Safety-critical: a faster car passes on the left and cuts in close, then slows."""
    actor = ActorSpec(
        "cutter",
        lane=0,
        dx=-15.0,
        speed=30.0,
        behavior="cut-in",
        params={"speed": 30.0, "trigger_ahead": 4.0, "after_speed": 20.0},
    )
    return Scenario(
        "cut-in",
        "safety-critical: a faster car passes on the left and cuts in close, then slows",
        RoadSpec("highway", lanes=3),
        TrafficSpec(vehicles=6, density=0.5),
        EgoSpec(lane=1, speed=25.0, target_speed=25.0, lane_change=False),
        [actor],
        settings=SimSettings(duration_s=15.0),
    )


def hard_brake() -> Scenario:
    """Safety-critical: the car ahead brakes hard to a stop."""
    actor = ActorSpec(
        "braker",
        lane=1,
        dx=25.0,
        speed=25.0,
        behavior="hard-brake",
        params={"speed": 25.0, "at_time": 3.0, "decel": 7.0},
    )
    return Scenario(
        "hard-brake",
        "safety-critical: the car ahead brakes hard to a stop",
        RoadSpec("highway", lanes=3),
        TrafficSpec(vehicles=6, density=0.5),
        EgoSpec(lane=1, speed=25.0, target_speed=25.0, lane_change=False),
        [actor],
        settings=SimSettings(duration_s=15.0),
    )


SCENARIOS: Registry = Registry("scenario")
for _name, _fn in (
    ("highway", "highway"),
    ("highway-dense", "highway_dense"),
    ("merge", "merge"),
    ("roundabout", "roundabout"),
    ("cut-in", "cut_in"),
    ("hard-brake", "hard_brake"),
):
    SCENARIOS.register(_name, f"embody.sims.driving.scenario:{_fn}", extra="driving")


def get_scenario(name: str) -> Scenario:
    """A fresh copy of the named scenario; unknown names list the valid ones."""
    return SCENARIOS.get(name)()
