"""Road-frame conversions, both ways, for highway-env (y right, heading clockwise) and CARLA
(left-handed, yaw in degrees). Pure numpy: no simulator needed."""

import math

import numpy as np
import pytest

from embody.sims.driving.frames import (
    Frame2D,
    carla_frame,
    carla_to_road,
    carla_vector_to_road,
    highway_frame,
    highway_to_road,
    road_steering_to_carla,
    road_to_carla,
    road_to_highway,
    wrap_angle,
)

RNG = np.random.default_rng(0)
XS, YS, HS = RNG.uniform(-300, 300, 50), RNG.uniform(-40, 40, 50), RNG.uniform(-math.pi, math.pi, 50)
FRAMES = [Frame2D(), Frame2D(12.0, -3.0, 0.7), Frame2D(-50.0, 80.0, -2.9)]


def _same_angle(a, b):
    return np.allclose(wrap_angle(np.asarray(a) - np.asarray(b)), 0.0, atol=1e-9)


def test_highway_y_points_right_and_heading_turns_clockwise():
    # a car 4 m to the right (highway-env y = +4) heading slightly right (+0.1 clockwise)
    x, y, h = highway_to_road(10.0, 4.0, 0.1)
    assert (float(x), float(y)) == (10.0, -4.0) and math.isclose(float(h), -0.1)
    # lane k of a straight highway-env road lies at y_hw = 4k: road-frame y = -4k (lane 0 leftmost)
    assert float(highway_to_road(0.0, 8.0, 0.0)[1]) == -8.0


def test_carla_is_left_handed_with_yaw_in_degrees():
    # CARLA yaw 90° points along +y, which is to the right: road heading -pi/2
    x, y, h = carla_to_road(5.0, 2.0, 90.0)
    assert (float(x), float(y)) == (5.0, -2.0) and math.isclose(float(h), -math.pi / 2)
    vx, vy = carla_vector_to_road(0.0, 3.0)  # moving toward CARLA +y = to the right
    assert (float(vx), float(vy)) == (0.0, -3.0)
    # positive road steering turns left; CARLA's positive steer turns right
    assert float(road_steering_to_carla(0.35, 0.7)) == -0.5
    assert float(road_steering_to_carla(-5.0, 0.7)) == 1.0


@pytest.mark.parametrize("frame", FRAMES)
def test_highway_round_trips_both_ways(frame):
    hx, hy, hh = road_to_highway(XS, YS, HS, frame)
    x, y, h = highway_to_road(hx, hy, hh, frame)
    assert np.allclose(x, XS) and np.allclose(y, YS) and _same_angle(h, HS)
    rx, ry, rh = highway_to_road(XS, YS, HS, frame)
    x, y, h = road_to_highway(rx, ry, rh, frame)
    assert np.allclose(x, XS) and np.allclose(y, YS) and _same_angle(h, HS)


@pytest.mark.parametrize("frame", FRAMES)
def test_carla_round_trips_both_ways(frame):
    cx, cy, yaw = road_to_carla(XS, YS, HS, frame)
    assert np.all((yaw >= -180.0) & (yaw < 180.0))
    x, y, h = carla_to_road(cx, cy, yaw, frame)
    assert np.allclose(x, XS) and np.allclose(y, YS) and _same_angle(h, HS)
    deg = np.rad2deg(HS)
    rx, ry, rh = carla_to_road(XS, YS, deg, frame)
    x, y, yaw = road_to_carla(rx, ry, rh, frame)
    assert np.allclose(x, XS) and np.allclose(y, YS) and _same_angle(np.deg2rad(yaw), np.deg2rad(deg))


def test_a_frame_placed_at_a_pose_makes_that_pose_the_origin():
    f = highway_frame(100.0, 42.5, -math.pi / 2)  # highway-env pose: heading "up" the screen (-y)
    x, y, h = highway_to_road(100.0, 42.5, -math.pi / 2, f)
    assert np.allclose([x, y, h], 0.0, atol=1e-12)
    x, y, _ = highway_to_road(100.0, 32.5, -math.pi / 2, f)  # 10 m further along that heading
    assert np.allclose([x, y], [10.0, 0.0], atol=1e-9)
    g = carla_frame(30.0, -7.0, 45.0)
    x, y, h = carla_to_road(30.0 + math.sqrt(2), -7.0 + math.sqrt(2), 45.0, g)  # 2 m ahead
    assert np.allclose([x, y, h], [2.0, 0.0, 0.0], atol=1e-9)
    x, y, _ = carla_to_road(30.0 + math.sqrt(2), -7.0 - math.sqrt(2), 45.0, g)  # 2 m to the left (CARLA -y side)
    assert np.allclose([x, y], [0.0, 2.0], atol=1e-9)
