"""The CARLA backend: a client of a CARLA server the user runs (``./CarlaUE4.sh -RenderOffScreen``).

Real code against the carla client API (0.9.x): ``carla.Client(host, port)``, ``set_timeout``,
``get_world`` (or ``load_world(town)``), synchronous mode with a fixed step, actors spawned from
the blueprint library, ``apply_control`` on the ego, ``world.tick()`` per integration step. An
unreachable server fails within ``timeout_s`` with SimulatorUnavailable naming host:port.

How a Scenario maps onto a CARLA map (highway road kind only; merge and roundabout are
highway-env road geometries):
  * the road frame: spawn point ``spawn_index`` of the map picks the road; its leftmost driving
    lane in the same direction is lane 0; the road frame's origin lies on that lane's centre
    ``ego.x`` m behind the spawn point, x along the lane (frames.carla_frame; CARLA is
    left-handed with yaw in degrees — frames.carla_to_road converts). Road-frame coordinates
    assume the road is straight near the ego (Town04/Town06 highways are); spawning follows
    the real lanes through map waypoints;
  * the ego is a physics vehicle: continuous [acc, steering] become VehicleControl (throttle =
    acc / throttle_accel, brake = -acc / brake_decel, steer = -steering / the wheels' max steer
    angle); meta-actions become lane/speed targets held by control.lane_keep_action;
  * background traffic runs on CARLA's Traffic Manager (its own car-following and lane changes,
    whatever ``traffic.model`` says; ``idm-keep-lane`` turns its lane changes off; ``constant``
    drives kinematically at constant speed);
  * behavior and scripted actors are kinematic (physics off, ``set_transform`` every tick),
    moved by the same behavior models and bicycle model as in highway-env;
  * metrics: collisions from a collision sensor on the ego, off-road from map.get_waypoint
    (project_to_road=False), progress along the lane direction, TTC in the road frame;
  * images: a bird's-eye RGB camera attached above the ego (world-aligned is not possible with
    an attached sensor: it turns with the ego);
  * clone_state/restore_state: approximate — actor poses, velocities and our own state are
    restored, the physics engine's internal state is not (``exact_clone = False``);
  * the expert: IDM on the vehicle ahead in the ego's lane plus lane keeping (no MOBIL lane
    changes: those come from highway-env's model, which CARLA lacks).
"""

from __future__ import annotations

import copy
import math
import queue
import time
from dataclasses import dataclass

import numpy as np

from embody.extras import MissingExtra

from .base import (
    ACCEL_MAX,
    ActorState,
    DrivingError,
    Observation,
    SimulatorUnavailable,
    StepMetrics,
    StepResult,
    UnsupportedFeature,
    nearest_others,
    parse_action,
    time_to_collision,
)
from .behaviors import ActorContext, idm_acceleration, make_behavior
from .control import bicycle_step, lane_keep_action
from .frames import Frame2D, carla_to_road, carla_vector_to_road, road_steering_to_carla, road_to_carla, wrap_angle
from .scenario import Scenario, traffic_slots


@dataclass
class CarlaConfig:
    """How to reach a running CARLA server and drive its ego vehicle (server, map, spawn point, throttle/brake maps)."""

    host: str = "127.0.0.1"
    port: int = 2000
    timeout_s: float = 10.0  # client timeout: connecting, and every blocking call
    town: str = ""  # "" keeps the server's current map; e.g. Town04 (highway loop)
    spawn_index: int = 0  # the map spawn point whose road the scenario uses
    tm_port: int = 8000  # Traffic Manager port
    vehicle: str = "vehicle.tesla.model3"
    throttle_accel: float = 4.0  # [m/s²] at full throttle (the acceleration → throttle map)
    brake_decel: float = 8.0  # [m/s²] at full brake
    camera_height: float = 40.0  # [m] fallback; render() sets it from the scale


def import_carla():
    """The ``carla`` module; raises MissingExtra naming the extra to install when it is absent."""
    try:
        import carla
    except ImportError as e:
        raise MissingExtra(
            "the CARLA client is not installed: pip install 'embody[carla]', or carla==<your "
            f"server's version> (e.g. 0.9.16) ({e})"
        ) from e
    return carla


class _Kinematic:
    """A kinematic actor (behavior or scripted): road-frame state driven by our models."""

    def __init__(self, name: str, kind: str, state: np.ndarray, behavior=None, trajectory=None):
        self.name, self.kind, self.state = name, kind, np.asarray(state, dtype=np.float64)
        self.behavior, self.trajectory = behavior, trajectory
        self.actor = None  # the carla actor, once spawned


class CarlaState:
    """A snapshot from CarlaSim.clone_state (approximate: poses, velocities, our state)."""

    def __init__(self, poses: dict, python_state: dict, t: float):
        self.poses, self.python_state, self.t = poses, python_state, t


class CarlaSim:
    """A Scenario in a running CARLA server. See the DrivingSim protocol (base.py) and this module's docstring."""

    name = "carla"
    exact_clone = False

    def __init__(self, scenario: Scenario, config: CarlaConfig | None = None, carla_module=None):
        self.scenario = copy.deepcopy(scenario)
        self.config = config or CarlaConfig()
        if scenario.road.kind != "highway":
            raise UnsupportedFeature(
                f"scenario {scenario.name!r}: the CARLA backend plays highway-kind scenarios on "
                f"the map's road at spawn point {self.config.spawn_index}; "
                f"{scenario.road.kind!r} roads exist in highway-env only (--sim highway)"
            )
        s = scenario.settings
        if s.policy_frequency <= 0 or s.simulation_frequency % s.policy_frequency:
            raise DrivingError(
                f"scenario {scenario.name!r}: simulation_frequency must be a multiple of policy_frequency"
            )
        self.carla = carla_module or import_carla()
        self.dt = 1.0 / s.policy_frequency
        self.frames_per_step = s.simulation_frequency // s.policy_frequency
        self.frame_dt = 1.0 / s.simulation_frequency
        self._actors: list = []  # every carla actor we spawned (destroyed on reset/close)
        self._cameras: dict = {}
        self._connect()
        self.reset()

    # ------------------------------------------------------------ connection

    def _connect(self) -> None:
        c, cfg = self.carla, self.config
        where = f"{cfg.host}:{cfg.port}"
        start = time.monotonic()
        try:
            self.client = c.Client(cfg.host, int(cfg.port))
            self.client.set_timeout(float(cfg.timeout_s))
            self.world = self.client.load_world(cfg.town) if cfg.town else self.client.get_world()
        except RuntimeError as e:
            raise SimulatorUnavailable(
                f"no CARLA server answered at {where} within {cfg.timeout_s:g} s "
                f"(waited {time.monotonic() - start:.1f} s): start one (./CarlaUE4.sh -RenderOffScreen) or point "
                f"--carla-host/--carla-port at it; carla said: {e}"
            ) from None
        try:
            server, client = self.client.get_server_version(), self.client.get_client_version()
            if server != client:
                import warnings

                warnings.warn(
                    f"CARLA client {client} and server {server} differ; install carla=={server}", stacklevel=2
                )
        except RuntimeError:
            pass
        self.map = self.world.get_map()
        self._original_settings = self.world.get_settings()
        settings = self.world.get_settings()
        settings.synchronous_mode = True
        settings.fixed_delta_seconds = self.frame_dt
        self.world.apply_settings(settings)
        self.tm = self.client.get_trafficmanager(int(cfg.tm_port))
        self.tm.set_synchronous_mode(True)

    # ------------------------------------------------------------ building

    def _lanes_at_spawn(self):
        """Waypoints of the driving lanes across the road at the spawn point, leftmost first, and the ego's index."""
        c = self.carla
        points = self.map.get_spawn_points()
        if not 0 <= self.config.spawn_index < len(points):
            raise DrivingError(f"spawn_index {self.config.spawn_index} outside 0..{len(points) - 1} on {self.map.name}")
        wp = self.map.get_waypoint(
            points[self.config.spawn_index].location, project_to_road=True, lane_type=c.LaneType.Driving
        )
        same = lambda a, b: a is not None and a.lane_type == c.LaneType.Driving and (a.lane_id > 0) == (b.lane_id > 0)
        left = wp
        while same(left.get_left_lane(), wp):
            left = left.get_left_lane()
        lanes = [left]
        while same(lanes[-1].get_right_lane(), wp):
            lanes.append(lanes[-1].get_right_lane())
        return lanes

    def _waypoint(self, lane: int, dx: float):
        """The map waypoint ``dx`` m along lane ``lane`` from the spawn point (negative: behind)."""
        base = self._lanes[lane]
        if abs(dx) < 1e-3:
            return base
        nxt = base.next(dx) if dx > 0 else base.previous(-dx)
        if not nxt:
            raise DrivingError(f"the road at spawn point {self.config.spawn_index} ends within {abs(dx):.0f} m")
        return nxt[0]

    def reset(self, seed: int | None = None) -> Observation:
        """Destroy every actor and spawn the scenario afresh on the road at the map spawn point ``spawn_index``, traffic
        drawn from ``seed`` (default the scenario's). Raises DrivingError if the ego's lane is not on that road."""
        c, sc = self.carla, self.scenario
        self._destroy_all()
        rng = np.random.default_rng(sc.settings.seed if seed is None else seed)
        self._lanes = self._lanes_at_spawn()
        if not 0 <= sc.ego.lane < len(self._lanes):
            raise DrivingError(
                f"scenario {sc.name!r}: ego lane {sc.ego.lane} outside 0..{len(self._lanes) - 1} "
                f"(the road at spawn point {self.config.spawn_index} has {len(self._lanes)} lanes)"
            )
        ref = self._lanes[0].transform
        h = -math.radians(ref.rotation.yaw)  # right-handed heading of the lane
        ox, oy = ref.location.x - sc.ego.x * math.cos(h), -ref.location.y - sc.ego.x * math.sin(h)
        self.frame = Frame2D(ox, oy, h)
        self.lane_width = float(self._lanes[0].lane_width)
        lib = self.world.get_blueprint_library()
        bp = lib.find(self.config.vehicle)
        if bp.has_attribute("role_name"):
            bp.set_attribute("role_name", "hero")
        self.ego = self._spawn(bp, self._waypoint(sc.ego.lane, 0.0).transform, sc.ego.speed)
        self._collided = []
        sensor = self.world.spawn_actor(lib.find("sensor.other.collision"), c.Transform(), attach_to=self.ego)
        sensor.listen(lambda event: self._collided.append(getattr(event.other_actor, "id", -1)))
        self._actors.append(sensor)
        self._cameras.clear()
        self._kinematic: list[_Kinematic] = []
        for spec in sc.actors:
            if not 0 <= spec.lane < len(self._lanes):
                raise DrivingError(
                    f"scenario {sc.name!r}: actor {spec.name!r} lane {spec.lane} outside 0..{len(self._lanes) - 1}"
                )
            start = np.array([sc.ego.x + spec.dx, self.lane_y(spec.lane), 0.0, spec.speed])
            k = _Kinematic(spec.name, "behavior", start, behavior=make_behavior(spec.behavior, spec.params))
            self._spawn_kinematic(k, lib)
        self._pending = []
        for name, tr in sc.scripted.items():
            k = _Kinematic(name, "scripted", np.array(tr.at(0.0)), trajectory=tr)
            (self._spawn_kinematic(k, lib) if tr.start <= 0.0 else self._pending.append(k))
        self._pending.sort(key=lambda k: k.trajectory.start)
        keep_clear = [(sc.ego.lane, sc.ego.x)] + [(s.lane, sc.ego.x + s.dx) for s in sc.actors]
        self._traffic = []
        slots = traffic_slots(rng, sc.traffic, sc.ego.x, list(range(len(self._lanes))), -1e9, 1e9, keep_clear)
        vehicles = [
            b
            for b in lib.filter("vehicle.*")
            if not b.has_attribute("number_of_wheels") or int(b.get_attribute("number_of_wheels")) == 4
        ] or [bp]
        self.tm.set_random_device_seed(int(rng.integers(1 << 30)))
        for lane, x, speed in slots:
            tbp = vehicles[int(rng.integers(len(vehicles)))]
            if sc.traffic.model == "constant":
                k = _Kinematic(
                    f"traffic_{len(self._traffic)}",
                    "traffic",
                    np.array([x, self.lane_y(lane), 0.0, speed]),
                    behavior=make_behavior("lane-follow", {"speed": speed, "lane": lane}),
                )
                self._spawn_kinematic(k, lib, tbp, idm=False)
                self._traffic.append(k.actor)
                continue
            v = self._spawn(tbp, self._waypoint(lane, x - sc.ego.x).transform, speed)
            v.set_autopilot(True, self.tm.get_port())
            self.tm.set_desired_speed(v, speed * 3.6)
            self.tm.auto_lane_change(v, sc.traffic.model != "idm-keep-lane")
            self._traffic.append(v)
        physics = self.ego.get_physics_control()
        wheels = getattr(physics, "wheels", None)
        self.max_steer = math.radians(wheels[0].max_steer_angle) if wheels else math.radians(70.0)
        self.t, self.progress, self.tick_count, self._ticks = 0.0, 0.0, 0, 0
        self._command = np.zeros(2)
        self._meta = None  # (lane, speed) while driving on meta-actions
        self._expert_lane = None
        self.world.tick()  # the spawned actors appear; the clock starts at 0
        return self.observe()

    def _spawn(self, bp, transform, speed: float):
        c = self.carla
        transform = c.Transform(
            c.Location(transform.location.x, transform.location.y, transform.location.z + 0.3), transform.rotation
        )
        actor = self.world.try_spawn_actor(bp, transform)
        if actor is None:
            raise DrivingError(
                f"CARLA refused to spawn {bp.id} at ({transform.location.x:.1f}, "
                f"{transform.location.y:.1f}): the place is taken or off the map"
            )
        self._actors.append(actor)
        yaw = math.radians(transform.rotation.yaw)
        actor.set_target_velocity(c.Vector3D(speed * math.cos(yaw), speed * math.sin(yaw), 0.0))
        return actor

    def _spawn_kinematic(self, k: _Kinematic, lib, bp=None, idm: bool = True) -> None:
        bp = bp or lib.find(self.config.vehicle)
        k.actor = self._spawn(bp, self._carla_transform(k.state), float(k.state[3]))
        k.actor.set_simulate_physics(False)
        self._kinematic.append(k)

    def _carla_transform(self, state: np.ndarray):
        c = self.carla
        x, y, yaw = road_to_carla(state[0], state[1], state[2], self.frame)
        wp = self.map.get_waypoint(c.Location(float(x), float(y), 0.0), project_to_road=True)
        z = wp.transform.location.z if wp is not None else 0.0
        return c.Transform(c.Location(float(x), float(y), float(z) + 0.05), c.Rotation(0.0, float(yaw), 0.0))

    def lane_y(self, lane: int) -> float:
        """Road-frame y of lane ``lane``'s centre (straight-road approximation)."""
        return -lane * self.lane_width

    def lane_of(self, y: float) -> int:
        """The lane index at road-frame lateral position ``y`` [m] (lane 0 at y = 0, lanes to the right at negative y);
        -1 off the road."""
        k = int(round(-y / self.lane_width))
        return k if 0 <= k < len(self._lanes) else -1

    # ------------------------------------------------------------ state reading

    def _road_state(self, actor) -> np.ndarray:
        tr, vel = actor.get_transform(), actor.get_velocity()
        x, y, h = carla_to_road(tr.location.x, tr.location.y, tr.rotation.yaw, self.frame)
        vx, vy = carla_vector_to_road(vel.x, vel.y, self.frame)
        return np.array([float(x), float(y), float(h), math.hypot(float(vx), float(vy))])

    def _all_states(self) -> list[tuple[str, str, np.ndarray, object]]:
        out = [("ego", "ego", self._road_state(self.ego), self.ego)]
        kin_actors = {id(k.actor) for k in self._kinematic}
        out += [(k.name, k.kind, k.state.copy(), k.actor) for k in self._kinematic]
        out += [
            (f"traffic_{i}", "traffic", self._road_state(v), v)
            for i, v in enumerate(self._traffic)
            if id(v) not in kin_actors
        ]
        return out

    def actors(self) -> list[ActorState]:
        crashed = bool(self._collided)
        return [
            ActorState(n, kind, *map(float, s), self.lane_of(s[1]), crashed and kind == "ego")
            for n, kind, s, _ in self._all_states()
        ]

    def _length(self, actor) -> float:
        bb = getattr(actor, "bounding_box", None)
        return 2.0 * float(bb.extent.x) if bb is not None else 5.0

    def _lead(self, ego: np.ndarray, exclude=None):
        """(gap centre to centre, lead state, lead actor) of the nearest vehicle ahead in the ego's lane."""
        lane = self.lane_of(ego[1])
        best = None
        for _, _, s, actor in self._all_states()[1:]:
            if actor is exclude or self.lane_of(s[1]) != lane or lane < 0:
                continue
            d = s[0] - ego[0]
            if d > 0 and (best is None or d < best[0]):
                best = (d, s, actor)
        return best

    def metrics(self) -> StepMetrics:
        c = self.carla
        ego = self._road_state(self.ego)
        loc = self.ego.get_transform().location
        on_road = self.map.get_waypoint(loc, project_to_road=False, lane_type=c.LaneType.Driving) is not None
        ttc, gap = float("inf"), float("inf")
        lead = self._lead(ego)
        if lead is not None:
            d, s, actor = lead
            gap = float(d - 0.5 * (self._length(self.ego) + self._length(actor)))
            ttc = float(time_to_collision(gap, ego[3] * math.cos(ego[2]), s[3] * math.cos(s[2])))
        return StepMetrics(self.t, bool(self._collided), not on_road, self.progress, ttc, gap, float(ego[3]))

    def observe(self, image: bool = False) -> Observation:
        st = self.scenario.settings
        states = self._all_states()
        ego = states[0][2]
        wp = self.map.get_waypoint(self.ego.get_transform().location, project_to_road=True)
        cx, cy, ch = carla_to_road(
            wp.transform.location.x, wp.transform.location.y, wp.transform.rotation.yaw, self.frame
        )
        lateral = -math.sin(ch) * (ego[0] - cx) + math.cos(ch) * (ego[1] - cy)
        ego_row = np.array([*ego, lateral, float(wrap_angle(ego[2] - ch))])
        others = np.array([s for _, _, s, _ in states[1:]]) if len(states) > 1 else np.zeros((0, 4))
        ego_v = np.array([ego[3] * math.cos(ego[2]), ego[3] * math.sin(ego[2])])
        block = nearest_others(ego_row[:2], ego_v, others, st.obs_vehicles, st.perception_m)
        img = self.render(tuple(st.image_size), st.image_scale) if image else None
        return Observation(ego_row, block, self.t, img)

    # ------------------------------------------------------------ stepping

    def step(self, action) -> StepResult:
        kind, value = parse_action(action)
        if kind == "meta":
            self._apply_meta(value)
        else:
            self._meta, self._command = None, value
        for _ in range(self.frames_per_step):
            command = self._meta_command() if self._meta is not None else self._command
            self._apply(command)
            self._move_kinematic()
            self._tick()
        m = self.metrics()
        reason = ""
        if m.collision and self.scenario.settings.terminate_on_collision:
            reason = "collision"
        elif self.t >= self.scenario.settings.duration_s - 1e-9:
            reason = "time"
        lane = self.lane_of(self._road_state(self.ego)[1])
        return StepResult(self.observe(), m, bool(reason), reason, {"lane": lane})

    def _apply_meta(self, name: str) -> None:
        ego = self._road_state(self.ego)
        if self._meta is None:
            self._meta = [max(self.lane_of(ego[1]), 0), float(ego[3])]
        if name == "LANE_LEFT":
            self._meta[0] = max(self._meta[0] - 1, 0)
        elif name == "LANE_RIGHT":
            self._meta[0] = min(self._meta[0] + 1, len(self._lanes) - 1)
        elif name == "FASTER":
            self._meta[1] += 5.0
        elif name == "SLOWER":
            self._meta[1] = max(self._meta[1] - 5.0, 0.0)

    def _meta_command(self) -> np.ndarray:
        return lane_keep_action(self._road_state(self.ego), self.lane_y(self._meta[0]), self._meta[1])

    def _apply(self, command: np.ndarray) -> None:
        acc, steer = float(command[0]), float(command[1])
        cfg = self.config
        throttle = float(np.clip(acc / cfg.throttle_accel, 0.0, 1.0))
        brake = float(np.clip(-acc / cfg.brake_decel, 0.0, 1.0))
        self.ego.apply_control(
            self.carla.VehicleControl(
                throttle=throttle, steer=float(road_steering_to_carla(steer, self.max_steer)), brake=brake
            )
        )

    def _move_kinematic(self) -> None:
        t_next = self.t + self.frame_dt
        lib = None
        while self._pending and self._pending[0].trajectory.start <= t_next + 1e-9:
            k = self._pending.pop(0)
            k.state = np.array(k.trajectory.at(t_next))
            lib = lib or self.world.get_blueprint_library()
            self._spawn_kinematic(k, lib)
        ego = self._road_state(self.ego)
        ego_state = ActorState("ego", "ego", *map(float, ego), self.lane_of(ego[1]))
        for k in self._kinematic:
            if k.trajectory is not None:
                k.state = np.array(k.trajectory.at(t_next))
            else:
                me = ActorState(k.name, k.kind, *map(float, k.state), self.lane_of(k.state[1]))
                if me.lane < 0:
                    me.lane = int(np.clip(round(-k.state[1] / self.lane_width), 0, len(self._lanes) - 1))
                ctx = ActorContext(self.t, self.frame_dt, me, ego_state, len(self._lanes), ego[0] - k.state[0])
                cmd = k.behavior(ctx)
                acc = cmd.acceleration
                if acc is None:
                    lead = self._lead(k.state, exclude=k.actor)
                    acc = idm_acceleration(
                        k.state[3],
                        cmd.speed or k.state[3],
                        None if lead is None else lead[0],
                        0.0 if lead is None else lead[1][3],
                    )
                    acc = float(np.clip(acc, -6.0, 6.0))
                steer = lane_keep_action(k.state, self.lane_y(int(cmd.lane)), k.state[3])[1]
                k.state = bicycle_step(k.state, acc, steer, self.frame_dt)
                k.state[3] = max(k.state[3], 0.0)
            k.actor.set_transform(self._carla_transform(k.state))

    def _tick(self) -> None:
        """One synchronous world tick: advances the clock and the progress along the lane direction."""
        before = self._road_state(self.ego)
        self.tick_count = self.world.tick()
        self._ticks += 1
        self.t = self._ticks * self.frame_dt
        after = self._road_state(self.ego)
        wp = self.map.get_waypoint(self.ego.get_transform().location, project_to_road=True)
        lane_h = carla_to_road(0.0, 0.0, wp.transform.rotation.yaw, self.frame)[2]
        d = after[:2] - before[:2]
        self.progress += float(d[0] * math.cos(lane_h) + d[1] * math.sin(lane_h))

    def expert_action(self) -> np.ndarray:
        """IDM toward the scenario's target speed behind the vehicle ahead in the ego's lane, keeping that lane."""
        ego = self._road_state(self.ego)
        lane = self.lane_of(ego[1])
        if self._expert_lane is None or lane < 0 or abs(lane - self._expert_lane) > 0:
            self._expert_lane = max(lane, 0)
        lead = self._lead(ego)
        acc = idm_acceleration(
            ego[3],
            self.scenario.ego.target_speed,
            None if lead is None else lead[0],
            0.0 if lead is None else lead[1][3],
        )
        return lane_keep_action(
            ego, self.lane_y(self._expert_lane), ego[3], acceleration=float(np.clip(acc, -ACCEL_MAX, ACCEL_MAX))
        )

    # ------------------------------------------------------------ cloning (approximate)

    def clone_state(self) -> CarlaState:
        """An approximate snapshot (actor poses and velocities, scripted actors, our bookkeeping); CARLA's
        physics and Traffic Manager state are not captured, so continuations diverge (``exact_clone`` is False)."""
        poses = {}
        for _, _, _, actor in self._all_states():
            tr, v, w = actor.get_transform(), actor.get_velocity(), actor.get_angular_velocity()
            poses[id(actor)] = (actor, tr, v, w)
        python_state = copy.deepcopy(
            {
                "t": self.t,
                "ticks": self._ticks,
                "progress": self.progress,
                "collided": self._collided,
                "command": self._command,
                "meta": self._meta,
                "expert_lane": self._expert_lane,
                "kinematic": [(k.state, k.behavior) for k in self._kinematic],
                "n_kinematic": len(self._kinematic),
            }
        )
        return CarlaState(poses, python_state, self.t)

    def restore_state(self, state: CarlaState) -> None:
        """Teleport the actors back to ``state``'s poses and velocities, destroying scripted actors spawned since;
        raises DrivingError for a snapshot that is not a CarlaState."""
        if not isinstance(state, CarlaState):
            raise DrivingError("restore_state needs a snapshot from CarlaSim.clone_state")
        p = copy.deepcopy(state.python_state)
        while len(self._kinematic) > p["n_kinematic"]:  # scripted actors that appeared after the snapshot
            k = self._kinematic.pop()
            k.actor.destroy()
            self._actors.remove(k.actor)
            k.actor = None
            self._pending.insert(0, k)
        for k, (s, b) in zip(self._kinematic, p["kinematic"]):
            k.state, k.behavior = s, b
        for actor, tr, v, w in state.poses.values():
            actor.set_transform(tr)
            actor.set_target_velocity(v)
            actor.set_target_angular_velocity(w)
        self.t, self._ticks, self.progress, self._command = p["t"], p["ticks"], p["progress"], p["command"]
        self._meta, self._expert_lane = p["meta"], p["expert_lane"]
        self._collided[:] = p["collided"]

    # ------------------------------------------------------------ rendering

    def render(self, size: tuple[int, int] | None = None, scale: float | None = None) -> np.ndarray:
        """The bird's-eye camera's latest frame (turns with the ego; black until its first frame arrives)."""
        c, st = self.carla, self.scenario.settings
        size = tuple(int(v) for v in (size or st.video_size))
        scale = float(scale or st.video_scale)
        key = (size, scale)
        if key not in self._cameras:
            bp = self.world.get_blueprint_library().find("sensor.camera.rgb")
            bp.set_attribute("image_size_x", str(size[0]))
            bp.set_attribute("image_size_y", str(size[1]))
            bp.set_attribute("fov", "90")
            height = size[0] / (2.0 * scale)  # 90° field of view: ground width = 2 × height
            cam = self.world.spawn_actor(
                bp, c.Transform(c.Location(0.0, 0.0, height), c.Rotation(-90.0, 0.0, 0.0)), attach_to=self.ego
            )
            frames: queue.Queue = queue.Queue(maxsize=2)

            def on_image(image, frames=frames):
                if frames.full():
                    frames.get_nowait()
                frames.put(image)

            cam.listen(on_image)
            self._actors.append(cam)
            self._cameras[key] = [frames, None]
        frames, last = self._cameras[key]
        try:  # the first frame comes with the next tick: wait for it only when there is none yet
            image = frames.get(timeout=0.5) if last is not None else frames.get_nowait()
            bgra = np.frombuffer(image.raw_data, dtype=np.uint8).reshape(image.height, image.width, 4)
            self._cameras[key][1] = last = np.ascontiguousarray(bgra[:, :, 2::-1])
        except queue.Empty:
            pass
        return last if last is not None else np.zeros((size[1], size[0], 3), np.uint8)

    # ------------------------------------------------------------ teardown

    def _destroy_all(self) -> None:
        for a in reversed(self._actors):
            try:
                if hasattr(a, "stop") and hasattr(a, "listen"):
                    a.stop()
                a.destroy()
            except RuntimeError:
                pass
        self._actors.clear()
        self._cameras.clear()

    def close(self) -> None:
        """Destroy our actors and give the server back its original (asynchronous) settings."""
        self._destroy_all()
        try:
            self.world.apply_settings(self._original_settings)
            self.tm.set_synchronous_mode(False)
        except RuntimeError:
            pass
