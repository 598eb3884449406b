"""The CARLA backend.

Without a CARLA server these tests exercise the adapter against a STAND-IN for the carla module
(driving_carla_standin.py: the client API over a fake straight 3-lane road), not against CARLA:
they check what the adapter asks of the API (synchronous mode, spawning, controls, ticks,
sensors, cleanup) and its frame conversions, not CARLA's physics. The unreachable-server test
uses the real carla client (pip install carla) against a closed loopback port. Set
EMBODY_CARLA=host:port to also run a short episode live against a running server.
"""

import math
import os
import socket
import time

import driving_carla_standin as standin
import numpy as np
import pytest

from embody.sims.driving import DrivingSim, SimulatorUnavailable, UnsupportedFeature, get_scenario, make_driving_sim
from embody.sims.driving.actors import Trajectory
from embody.sims.driving.carla import CarlaConfig, CarlaSim


@pytest.fixture(autouse=True)
def _fresh_standin():
    standin.REACHABLE["ok"] = True
    standin.CALLS.clear()
    yield
    standin.REACHABLE["ok"] = True


def _sim(name="hard-brake", vehicles=0, **cfg):
    s = get_scenario(name)
    s.traffic.vehicles = vehicles
    return make_driving_sim("carla", s, CarlaConfig(timeout_s=1.0, **cfg), carla_module=standin)


def test_stand_in_episode_runs_synchronously_and_cleans_up():
    sim = _sim(vehicles=4)
    assert isinstance(sim, DrivingSim)
    world = sim.world
    assert world.settings.synchronous_mode and world.settings.fixed_delta_seconds == pytest.approx(1 / 15)
    names = {a.name for a in sim.actors()}
    assert {"ego", "braker"} <= names and sum(n.startswith("traffic_") for n in names) == 4
    autopilots = [a for a in world.actors if a.autopilot]
    assert len(autopilots) == 4 and all(a.tm_speed is not None for a in autopilots)
    frame0 = world.frame
    for _ in range(10):
        r = sim.step(sim.expert_action())
    assert world.frame - frame0 == 10 * 3  # 3 ticks per 0.2 s control step at 15 Hz
    assert standin.CALLS.count("apply_control") == 30
    assert r.obs.t == pytest.approx(2.0) and r.metrics.progress_m > 30.0 and not r.metrics.collision
    sim.close()
    assert world.actors == [] and not world.settings.synchronous_mode


def test_stand_in_road_frame_lanes_and_signs():
    sim = _sim()
    obs = sim.observe()
    # the ego spawned in lane 1 (the middle lane, CARLA lane_id -2) at x = ego.x of the scenario
    assert obs.ego[1] == pytest.approx(-3.5) and obs.ego[2] == pytest.approx(0.0) and abs(obs.ego[4]) < 1e-9
    assert obs.ego[0] == pytest.approx(150.0 + 25.0 / 15, abs=1e-6)  # one tick after spawning at 25 m/s
    braker = next(a for a in sim.actors() if a.name == "braker")
    assert braker.lane == 1 and braker.x - obs.ego[0] == pytest.approx(25.0 - 25.0 / 15, abs=1e-6)
    for _ in range(3):
        r = sim.step(np.array([0.0, 0.1]))  # steer left in the road frame
    assert r.obs.ego[1] > -3.5 and r.obs.ego[2] > 0.0 and r.obs.ego[4] > 0.0  # moved left: CARLA y decreased
    ego_actor = sim.ego
    assert ego_actor.control.steer < 0.0  # CARLA: negative steer is left
    sim.close()


def test_stand_in_meta_actions_change_lane():
    sim = _sim()
    sim.step("LANE_LEFT")
    for _ in range(20):
        r = sim.step("IDLE")
    assert r.info["lane"] == 0 and r.obs.ego[1] == pytest.approx(0.0, abs=0.3)
    sim.close()


def test_stand_in_behaviors_scripted_actors_and_collision():
    sim = _sim()
    speeds = []
    for _ in range(25):
        sim.step(np.array([-3.0, 0.0]))  # the ego brakes hard so the braker pulls away
        speeds.append(next(a for a in sim.actors() if a.name == "braker").speed)
    assert speeds[10] == pytest.approx(25.0, abs=0.5) and speeds[-1] < 15.0  # brakes from t = 3 s
    sim.close()
    wall = Trajectory([0.5, 5.0], [175.0, 175.0], [-3.5, -3.5], [0.0, 0.0], [0.0, 0.0])
    s = get_scenario("highway")
    s.traffic.vehicles = 0
    sim = CarlaSim(s.with_scripted({"wall": wall}), CarlaConfig(timeout_s=1.0), carla_module=standin)
    assert "wall" not in {a.name for a in sim.actors()}  # appears at t = 0.5 s
    for _ in range(10):
        r = sim.step(np.zeros(2))
        if r.done:
            break
    assert r.metrics.collision and r.reason == "collision"
    sim.close()


def test_stand_in_clone_restore_and_images():
    sim = _sim()
    for _ in range(3):
        sim.step(sim.expert_action())
    snap = sim.clone_state()
    a = [sim.step(np.array([1.0, 0.05])).obs.flat() for _ in range(4)]
    sim.restore_state(snap)
    b = [sim.step(np.array([1.0, 0.05])).obs.flat() for _ in range(4)]
    assert np.allclose(a, b)  # the stand-in has no hidden physics state; real CARLA is approximate
    assert not sim.exact_clone
    sim.render((64, 48), 2.0)  # the camera is spawned; its first image comes with the next tick
    sim.step(np.zeros(2))
    img = sim.render((64, 48), 2.0)
    assert img.shape == (48, 64, 3) and tuple(img[0, 0]) == (90, 60, 30)  # BGRA → RGB
    sim.close()


def test_roads_other_than_highways_are_refused_clearly():
    with pytest.raises(UnsupportedFeature, match="'merge' roads exist in highway-env only"):
        _sim("merge")


def test_an_absent_stand_in_server_fails_within_the_timeout():
    standin.REACHABLE["ok"] = False
    start = time.monotonic()
    with pytest.raises(SimulatorUnavailable, match=r"no CARLA server answered at 127\.0\.0\.1:2000 within 1 s"):
        _sim()
    assert time.monotonic() - start < 3.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once we leave: nothing listens there


def test_an_unreachable_server_fails_within_the_timeout_with_the_real_client():
    pytest.importorskip("carla", reason="the real carla client is not installed (pip install carla)")
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(SimulatorUnavailable) as e:
        make_driving_sim("carla", get_scenario("highway"), CarlaConfig(port=port, timeout_s=1.0))
    assert time.monotonic() - start < 4.0
    assert f"127.0.0.1:{port}" in str(e.value) and "within 1 s" in str(e.value)


@pytest.mark.skipif(not os.environ.get("EMBODY_CARLA"), reason="live: set EMBODY_CARLA=host:port of a CARLA server")
def test_live_carla_episode():
    pytest.importorskip("carla")
    host, _, port = os.environ["EMBODY_CARLA"].partition(":")
    s = get_scenario("hard-brake")
    s.traffic.vehicles = 2
    sim = make_driving_sim("carla", s, CarlaConfig(host=host, port=int(port or 2000), timeout_s=20.0))
    try:
        for _ in range(10):
            r = sim.step(sim.expert_action())
        assert np.all(np.isfinite(r.obs.flat())) and math.isfinite(r.metrics.progress_m)
        assert r.metrics.progress_m > 10.0
    finally:
        sim.close()
