"""sims/driving/traffic.py piece by piece against highway-env's own functions on random scenes
(the whole-trace comparison is test_driving_highway's ``test_fast_road_gives_highway_envs_own_results``)."""

import numpy as np
import pytest

pytest.importorskip("highway_env", reason="needs the driving extra")

from highway_env import utils  # noqa: E402
from highway_env.road.road import Road, RoadNetwork  # noqa: E402
from highway_env.vehicle.behavior import IDMVehicle  # noqa: E402

from embody.sims.driving import traffic  # noqa: E402


def _scene(rng, n=30, lanes=4, spread=60.0):
    """A straight road with ``n`` IDM vehicles packed close (ties in x included), random headings and speeds."""
    net = RoadNetwork.straight_road_network(lanes, length=1000.0)
    road = Road(network=net, np_random=rng, record_history=False)
    for k in range(n):
        lane = net.get_lane(("0", "1", int(rng.integers(lanes))))
        x = float(np.round(rng.uniform(100, 100 + spread), 0 if k % 3 == 0 else 3))  # some equal positions
        v = IDMVehicle(road, lane.position(x, rng.normal(0, 1.2)), rng.normal(0, 0.2), rng.uniform(0, 30))
        road.vehicles.append(v)
    return road


def test_closest_lane_matches_get_closest_lane_index():
    rng = np.random.default_rng(0)
    road = _scene(rng, n=200)
    table = traffic.LaneTable(road.network)
    pos = np.array([v.position for v in road.vehicles])
    heading = np.array([v.heading for v in road.vehicles])
    rows = table.closest(pos, heading)
    expected = [road.network.get_closest_lane_index(p, h) for p, h in zip(pos, heading)]
    assert [table.indexes[r] for r in rows] == expected


def test_front_vehicles_match_neighbour_vehicles_ties_included():
    rng = np.random.default_rng(1)
    for _ in range(5):
        road = _scene(rng)
        table = traffic.LaneTable(road.network)
        coords = traffic.LaneCoordinates(np.array([v.position for v in road.vehicles]), table)
        for index in table.indexes:  # every vehicle projected on every lane
            rows = np.arange(len(road.vehicles))
            front = traffic.front_indices(coords, table.columns([index] * len(rows)), rows)
            expected = [Road.neighbour_vehicles(road, v, index)[0] for v in road.vehicles]
            assert [road.vehicles[f] if f >= 0 else None for f in front] == expected


def test_may_touch_never_skips_a_pair_the_exact_check_would_flag():
    rng = np.random.default_rng(2)
    dt, flagged, skipped = 1 / 15, 0, 0
    for _ in range(40):
        road = _scene(rng, n=25, spread=40.0)
        vs = road.vehicles
        i, j = np.triu_indices(len(vs), 1)
        touch = traffic.may_touch(vs, i, j, dt)
        for a, b, t in zip(i, j, touch):
            hit, will, _ = utils.are_polygons_intersecting(
                vs[a].polygon(), vs[b].polygon(), vs[a].velocity * dt, vs[b].velocity * dt
            )
            flagged += hit or will
            skipped += not t
            assert t or not (hit or will), (a, b)
    assert flagged > 50 and skipped > 1000  # both kinds of pairs occurred
