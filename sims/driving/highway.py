"""The highway-env backend (embedded default, headless).

We use highway-env's roads, vehicle dynamics (kinematic bicycle), lane/speed controllers,
IDM/MOBIL traffic and collision checks, but build and step the scene ourselves (no gymnasium
env): the road and its vehicles are plain Python objects held in one ``_World``, so

  * stepping is ``road.act(); road.step(1 / simulation_frequency)`` per integration step, the
    ego's command applied first, exactly as highway-env's own env does it;
  * cloning (``clone_state``) is ``copy.deepcopy`` of that world (vehicles, their controllers'
    and behaviors' state, the road's random generator, our clock and progress counter); the
    immutable lane geometry is shared, not copied. No pickling is involved. ``restore_state``
    deep-copies the snapshot back, so one snapshot seeds any number of branches, and a branch
    continues bit for bit as the original would have;
  * rendering draws highway-env's road and vehicle graphics on an off-screen pygame surface
    (no window, no display needed; SDL_VIDEODRIVER defaults to "dummy" without a DISPLAY).

Conversions to the road frame: frames.highway_to_road (y and heading negated, then the
scenario's Frame2D). Vehicles: the ego is green, behavior actors purple, scripted actors
yellow, background traffic blue, crashed vehicles red (traffic only).
"""

from __future__ import annotations

import copy
import math
import os
import weakref

import numpy as np

from embody.extras import require

from .actors import Trajectory
from .base import (
    ACCEL_MAX,
    META_ACTIONS,
    ActorState,
    DrivingError,
    Observation,
    StepMetrics,
    StepResult,
    nearest_others,
    parse_action,
    time_to_collision,
)
from .behaviors import ActorContext, make_behavior
from .frames import Frame2D, highway_frame, highway_to_road, road_to_highway, wrap_angle
from .scenario import Scenario, traffic_slots

if not os.environ.get("DISPLAY"):
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
require("highway_env", "driving")

from highway_env.road.lane import StraightLane  # noqa: E402
from highway_env.road.road import Road, RoadNetwork  # noqa: E402
from highway_env.vehicle.behavior import AggressiveVehicle, DefensiveVehicle, IDMVehicle, LinearVehicle  # noqa: E402
from highway_env.vehicle.controller import ControlledVehicle  # noqa: E402
from highway_env.vehicle.kinematics import Vehicle  # noqa: E402
from highway_env.vehicle.objects import Landmark, Obstacle  # noqa: E402

from . import traffic  # noqa: E402  (imports highway-env)

EGO_COLOR = (50, 200, 0)
BEHAVIOR_COLOR = (160, 60, 200)
SCRIPTED_COLOR = (200, 200, 0)
RING = [
    ("se", "ex"),
    ("ex", "ee"),
    ("ee", "nx"),
    ("nx", "ne"),
    ("ne", "wx"),
    ("wx", "we"),
    ("we", "sx"),
    ("sx", "se"),
]  # highway-env's roundabout ring segments
ROUNDABOUT_EXITS = ["exr", "sxr", "nxr", "wxr"]


def _entry_yield(road, side: str):
    """The yield_at triple for the roundabout entry on ``side`` (s, e, n, w)."""
    lane = road.network.get_lane((f"{side}es", f"{side}e", 0))
    return {(f"{side}er", f"{side}es"), (f"{side}es", f"{side}e")}, lane.position(lane.length, 0.0), set(RING)


# ---------------------------------------------------------------- vehicles


class EgoVehicle(IDMVehicle):
    """The ego: continuous commands or meta-actions, plus the IDM/MOBIL expert evaluated on demand.

    Subclassing IDMVehicle gives the expert highway-env's own IDM and MOBIL with the ego as the
    subject; ``act`` never runs them on its own.
    """

    def __init__(self, road, position, heading=0.0, speed=0.0, target_speed=None, route=None):
        super().__init__(road, position, heading, speed, target_speed=speed, route=route)
        self.name, self.kind, self.color = "ego", "ego", EGO_COLOR
        self.mode = "continuous"
        self.command = {"acceleration": 0.0, "steering": 0.0}  # highway-env signs (steering positive right)
        self.expert_speed = target_speed if target_speed is not None else speed
        self.expert_lane = None
        self.expert_cache: tuple[int, dict] | None = None
        self.yield_at = None  # roundabout: (entry lanes, conflict point, ring lanes) the expert yields at

    def act(self, action=None) -> None:
        """Meta mode: highway-env's lane and speed controllers track the last meta-action's targets; continuous mode:
        apply the command as is."""
        if self.mode == "meta":
            ControlledVehicle.act(self)  # the lane and speed controllers track the meta-action's targets
        else:
            self.target_lane_index, self.target_speed = self.lane_index, self.speed  # announce no lane change
            Vehicle.act(self, dict(self.command))

    def set_meta(self, name: str) -> None:
        """Switch to meta-action control and apply ``name`` (a META_ACTIONS entry; "IDLE" keeps the targets), target
        speed clipped to [0, MAX_SPEED]."""
        if self.mode != "meta":
            self.target_lane_index, self.target_speed = self.lane_index, self.speed
        self.mode = "meta"
        ControlledVehicle.act(self, None if name == "IDLE" else name)
        self.target_speed = float(np.clip(self.target_speed, 0.0, self.MAX_SPEED))

    def set_continuous(self, acceleration: float, steering_hw: float) -> None:
        """Switch to direct control: ``acceleration`` [m/s²] and ``steering_hw`` [rad] in highway-env's sign (right
        positive)."""
        self.mode = "continuous"
        self.command = {"acceleration": float(acceleration), "steering": float(steering_hw)}

    def expert_command(self, frame: int) -> dict:
        """IDM acceleration and MOBIL lane choice with steering toward the chosen lane (highway-env
        signs); computed once per ``frame`` and cached."""
        if self.expert_cache is not None and self.expert_cache[0] == frame:
            return dict(self.expert_cache[1])
        lane, here = self.expert_lane, self.lane_index
        same = lane is not None and lane[:2] == here[:2] and abs(lane[2] - here[2]) <= 1
        adjacent = lane is not None and lane[:2] != here[:2] and bool({*lane[:2]} & {*here[:2]})  # at a junction
        if not (same or adjacent):
            lane = here  # first call, or the ego was driven elsewhere: plan from where it is
        saved = (self.target_lane_index, self.target_speed, self.action, self.crashed)
        self.target_lane_index, self.target_speed, self.crashed = lane, self.expert_speed, False
        IDMVehicle.act(self)
        command = {"acceleration": float(self.action["acceleration"]), "steering": float(self.action["steering"])}
        if self.yield_at is not None:
            command["acceleration"] = min(command["acceleration"], yield_acceleration(self))
        self.expert_lane = self.target_lane_index
        self.target_lane_index, self.target_speed, self.action, self.crashed = saved
        self.expert_cache = (frame, command)
        return dict(command)


def yield_acceleration(v) -> float:
    """Give way at a roundabout entry: IDM toward a standing virtual car at the conflict point while a
    ring vehicle would reach it within 3 s; inf (no constraint) elsewhere. ``v.yield_at``:
    (entry segments, conflict point, ring segments)."""
    entry_lanes, point, ring = v.yield_at
    if v.lane_index[:2] not in entry_lanes or float(np.linalg.norm(point - v.position)) > 40.0:
        return float("inf")
    for other in v.road.vehicles:
        if other is v or other.lane_index[:2] not in ring:
            continue
        to_point = point - other.position
        if float(np.linalg.norm(to_point)) < 6.0 + 3.0 * other.speed and float(to_point @ other.direction) > -2.0:
            return float(v.acceleration(v, _Standing(point), None))
    return float("inf")


class RoundaboutIDM(IDMVehicle):
    """highway-env's IDM that also gives way at the roundabout entry it approaches (traffic in our roundabout)."""

    yield_at = None

    def act(self, action=None) -> None:
        """IDM/MOBIL, with the acceleration capped so the vehicle yields at the roundabout entry ``yield_at``."""
        super().act(action)
        if self.yield_at is not None and not self.crashed:
            self.action["acceleration"] = min(self.action["acceleration"], yield_acceleration(self))


class _Standing:
    """A virtual standing car at ``position`` (for IDM's gap), never on the road."""

    LENGTH = 0.0

    def __init__(self, position):
        self.position, self.speed = np.asarray(position, dtype=np.float64), 0.0
        self.velocity = np.zeros(2)


class ScriptedVehicle(Vehicle):
    """Replays a road-frame Trajectory kinematically (its own clock; collisions flag it but do not push it)."""

    def __init__(self, road, trajectory: Trajectory, frame: Frame2D, name: str, t: float):
        self.trajectory, self.frame, self.t = trajectory, frame, t
        x, y, h, v = self._pose(t)
        super().__init__(road, [x, y], h, v)
        self.name, self.kind, self.color = name, "scripted", SCRIPTED_COLOR

    def _pose(self, t: float):
        x, y, h, v = self.trajectory.at(t)
        hx, hy, hh = road_to_highway(x, y, h, self.frame)
        return float(hx), float(hy), float(hh), v

    def act(self, action=None) -> None:
        pass

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds along the trajectory (replayed, not integrated)."""
        self.t += dt
        x, y, self.heading, self.speed = self._pose(self.t)
        self.position = np.array([x, y])
        self.impact = None
        self.on_state_update()


class BehaviorVehicle(IDMVehicle):
    """An actor driven by a behavior model: the Command sets its lane and speed targets, highway-env's
    IDM and lane controller do the rest; a commanded acceleration overrides IDM."""

    def __init__(self, road, position, heading, speed, behavior, name: str, ego: EgoVehicle, frame: Frame2D, dt: float):
        super().__init__(road, position, heading, speed, target_speed=speed, enable_lane_change=False)
        self.behavior, self.ego, self.frame, self.dt, self.t = behavior, ego, frame, dt, 0.0
        self.name, self.kind, self.color = name, "behavior", BEHAVIOR_COLOR

    def act(self, action=None) -> None:
        """Ask the behavior for a command given this vehicle's and the ego's road-frame states; crashed vehicles stay
        put."""
        if self.crashed:
            return
        _from, _to, _ = self.lane_index
        lanes = len(self.road.network.graph[_from][_to])
        ctx = ActorContext(
            self.t,
            self.dt,
            _state(self, self.frame),
            _state(self.ego, self.frame),
            lanes,
            float(self.lane_distance_to(self.ego)),
        )
        cmd = self.behavior(ctx)
        self.target_lane_index = (_from, _to, max(0, min(int(cmd.lane), lanes - 1)))
        if cmd.speed is not None:
            self.target_speed = float(cmd.speed)
        IDMVehicle.act(self)
        if cmd.acceleration is not None:
            self.action["acceleration"] = float(cmd.acceleration)

    def step(self, dt: float) -> None:
        self.t += dt
        super().step(dt)


def _state(v: Vehicle, frame: Frame2D) -> ActorState:
    x, y, h = highway_to_road(v.position[0], v.position[1], v.heading, frame)
    on = v.lane is not None and v.lane.on_lane(v.position)
    return ActorState(
        getattr(v, "name", "vehicle"),
        getattr(v, "kind", "traffic"),
        float(x),
        float(y),
        float(h),
        float(v.speed),
        int(v.lane_index[2]) if on else -1,
        bool(v.crashed),
    )


TRAFFIC_MODELS = {
    "idm": IDMVehicle,
    "idm-keep-lane": IDMVehicle,
    "linear": LinearVehicle,
    "aggressive": AggressiveVehicle,
    "defensive": DefensiveVehicle,
    "constant": Vehicle,
}


# ---------------------------------------------------------------- the road


class FastRoad(Road):
    """highway-env's Road, its loops over vehicles vectorized; the results are highway-env's.

    * ``act``: on a network of straight lanes, plain IDM vehicles decide their lanes one by one
      (MOBIL, in vehicle order: a vehicle's choice can depend on another's target lane), then their
      steering and IDM accelerations are computed for all at once (traffic.idm_act); the other
      vehicles act as usual. ``neighbour_vehicles`` (MOBIL's queries) reads the positions cached for
      the whole ``act`` (nothing moves while vehicles decide).
    * ``step``: the bicycle model and the closest-lane search for IDM traffic and the ego at once
      (traffic.kinematic_step); the exact collision check only for pairs within highway-env's own
      spherical pre-check bound that a separating axis does not already keep apart
      (traffic.may_touch; 1e-6 m margins keep borderline pairs for the exact check).
    Other roads (curved lanes, connected-lane neighbour search, recorded history) take
    highway-env's loops.
    """

    _positions = None  # (items, their LaneCoordinates): vehicles + non-landmark objects while deciding

    def act(self) -> None:
        """Every vehicle decides, with all positions cached once for ``neighbour_vehicles``."""
        items = [v for v in self.vehicles + self.objects if not isinstance(v, Landmark)]
        pos = np.array([v.position for v in items]) if items else np.zeros((0, 2))
        coords = traffic.LaneCoordinates(pos, _lane_table(self.network))
        self._positions = (items, coords)
        try:
            if not self._batched():
                for vehicle in self.vehicles:
                    vehicle.act()
                return
            rows = np.array([r for r, v in enumerate(self.vehicles) if traffic.is_plain_idm(v)], dtype=np.intp)
            past_end = dict(zip(rows.tolist(), traffic.lane_ends(self.vehicles, rows, coords)))
            for row, vehicle in enumerate(self.vehicles):  # in order: MOBIL reads others' target lanes
                if row in past_end:
                    traffic.decide_lane(vehicle, past_end[row])
                else:
                    vehicle.act()
            traffic.idm_act(self.vehicles, rows, items, coords)  # vehicles come first in items
        finally:
            self._positions = None

    def _batched(self) -> bool:
        return _lane_table(self.network).ok and not self.neighbour_vehicles_connected_lanes and not self.record_history

    def neighbour_vehicles(self, vehicle, lane_index=None):
        """highway-env's (front, rear) neighbours in ``lane_index``, vectorised over the cached positions on straight
        lanes."""
        lane_index = lane_index or vehicle.lane_index
        cache = self._positions
        if cache is None or not lane_index or self.neighbour_vehicles_connected_lanes:
            return super().neighbour_vehicles(vehicle, lane_index)
        lane = self.network.get_lane(lane_index)
        if type(lane) is not StraightLane:
            return super().neighbour_vehicles(vehicle, lane_index)
        items, coords = cache
        s = lane.local_coordinates(vehicle.position)[0]
        long, _, on = coords(lane_index, lane)
        on = on.copy()
        for i, item in enumerate(items):
            if item is vehicle:
                on[i] = False
        ahead, behind = np.flatnonzero(on & (long >= s)), np.flatnonzero(on & (long < s))
        front = rear = None
        if len(ahead):
            best = long[ahead].min()
            front = items[ahead[long[ahead] == best][-1]]  # the loop keeps the last of equals
        if len(behind):
            best = long[behind].max()
            rear = items[behind[long[behind] == best][0]]  # ... and the first of equals behind
        return front, rear

    def step(self, dt: float) -> None:
        """highway-env's road step, with collision checks only between pairs close enough to touch within ``dt``."""
        if self._batched():
            batch = [v for v in self.vehicles if traffic.batchable_step(v)]
            traffic.kinematic_step(batch, dt, _lane_table(self.network), self.network)
            for vehicle in self.vehicles:
                if not traffic.batchable_step(vehicle):
                    vehicle.step(dt)
        else:
            for vehicle in self.vehicles:
                vehicle.step(dt)
        n = len(self.vehicles)
        if n > 1:
            pos = np.array([v.position for v in self.vehicles])
            half_diag = np.array([v.diagonal for v in self.vehicles]) / 2
            speed = np.array([v.speed for v in self.vehicles])
            dist = np.hypot(pos[:, None, 0] - pos[None, :, 0], pos[:, None, 1] - pos[None, :, 1])
            near = dist <= half_diag[:, None] + half_diag[None, :] + speed[:, None] * dt + 1e-6
            i, j = np.nonzero(np.triu(near, 1))
            if len(i):
                touch = traffic.may_touch(self.vehicles, i, j, dt)
                i, j = i[touch], j[touch]
            for a, b in zip(i, j):
                self.vehicles[a].handle_collisions(self.vehicles[b], dt)
        for vehicle in self.vehicles:
            for other in self.objects:
                vehicle.handle_collisions(other, dt)


_LANE_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _lane_table(network) -> traffic.LaneTable:
    """The network's lanes as arrays, built once per network (lane geometry never changes; clones share it)."""
    table = _LANE_TABLES.get(network)
    if table is None:
        table = _LANE_TABLES[network] = traffic.LaneTable(network)
    return table


# ---------------------------------------------------------------- the world


class _World:
    """Everything that changes while stepping; deep-copied for clones (lane geometry shared)."""

    def __init__(self, road: Road, ego: EgoVehicle, pending: list[ScriptedVehicle]):
        self.road, self.ego, self.pending = road, ego, pending
        self.frame = 0  # integration steps since reset
        self.t = 0.0
        self.progress = 0.0
        self.collision = False

    def copy(self) -> _World:
        return copy.deepcopy(self, {id(self.road.network): self.road.network})


class HighwayState:
    """A snapshot from HighwaySim.clone_state (opaque; restore with restore_state)."""

    def __init__(self, world: _World, scenario_name: str):
        self._world, self.scenario_name = world, scenario_name
        self.t = world.t


class _Stub:
    """Just what highway-env's road builders read from their env (config, np_random)."""

    def __init__(self, rng):
        self.config = {"show_trajectories": False, "neighbour_vehicles_connected_lanes": True}
        self.np_random = rng
        self.road = None


class HighwaySim:
    """A Scenario in highway-env. See the DrivingSim protocol (base.py) for the API."""

    name = "highway"
    exact_clone = True

    def __init__(self, scenario: Scenario):
        s = scenario.settings
        if s.policy_frequency <= 0 or s.simulation_frequency % s.policy_frequency:
            raise DrivingError(
                f"scenario {scenario.name!r}: simulation_frequency ({s.simulation_frequency}) must be "
                f"a positive multiple of policy_frequency ({s.policy_frequency})"
            )
        self.scenario = copy.deepcopy(scenario)
        self.dt = 1.0 / s.policy_frequency
        self.frames_per_step = s.simulation_frequency // s.policy_frequency
        self.frame_dt = 1.0 / s.simulation_frequency
        self._surfaces: dict = {}
        self.world: _World | None = None
        self.frame = Frame2D()
        self.reset()

    # ------------------------------------------------------------ building

    def reset(self, seed: int | None = None) -> Observation:
        """Build the road and traffic afresh from ``seed`` (default the scenario's); scripted actors appear at their
        start times."""
        sc = self.scenario
        rng = np.random.default_rng(sc.settings.seed if seed is None else seed)
        road, ego = self._build_road(rng)
        pending = []
        for name, tr in sc.scripted.items():
            pending.append(ScriptedVehicle(road, tr, self.frame, name, max(0.0, tr.start)))
        pending.sort(key=lambda v: v.trajectory.start)
        self.world = _World(road, ego, pending)
        self._activate()
        return self.observe()

    def _build_road(self, rng) -> tuple[Road, EgoVehicle]:
        sc = self.scenario
        kind = sc.road.kind
        if kind == "highway":
            if not 0 <= sc.ego.lane < sc.road.lanes:
                raise DrivingError(f"scenario {sc.name!r}: ego lane {sc.ego.lane} outside 0..{sc.road.lanes - 1}")
            net = RoadNetwork.straight_road_network(
                sc.road.lanes, length=sc.road.length, speed_limit=sc.road.speed_limit
            )
            road = FastRoad(network=net, np_random=rng, record_history=False)
            start = ("0", "1")
        elif kind in ("merge", "roundabout"):
            from highway_env.envs.merge_env import MergeEnv
            from highway_env.envs.roundabout_env import RoundaboutEnv

            stub = _Stub(rng)
            (MergeEnv if kind == "merge" else RoundaboutEnv)._make_road(stub)  # their road builders, unchanged
            road = stub.road
            road.__class__ = FastRoad  # same object, with the vectorized collision pre-check
            start = ("a", "b") if kind == "merge" else ("ser", "ses")
            lanes = len(road.network.graph[start[0]][start[1]])
            if not 0 <= sc.ego.lane < lanes:
                raise DrivingError(
                    f"scenario {sc.name!r}: ego lane {sc.ego.lane} outside 0..{lanes - 1} on the {kind} road's start"
                )
        else:
            raise DrivingError(f"scenario {sc.name!r}: unknown road kind {kind!r}; valid: highway, merge, roundabout")
        lane0 = road.network.get_lane((*start, 0))
        p0 = lane0.position(0.0, 0.0)
        self.frame = highway_frame(p0[0], p0[1], lane0.heading_at(0.0))
        lane = road.network.get_lane((*start, sc.ego.lane))
        ego = EgoVehicle(
            road,
            lane.position(sc.ego.x, 0.0),
            lane.heading_at(sc.ego.x),
            sc.ego.speed,
            target_speed=sc.ego.target_speed,
        )
        ego.enable_lane_change = sc.ego.lane_change
        if kind == "roundabout":
            ego.plan_route_to(sc.ego.destination or "nxs")
            ego.yield_at = _entry_yield(road, "s")
        road.vehicles.append(ego)
        for spec in sc.actors:
            n = len(road.network.graph[start[0]][start[1]])
            if not 0 <= spec.lane < n:
                raise DrivingError(f"scenario {sc.name!r}: actor {spec.name!r} lane {spec.lane} outside 0..{n - 1}")
            al = road.network.get_lane((*start, spec.lane))
            x = sc.ego.x + spec.dx
            v = BehaviorVehicle(
                road,
                al.position(x, 0.0),
                al.heading_at(x),
                spec.speed,
                make_behavior(spec.behavior, spec.params),
                spec.name,
                ego,
                self.frame,
                self.frame_dt,
            )
            road.vehicles.append(v)
        if kind == "highway":
            self._highway_traffic(road, rng, start, range(sc.road.lanes), 0.0, sc.road.length)
        elif kind == "merge":
            self._highway_traffic(road, rng, start, range(2), 5.0, 220.0)
            self._ramp_traffic(road, rng)
        else:
            self._roundabout_traffic(road, rng)
        return road, ego

    def _new_traffic(self, road, lane_index, x, speed, rng, count: int, roundabout: bool = False):
        tr = self.scenario.traffic
        lane = road.network.get_lane(lane_index)
        cls = RoundaboutIDM if roundabout and tr.model in ("idm", "idm-keep-lane") else TRAFFIC_MODELS[tr.model]
        v = cls(road, lane.position(x, 0.0), lane.heading_at(x), speed)
        if isinstance(v, IDMVehicle):
            v.target_speed = speed
            v.enable_lane_change = tr.model != "idm-keep-lane" and not roundabout  # ring lane changes crash
            v.randomize_behavior()
        v.name, v.kind = f"traffic_{count}", "traffic"
        v.check_collisions = tr.collisions
        return v

    def _highway_traffic(self, road, rng, start, lanes, x_min, x_max) -> None:
        keep_clear = [(int(v.lane_index[2]), float(v.lane.local_coordinates(v.position)[0])) for v in road.vehicles]
        slots = traffic_slots(rng, self.scenario.traffic, self.scenario.ego.x, list(lanes), x_min, x_max, keep_clear)
        for k, (lane, x, speed) in enumerate(slots):
            road.vehicles.append(self._new_traffic(road, (*start, lane), x, speed, rng, k))

    def _ramp_traffic(self, road, rng) -> None:
        tr = self.scenario.traffic
        xs = []
        for _ in range(tr.merging):
            for _ in range(50):
                x = float(rng.uniform(20.0, 140.0))
                if all(abs(x - o) > 20.0 for o in xs):
                    xs.append(x)
                    break
        for k, x in enumerate(sorted(xs)):
            v = self._new_traffic(road, ("j", "k", 0), x, float(rng.uniform(18.0, 22.0)), rng, 1000 + k)
            if isinstance(v, ControlledVehicle):
                v.target_speed = 28.0
            v.name = f"merging_{k}"
            road.vehicles.append(v)

    def _roundabout_traffic(self, road, rng) -> None:
        tr = self.scenario.traffic
        lo, hi = tr.speed_range
        placed = []
        for _ in range(50 * tr.vehicles):
            if len(placed) >= tr.vehicles:
                break
            seg = RING[int(rng.integers(len(RING)))]
            lane_index = (*seg, int(rng.integers(2)))
            lane = road.network.get_lane(lane_index)
            s = float(rng.uniform(0.0, lane.length))
            p = lane.position(s, 0.0)
            if any(np.linalg.norm(p - q) < 14.0 for q in placed) or np.linalg.norm(p - road.vehicles[0].position) < 30:
                continue
            v = self._new_traffic(road, lane_index, s, float(rng.uniform(lo, hi)), rng, len(placed), roundabout=True)
            if isinstance(v, ControlledVehicle):
                v.plan_route_to(str(rng.choice(ROUNDABOUT_EXITS)))
            road.vehicles.append(v)
            placed.append(p)
        for k in range(tr.merging):
            side = "enw"[k % 3]
            v = self._new_traffic(
                road,
                (f"{side}er", f"{side}es", 0),
                float(rng.uniform(20.0, 60.0)),
                float(rng.uniform(lo, hi)),
                rng,
                1000 + k,
                roundabout=True,
            )
            if isinstance(v, RoundaboutIDM):
                v.yield_at = _entry_yield(road, side)
            if isinstance(v, ControlledVehicle):
                v.plan_route_to(str(rng.choice(ROUNDABOUT_EXITS)))
            v.name = f"entering_{k}"
            road.vehicles.append(v)

    # ------------------------------------------------------------ stepping

    def step(self, action) -> StepResult:
        """Apply ``action`` (a meta-action, or continuous (acceleration, steering) road frame, left positive) for one
        control period."""
        w = self.world
        kind, value = parse_action(action)
        if kind == "meta":
            w.ego.set_meta(value)
        else:
            w.ego.set_continuous(value[0], -value[1])  # road steering (left +) → highway-env (right +)
        for _ in range(self.frames_per_step):
            self._integrate()
        return self._result()

    def _activate(self) -> None:
        """Scripted actors whose first waypoint time has come join the road."""
        w = self.world
        while w.pending and w.pending[0].trajectory.start <= w.t + 1e-9:
            v = w.pending.pop(0)
            v.t = w.t
            v.step(0.0)
            w.road.vehicles.append(v)

    def _integrate(self) -> None:
        w = self.world
        w.road.act()
        w.road.step(self.frame_dt)
        w.frame += 1
        w.t = w.frame * self.frame_dt
        ego = w.ego
        s = ego.lane.local_coordinates(ego.position)[0]
        w.progress += ego.speed * math.cos(ego.heading - ego.lane.heading_at(s)) * self.frame_dt
        w.collision = w.collision or bool(ego.crashed)
        self._activate()

    def _result(self) -> StepResult:
        m = self.metrics()
        reason = ""
        if m.collision and self.scenario.settings.terminate_on_collision:
            reason = "collision"
        elif self._end_of_road():
            reason = "end_of_road"
        elif self.world.t >= self.scenario.settings.duration_s - 1e-9:
            reason = "time"
        return StepResult(self.observe(), m, bool(reason), reason, {"lane": int(self.world.ego.lane_index[2])})

    def _end_of_road(self) -> bool:
        ego = self.world.ego
        _from, _to, _ = ego.lane_index
        if _to in self.world.road.network.graph:
            return False
        return ego.lane.local_coordinates(ego.position)[0] > ego.lane.length - ego.LENGTH

    # ------------------------------------------------------------ reading

    def _lead(self):
        ego = self.world.ego
        front, _ = self.world.road.neighbour_vehicles(ego, ego.lane_index)
        return front

    def metrics(self) -> StepMetrics:
        w = self.world
        ego = w.ego
        front = self._lead()
        ttc, gap = float("inf"), float("inf")
        if front is not None:
            s = ego.lane.local_coordinates(ego.position)[0]
            d = ego.lane.heading_at(s)
            u = np.array([math.cos(d), math.sin(d)])
            gap = float(ego.lane_distance_to(front)) - 0.5 * (ego.LENGTH + front.LENGTH)
            ttc = time_to_collision(gap, float(ego.velocity @ u), float(front.velocity @ u))
        return StepMetrics(w.t, w.collision, not ego.lane.on_lane(ego.position), w.progress, ttc, gap, float(ego.speed))

    def actors(self) -> list[ActorState]:
        """Every vehicle, the ego first, in the road frame."""
        w = self.world
        return [_state(w.ego, self.frame)] + [_state(v, self.frame) for v in w.road.vehicles if v is not w.ego]

    def observe(self, image: bool = False) -> Observation:
        w, st = self.world, self.scenario.settings
        ego = w.ego
        x, y, h = highway_to_road(ego.position[0], ego.position[1], ego.heading, self.frame)
        long, lat = ego.lane.local_coordinates(ego.position)
        lane_h = ego.lane.heading_at(long)
        ego_row = np.array([x, y, h, ego.speed, -lat, -float(wrap_angle(ego.heading - lane_h))], dtype=np.float64)
        others = [v for v in w.road.vehicles if v is not ego] + [o for o in w.road.objects if isinstance(o, Obstacle)]
        if others:
            pos = np.array([o.position for o in others])
            ox, oy, oh = highway_to_road(pos[:, 0], pos[:, 1], np.array([o.heading for o in others]), self.frame)
            states = np.stack([ox, oy, oh, np.array([o.speed for o in others], dtype=np.float64)], axis=1)
        else:
            states = np.zeros((0, 4))
        ego_v = np.array([ego.speed * math.cos(h), ego.speed * math.sin(h)])
        block = nearest_others(ego_row[:2], ego_v, states, st.obs_vehicles, st.perception_m)
        img = self.render(tuple(st.image_size), st.image_scale) if image else None
        return Observation(ego_row, block, w.t, img)

    def expert_action(self) -> np.ndarray:
        """highway-env's IDM (longitudinal) and MOBIL (lane choice) for the ego, as [acc, steering] (road frame)."""
        c = self.world.ego.expert_command(self.world.frame)
        return np.array([np.clip(c["acceleration"], -ACCEL_MAX, ACCEL_MAX), -c["steering"]])

    # ------------------------------------------------------------ cloning

    def clone_state(self) -> HighwayState:
        """An exact snapshot (a deep copy of the world, sharing the static road network)."""
        return HighwayState(self.world.copy(), self.scenario.name)

    def restore_state(self, state: HighwayState) -> None:
        """Continue from ``state`` (restorable many times); raises DrivingError for another scenario's snapshot."""
        if not isinstance(state, HighwayState) or state.scenario_name != self.scenario.name:
            raise DrivingError(f"restore_state needs a snapshot of scenario {self.scenario.name!r} from HighwaySim")
        self.world = state._world.copy()

    # ------------------------------------------------------------ rendering

    def render(self, size: tuple[int, int] | None = None, scale: float | None = None) -> np.ndarray:
        import pygame
        from highway_env.road.graphics import RoadGraphics, WorldSurface

        st = self.scenario.settings
        size = tuple(int(v) for v in (size or st.video_size))
        scale = float(scale or st.video_scale)
        surf = self._surfaces.get(size)
        if surf is None:
            surf = self._surfaces[size] = WorldSurface(size, 0, pygame.Surface(size))
        surf.scaling, surf.centering_position = scale, [0.5, 0.5]
        surf.move_display_window_to(self.world.ego.position)
        RoadGraphics.display(self.world.road, surf)
        RoadGraphics.display_road_objects(self.world.road, surf, offscreen=True)
        RoadGraphics.display_traffic(
            self.world.road, surf, simulation_frequency=st.simulation_frequency, offscreen=True
        )
        return np.ascontiguousarray(np.moveaxis(pygame.surfarray.array3d(surf), 0, 1))

    def close(self) -> None:
        self._surfaces.clear()


def lane_center_y(lane: int, width: float = StraightLane.DEFAULT_WIDTH) -> float:
    """Road-frame y of lane ``lane``'s centre on a straight highway scenario (lane 0 = leftmost, y = 0)."""
    return -lane * width


__all__ = ["HighwaySim", "HighwayState", "META_ACTIONS", "lane_center_y"]
