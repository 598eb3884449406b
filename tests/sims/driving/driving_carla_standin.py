"""A stand-in for the ``carla`` client module: just the API the CARLA backend calls, over a fake
world, so that the adapter's logic runs in CI without a CARLA server. It is NOT CARLA.

The world: a straight road along CARLA's +x with three driving lanes in the +x direction
(lane_id -1, -2, -3 at y = 1.75, 5.25, 8.75: CARLA's y points right) and an opposite lane
(lane_id 1 at y = -1.75) left of them; shoulders beyond. Physics vehicles integrate a kinematic
bicycle from their VehicleControl (positive steer turns right, i.e. yaw grows, as in CARLA);
autopilot vehicles drive straight at their Traffic Manager speed; kinematic actors stay where
set_transform puts them. The collision sensor fires on box overlap with the vehicle it is
attached to; cameras deliver a BGRA image per tick.
"""

from __future__ import annotations

import copy
import fnmatch
import math
import time

LANE_WIDTH = 3.5
LANES = {1: -1.75, -1: 1.75, -2: 5.25, -3: 8.75}  # lane_id → y centre
MAX_STEER_DEG = 70.0
REACHABLE = {"ok": True}  # set False to play an absent server
CALLS: list[str] = []  # a log of interesting calls, for assertions


class Vector3D:
    def __init__(self, x=0.0, y=0.0, z=0.0):
        self.x, self.y, self.z = float(x), float(y), float(z)


class Location(Vector3D):
    pass


class Rotation:
    def __init__(self, pitch=0.0, yaw=0.0, roll=0.0):
        self.pitch, self.yaw, self.roll = float(pitch), float(yaw), float(roll)


class Transform:
    def __init__(self, location=None, rotation=None):
        self.location = location or Location()
        self.rotation = rotation or Rotation()


class VehicleControl:
    def __init__(self, throttle=0.0, steer=0.0, brake=0.0, hand_brake=False, reverse=False):
        self.throttle, self.steer, self.brake = float(throttle), float(steer), float(brake)
        self.hand_brake, self.reverse = hand_brake, reverse


class LaneType:
    Driving = "Driving"
    Shoulder = "Shoulder"


class WorldSettings:
    def __init__(self):
        self.synchronous_mode = False
        self.fixed_delta_seconds = None
        self.no_rendering_mode = False


class Waypoint:
    def __init__(self, x: float, lane_id: int, lane_type: str = LaneType.Driving):
        self.lane_id, self.lane_type, self.lane_width = lane_id, lane_type, LANE_WIDTH
        y = LANES.get(lane_id, 8.75 + LANE_WIDTH if lane_id < 0 else -1.75 - LANE_WIDTH)
        self.transform = Transform(Location(x, y, 0.0), Rotation(yaw=0.0 if lane_id < 0 else 180.0))
        self.road_id = 1

    def get_left_lane(self):
        if self.lane_type != LaneType.Driving:
            return None
        if self.lane_id == -1:
            return Waypoint(self.transform.location.x, 1)
        if self.lane_id < 0:
            return Waypoint(self.transform.location.x, self.lane_id + 1)
        return Waypoint(self.transform.location.x, 2, LaneType.Shoulder)

    def get_right_lane(self):
        if self.lane_type != LaneType.Driving:
            return None
        if self.lane_id == -3:
            return Waypoint(self.transform.location.x, -4, LaneType.Shoulder)
        if self.lane_id < 0:
            return Waypoint(self.transform.location.x, self.lane_id - 1)
        return Waypoint(self.transform.location.x, -1)

    def next(self, d: float):
        sign = 1.0 if self.lane_id < 0 else -1.0
        return [Waypoint(self.transform.location.x + sign * d, self.lane_id, self.lane_type)]

    def previous(self, d: float):
        return self.next(-d)


class Map:
    name = "StandIn/Straight3"

    def get_spawn_points(self):
        return [Transform(Location(0.0, 5.25, 0.3), Rotation(yaw=0.0)), Transform(Location(50.0, 1.75, 0.3))]

    def get_waypoint(self, location, project_to_road=True, lane_type=LaneType.Driving):
        best = min(LANES, key=lambda k: abs(LANES[k] - location.y))
        if not project_to_road and abs(LANES[best] - location.y) > LANE_WIDTH / 2:
            return None
        return Waypoint(location.x, best)


class Blueprint:
    def __init__(self, id: str, **attributes):
        self.id, self.tags = id, id.split(".")
        self._attributes = {k: str(v) for k, v in attributes.items()}

    def has_attribute(self, name):
        return name in self._attributes

    def set_attribute(self, name, value):
        self._attributes[name] = str(value)

    def get_attribute(self, name):
        return self._attributes[name]


class BlueprintLibrary:
    def __init__(self):
        self._bps = [
            Blueprint("vehicle.tesla.model3", role_name="autopilot", number_of_wheels=4),
            Blueprint("vehicle.audi.a2", role_name="autopilot", number_of_wheels=4),
            Blueprint("vehicle.bh.crossbike", role_name="autopilot", number_of_wheels=2),
            Blueprint("sensor.other.collision"),
            Blueprint("sensor.camera.rgb", image_size_x=800, image_size_y=600, fov=90),
        ]

    def find(self, id):
        for bp in self._bps:
            if bp.id == id:
                return copy.deepcopy(bp)
        raise IndexError(f"blueprint {id!r} not found")

    def filter(self, pattern):
        return [copy.deepcopy(bp) for bp in self._bps if fnmatch.fnmatch(bp.id, pattern)]


class _Extent:
    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z


class _BoundingBox:
    def __init__(self):
        self.extent = _Extent(2.4, 1.0, 0.75)


class _Wheel:
    max_steer_angle = MAX_STEER_DEG


class _Physics:
    wheels = [_Wheel(), _Wheel(), _Wheel(), _Wheel()]


class Actor:
    _next_id = 1

    def __init__(self, world, bp, transform, parent=None):
        self.id, Actor._next_id = Actor._next_id, Actor._next_id + 1
        self.world, self.type_id, self.parent = world, bp.id, parent
        self.attributes = dict(bp._attributes)
        self._transform = copy.deepcopy(transform)
        self._velocity, self._angular = Vector3D(), Vector3D()
        self.physics, self.autopilot, self.tm_speed = True, False, None
        self.control = VehicleControl()
        self.bounding_box = _BoundingBox()
        self.alive, self.callback = True, None

    def get_transform(self):
        if self.parent is not None:
            p = self.parent.get_transform()
            return Transform(
                Location(p.location.x, p.location.y, p.location.z + self._transform.location.z), p.rotation
            )
        return copy.deepcopy(self._transform)

    def get_velocity(self):
        return copy.deepcopy(self._velocity)

    def get_angular_velocity(self):
        return copy.deepcopy(self._angular)

    def set_transform(self, transform):
        self._transform = copy.deepcopy(transform)

    def set_target_velocity(self, v):
        self._velocity = copy.deepcopy(v)

    def set_target_angular_velocity(self, w):
        self._angular = copy.deepcopy(w)

    def apply_control(self, control):
        CALLS.append("apply_control")
        self.control = control

    def set_simulate_physics(self, enabled):
        self.physics = bool(enabled)

    def set_autopilot(self, enabled, port=8000):
        self.autopilot = bool(enabled)

    def get_physics_control(self):
        return _Physics()

    def listen(self, callback):
        self.callback = callback

    def stop(self):
        self.callback = None

    def destroy(self):
        self.alive = False
        if self in self.world.actors:
            self.world.actors.remove(self)
        return True


class _CollisionEvent:
    def __init__(self, actor, other):
        self.actor, self.other_actor = actor, other


class _Image:
    def __init__(self, frame, width, height):
        self.frame, self.width, self.height = frame, width, height
        self.raw_data = bytes([30, 60, 90, 255]) * (width * height)  # BGRA


class World:
    def __init__(self):
        self.settings = WorldSettings()
        self.actors: list[Actor] = []
        self.frame = 0
        self.map = Map()

    def get_settings(self):
        return copy.deepcopy(self.settings)

    def apply_settings(self, settings):
        CALLS.append(f"apply_settings sync={settings.synchronous_mode} dt={settings.fixed_delta_seconds}")
        self.settings = copy.deepcopy(settings)
        return self.frame

    def get_map(self):
        return self.map

    def get_blueprint_library(self):
        return BlueprintLibrary()

    def spawn_actor(self, bp, transform, attach_to=None):
        actor = Actor(self, bp, transform, attach_to)
        self.actors.append(actor)
        return actor

    def try_spawn_actor(self, bp, transform):
        for a in self.actors:
            if (
                a.parent is None
                and a.type_id.startswith("vehicle")
                and math.hypot(
                    a._transform.location.x - transform.location.x, a._transform.location.y - transform.location.y
                )
                < 2.0
            ):
                return None
        return self.spawn_actor(bp, transform)

    def tick(self, seconds=10.0):
        if not self.settings.synchronous_mode:
            raise RuntimeError("stand-in: tick() outside synchronous mode")
        dt = self.settings.fixed_delta_seconds
        for a in list(self.actors):
            if a.parent is not None or not a.type_id.startswith("vehicle") or not a.physics:
                continue
            tr, v = a._transform, a._velocity
            yaw = math.radians(tr.rotation.yaw)
            speed = math.hypot(v.x, v.y)
            if a.autopilot:  # the stand-in's "Traffic Manager": cruise, never closer than 2 s to the car ahead
                speed = a.tm_speed if a.tm_speed is not None else speed
                for o in self.actors:
                    if o is a or o.parent is not None or not o.type_id.startswith("vehicle"):
                        continue
                    lo, gap = o._transform.location, o._transform.location.x - tr.location.x
                    if abs(lo.y - tr.location.y) < 2.0 and 0.0 < gap < 10.0 + 2.0 * speed:
                        speed = max(0.0, min(speed, math.hypot(o._velocity.x, o._velocity.y) - 1.0))
            else:
                acc = 4.0 * a.control.throttle - 8.0 * a.control.brake
                delta = a.control.steer * math.radians(MAX_STEER_DEG)
                beta = math.atan(0.5 * math.tan(delta))
                tr.location.x += speed * math.cos(yaw + beta) * dt
                tr.location.y += speed * math.sin(yaw + beta) * dt
                steer_rate = speed * math.sin(beta) / 1.4
                speed = max(0.0, speed + acc * dt)
                yaw += steer_rate * dt
                tr.rotation.yaw = math.degrees(yaw)
                a._velocity = Vector3D(speed * math.cos(yaw), speed * math.sin(yaw), 0.0)
                continue
            tr.location.x += speed * math.cos(yaw) * dt
            tr.location.y += speed * math.sin(yaw) * dt
            a._velocity = Vector3D(speed * math.cos(yaw), speed * math.sin(yaw), 0.0)
        self.frame += 1
        vehicles = [a for a in self.actors if a.parent is None and a.type_id.startswith("vehicle")]
        for s in [a for a in self.actors if a.parent is not None and a.callback is not None]:
            if s.type_id == "sensor.other.collision":
                me = s.parent.get_transform().location
                for o in vehicles:
                    if o is not s.parent:
                        lo = o.get_transform().location
                        if abs(lo.x - me.x) < 4.8 and abs(lo.y - me.y) < 2.0:
                            s.callback(_CollisionEvent(s.parent, o))
            elif s.type_id == "sensor.camera.rgb":
                s.callback(_Image(self.frame, int(s.attributes["image_size_x"]), int(s.attributes["image_size_y"])))
        return self.frame


class TrafficManager:
    def __init__(self, port):
        self.port, self.sync = port, False

    def get_port(self):
        return self.port

    def set_synchronous_mode(self, on):
        self.sync = bool(on)

    def set_random_device_seed(self, seed):
        pass

    def set_desired_speed(self, actor, kmh):
        actor.tm_speed = kmh / 3.6

    def auto_lane_change(self, actor, on):
        pass


class Client:
    def __init__(self, host, port, worker_threads=0):
        self.host, self.port, self.timeout = host, port, 5.0
        self._world = None

    def set_timeout(self, seconds):
        self.timeout = float(seconds)

    def _check(self):
        if not REACHABLE["ok"]:
            time.sleep(self.timeout)
            raise RuntimeError(
                f"time-out of {int(self.timeout * 1000)}ms while waiting for the simulator, make "
                f"sure the simulator is ready and connected to {self.host}:{self.port}"
            )

    def get_world(self):
        self._check()
        self._world = self._world or World()
        return self._world

    def load_world(self, name):
        self._check()
        CALLS.append(f"load_world {name}")
        self._world = World()
        return self._world

    def get_trafficmanager(self, port=8000):
        return TrafficManager(port)

    def get_server_version(self):
        return "0.9.16"

    def get_client_version(self):
        return "0.9.16"
