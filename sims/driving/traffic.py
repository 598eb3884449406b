"""highway-env's IDM traffic, one scene at a time in numpy: the decisions and kinematics of every
vehicle on straight lanes as array operations, with highway-env's results.

On a road network whose lanes are all ``StraightLane``s, ``FastRoad`` (highway.py) hands this
module each integration step:

* ``idm_act``: the plain ``IDMVehicle``s, after each has run its own lane-change policy (MOBIL,
  in vehicle order, as highway-env does): their lane-keeping steering
  (``ControlledVehicle.steering_control``) and IDM acceleration against the front vehicle on the
  current lane (and on the target lane while changing), for all at once. Nothing these read
  changes while vehicles decide, which is what lets the scene be batched.
* ``kinematic_step``: vehicles whose step is ``IDMVehicle.step``/``Vehicle.step`` (IDM traffic and
  the ego): the bicycle model, then the closest lane.
* ``may_touch``: which nearby pairs the exact collision check could flag.

Every formula keeps highway-env's operand order, and numpy's elementwise sin/cos/tan/arctan/arcsin/
power are the same functions its scalar calls use, so results are equal bit for bit (tested against
highway-env's own loop). One assumption, shared with ``FastRoad.neighbour_vehicles``: a 2-vector
``np.dot`` rounds like ``a0*b0 + a1*b1`` (true on axis-aligned lanes, as every highway lane is,
and measured on this machine for arbitrary vectors).
"""

from __future__ import annotations

import numpy as np
from highway_env.road.lane import StraightLane
from highway_env.vehicle.behavior import IDMVehicle
from highway_env.vehicle.kinematics import Vehicle

NOT_ZERO_EPS = 1e-2  # highway_env.utils.not_zero's default


def _not_zero(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) > NOT_ZERO_EPS, x, np.where(x >= 0, NOT_ZERO_EPS, -NOT_ZERO_EPS))


def _wrap_to_pi(x: np.ndarray) -> np.ndarray:
    return ((x + np.pi) % (2 * np.pi)) - np.pi


def _py_max0(x: np.ndarray) -> np.ndarray:
    """Python's ``max(x, 0)`` elementwise (keeps x unless 0 > x, as the builtin does)."""
    return np.where(0 > x, 0.0, x)


class LaneTable:
    """A road network's lanes as arrays, in ``RoadNetwork.get_closest_lane_index``'s order. ``ok``:
    every lane is a ``StraightLane`` (the batched paths need it)."""

    def __init__(self, network):
        self.indexes, self.lanes = [], []
        for _from, to_dict in network.graph.items():
            for _to, group in to_dict.items():
                for _id, lane in enumerate(group):
                    self.indexes.append((_from, _to, _id))
                    self.lanes.append(lane)
        self.column = {index: k for k, index in enumerate(self.indexes)}  # by LaneIndex: clones copy lane objects
        self.ok = bool(self.lanes) and all(type(ln) is StraightLane for ln in self.lanes)
        if self.ok:
            lanes = self.lanes
            self.start = np.array([ln.start for ln in lanes], dtype=np.float64)
            self.direction = np.array([ln.direction for ln in lanes], dtype=np.float64)
            self.lateral = np.array([ln.direction_lateral for ln in lanes], dtype=np.float64)
            self.length = np.array([ln.length for ln in lanes], dtype=np.float64)
            self.heading = np.array([ln.heading for ln in lanes], dtype=np.float64)
            self.half_width = np.array([ln.width / 2 for ln in lanes], dtype=np.float64)
            self.vehicle_length = np.array([ln.VEHICLE_LENGTH for ln in lanes], dtype=np.float64)
            self.limited = np.array([ln.speed_limit is not None for ln in lanes])
            self.speed_limit = np.array([ln.speed_limit or 0.0 for ln in lanes], dtype=np.float64)

    def columns(self, indexes: list) -> np.ndarray:
        """Columns of the lanes with these LaneIndexes."""
        return np.array([self.column[index] for index in indexes], dtype=np.intp)

    def local(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(long, lat), each (n, lanes): ``local_coordinates`` of every position on every lane."""
        dx = pos[:, None, 0] - self.start[None, :, 0]
        dy = pos[:, None, 1] - self.start[None, :, 1]
        long = dx * self.direction[None, :, 0] + dy * self.direction[None, :, 1]
        return long, dx * self.lateral[None, :, 0] + dy * self.lateral[None, :, 1]

    def closest(self, pos: np.ndarray, heading: np.ndarray) -> np.ndarray:
        """``get_closest_lane_index`` for each row of ``pos`` (n, 2) and ``heading`` (n,): lane rows."""
        s, r = self.local(pos)
        angle = np.abs(_wrap_to_pi(heading[:, None] - self.heading[None, :]))
        dist = np.abs(r) + _py_max0(s - self.length[None, :]) + _py_max0(0 - s) + 1.0 * angle
        return np.argmin(dist, axis=1)


class LaneCoordinates:
    """Every item's (long, lat, on-lane with a 1 m margin, as ``neighbour_vehicles`` tests it) on
    the road's lanes, computed once per ``act`` (positions do not move while vehicles decide): all
    lanes at once when ``table.ok``, else lane by lane as asked."""

    def __init__(self, pos: np.ndarray, table: LaneTable):
        self.pos, self.table = pos, table
        self._single: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if table.ok:
            self.long, self.lat = table.local(pos)
            self.on = (
                (np.abs(self.lat) <= table.half_width + 1)
                & (-table.vehicle_length <= self.long)
                & (self.long < table.length + table.vehicle_length)
            )

    def __call__(self, lane_index, lane) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(long, lat, on) of every item on ``lane`` (at ``lane_index``), each (n,)."""
        if self.table.ok:
            k = self.table.column[lane_index]
            return self.long[:, k], self.lat[:, k], self.on[:, k]
        hit = self._single.get(id(lane))
        if hit is None:
            dx, dy = self.pos[:, 0] - lane.start[0], self.pos[:, 1] - lane.start[1]
            long = dx * lane.direction[0] + dy * lane.direction[1]
            lat = dx * lane.direction_lateral[0] + dy * lane.direction_lateral[1]
            on = (
                (np.abs(lat) <= lane.width / 2 + 1)
                & (-lane.VEHICLE_LENGTH <= long)
                & (long < lane.length + lane.VEHICLE_LENGTH)
            )
            hit = self._single[id(lane)] = (long, lat, on)
        return hit


def is_plain_idm(vehicle) -> bool:
    """Whether ``vehicle.act`` is exactly highway-env's IDM/MOBIL (and it is not crashed: then it does nothing)."""
    return type(vehicle) is IDMVehicle and not vehicle.crashed


def lane_ends(vehicles: list, rows: np.ndarray, coords: LaneCoordinates) -> np.ndarray:
    """For ``vehicles[r]``, r in ``rows`` (also their rows in ``coords``): whether each is past its
    target lane's end (``AbstractLane.after_end``), i.e. whether ``follow_road`` will switch lanes."""
    t = coords.table
    cols = t.columns([vehicles[r].target_lane_index for r in rows])
    return coords.long[rows, cols] > t.length[cols] - t.vehicle_length[cols] / 2


def decide_lane(vehicle, past_end: bool) -> None:
    """The first half of ``IDMVehicle.act``: follow the road at a lane's end, then MOBIL (whose
    early return on the lane-change timer is taken here, without the call)."""
    if past_end:
        vehicle.follow_road()
    if vehicle.enable_lane_change and (
        vehicle.lane_index != vehicle.target_lane_index or vehicle.LANE_CHANGE_DELAY < vehicle.timer
    ):
        vehicle.change_lane_policy()


def front_indices(coords: LaneCoordinates, cols: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each query k (the item at ``rows[k]`` projected on lane column ``cols[k]``): the index of
    its front item on that lane as ``Road.neighbour_vehicles`` picks it (nearest at or ahead, the
    last of equals), -1 for none."""
    long, on = coords.long[:, cols].T, coords.on[:, cols].T  # (queries, items)
    s = coords.long[rows, cols]
    mask = on & (long >= s[:, None])
    mask[np.arange(len(rows)), rows] = False  # not itself
    best = np.where(mask, long, np.inf).min(axis=1)
    last = mask & (long == best[:, None])
    idx = long.shape[1] - 1 - np.argmax(last[:, ::-1], axis=1)
    return np.where(last.any(axis=1), idx, -1)


def idm_act(vehicles: list, rows: np.ndarray, items: list, coords: LaneCoordinates) -> None:
    """``IDMVehicle.act`` after its lane-change policy, for ``vehicles[r]``, r in ``rows``, at once:
    sets each one's ``action``. ``items``: the road's vehicles, then its non-landmark objects (the
    neighbour candidates; ``coords`` holds their lane coordinates)."""
    if not len(rows):
        return
    table = coords.table
    speed = np.array([it.speed for it in items], dtype=np.float64)
    heading = np.array([it.heading for it in items], dtype=np.float64)
    cos, sin = np.cos(heading), np.sin(heading)
    group = [vehicles[r] for r in rows]
    lane = table.columns([v.lane_index for v in group])
    target = table.columns([v.target_lane_index for v in group])
    c = IDMVehicle  # every one is a plain IDMVehicle: the class constants are shared (DELTA is per vehicle)

    steering = _steering(c, coords.lat[rows, target], table.heading[target], speed[rows], heading[rows])
    target_speed = np.array([v.target_speed for v in group], dtype=np.float64)
    target_speed = np.where(table.limited[lane], np.clip(target_speed, 0, table.speed_limit[lane]), target_speed)
    delta = np.array([v.DELTA for v in group], dtype=np.float64)
    free = c.COMFORT_ACC_MAX * (1 - np.power(_py_max0(speed[rows]) / np.abs(_not_zero(target_speed)), delta))

    def idm(k, front_lanes):  # IDMVehicle.acceleration against the front on front_lanes, for rows[k]
        r, ln = rows[k], lane[k]
        f = front_indices(coords, front_lanes, r)
        acc = free[k].copy()
        has = f >= 0
        r, ln, f = r[has], ln[has], f[has]
        d = coords.long[f, ln] - coords.long[r, ln]  # lane_distance_to, along the vehicle's own lane
        dv = (speed[r] * cos[r] - speed[f] * cos[f]) * cos[r] + (speed[r] * sin[r] - speed[f] * sin[f]) * sin[r]
        ab = -c.COMFORT_ACC_MAX * c.COMFORT_ACC_MIN
        d_star = c.DISTANCE_WANTED + speed[r] * c.TIME_WANTED + speed[r] * dv / (2 * np.sqrt(ab))
        acc[has] -= c.COMFORT_ACC_MAX * np.power(d_star / _not_zero(d), 2)
        return acc

    acc = idm(np.arange(len(rows)), lane)
    changing = np.flatnonzero(lane != target)
    if len(changing):
        acc_t = idm(changing, target[changing])
        acc[changing] = np.where(acc_t < acc[changing], acc_t, acc[changing])  # Python's min(acc, acc_t)
    acc = np.clip(acc, -c.ACC_MAX, c.ACC_MAX)
    for v, st, a in zip(group, steering, acc):
        v.action = {"steering": st, "acceleration": a}


def _steering(c, lat, lane_heading, speed, heading) -> np.ndarray:
    """``ControlledVehicle.steering_control`` on straight target lanes (lateral offsets ``lat``,
    headings ``lane_heading``), then ``act``'s clip."""
    lateral_speed_command = -c.KP_LATERAL * lat
    heading_command = np.arcsin(np.clip(lateral_speed_command / _not_zero(speed), -1, 1))
    heading_ref = lane_heading + np.clip(heading_command, -np.pi / 4, np.pi / 4)
    heading_rate_command = c.KP_HEADING * _wrap_to_pi(heading_ref - heading)
    slip_angle = np.arcsin(np.clip(c.LENGTH / 2 / _not_zero(speed) * heading_rate_command, -1, 1))
    steering = np.clip(np.arctan(2 * np.tan(slip_angle)), -c.MAX_STEERING_ANGLE, c.MAX_STEERING_ANGLE)
    return np.clip(steering, -c.MAX_STEERING_ANGLE, c.MAX_STEERING_ANGLE)


def batchable_step(vehicle) -> bool:
    """Whether ``vehicle.step`` is highway-env's IDM/plain kinematics (timer, bicycle model, closest lane)."""
    step = type(vehicle).step
    return (step is IDMVehicle.step or step is Vehicle.step) and type(
        vehicle
    ).on_state_update is Vehicle.on_state_update


def kinematic_step(vehicles: list, dt: float, table: LaneTable, network) -> None:
    """``Vehicle.step(dt)`` (with ``IDMVehicle``'s timer) for ``vehicles`` at once, then each one's
    closest lane from ``table`` (the road must not record history)."""
    if not vehicles:
        return
    for v in vehicles:
        if isinstance(v, IDMVehicle):
            v.timer += dt
        v.clip_actions()  # per-vehicle branches on its own action dict; cheap
    steer = np.array([v.action["steering"] for v in vehicles], dtype=np.float64)
    acc = np.array([v.action["acceleration"] for v in vehicles], dtype=np.float64)
    speed = np.array([v.speed for v in vehicles], dtype=np.float64)
    heading = np.array([v.heading for v in vehicles], dtype=np.float64)
    half = np.array([v.LENGTH / 2 for v in vehicles], dtype=np.float64)
    pos = np.array([v.position for v in vehicles], dtype=np.float64)
    beta = np.arctan(1 / 2 * np.tan(steer))
    pos[:, 0] += speed * np.cos(heading + beta) * dt
    pos[:, 1] += speed * np.sin(heading + beta) * dt
    new_heading = heading + speed * np.sin(beta) / half * dt
    new_speed = speed + acc * dt
    for i, v in enumerate(vehicles):
        v.position[:] = pos[i]
        if v.impact is not None:
            v.position += v.impact
            v.crashed = True
            v.impact = None
        # the speed keeps its type, as ``speed += float`` would (a Python float never becomes np.float64)
        v.heading, v.speed = new_heading[i], new_speed[i] if isinstance(v.speed, np.floating) else float(new_speed[i])
    rows = table.closest(np.array([v.position for v in vehicles]), new_heading)
    for v, row in zip(vehicles, rows):
        v.lane_index = table.indexes[row]
        v.lane = network.get_lane(v.lane_index)


def may_touch(vehicles: list, i: np.ndarray, j: np.ndarray, dt: float, margin: float = 1e-6) -> np.ndarray:
    """For pairs (vehicles[i[k]], vehicles[j[k]]): False where highway-env's separating-axis test
    (``utils.are_polygons_intersecting`` with displacements speed·direction·dt) is sure to find them
    neither intersecting nor about to: apart by more than ``margin`` on one of the four rectangle
    axes even after sweeping the first along the relative displacement. Such pairs are left
    untouched by ``handle_collisions``, so skipping them changes nothing; the margin absorbs rounding."""
    pos = np.array([v.position for v in vehicles], dtype=np.float64)
    h = np.array([v.heading for v in vehicles], dtype=np.float64)
    speed = np.array([v.speed for v in vehicles], dtype=np.float64)
    half_l = np.array([v.LENGTH / 2 for v in vehicles], dtype=np.float64)
    half_w = np.array([v.WIDTH / 2 for v in vehicles], dtype=np.float64)
    u = np.stack([np.cos(h), np.sin(h)], axis=1)  # (n, 2) length axis
    w = np.stack([-u[:, 1], u[:, 0]], axis=1)  # width axis
    disp = (speed[:, None] * u) * dt
    axes = np.stack([u[i], w[i], u[j], w[j]], axis=1)  # (pairs, 4, 2)

    def radius(k):  # the rectangle's half extent along each axis
        return (
            half_l[k, None] * np.abs(axes @ u[k, :, None])[..., 0]
            + half_w[k, None] * np.abs(axes @ w[k, :, None])[..., 0]
        )

    ca, cb = (axes @ pos[i, :, None])[..., 0], (axes @ pos[j, :, None])[..., 0]
    min_a, max_a, min_b, max_b = ca - radius(i), ca + radius(i), cb - radius(j), cb + radius(j)
    vp = (axes @ (disp[i] - disp[j])[:, :, None])[..., 0]
    min_a, max_a = min_a + np.minimum(vp, 0), max_a + np.maximum(vp, 0)
    gap = np.where(min_a < min_b, min_b - max_a, min_a - max_b)
    return ~(gap > margin).any(axis=1)
