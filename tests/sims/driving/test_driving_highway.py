"""The highway-env backend: scripted actors, behavior models, metrics, cloning, actions, the
expert and the trajectory follower."""

import math

import numpy as np
import pytest

pytest.importorskip("highway_env", reason="needs the driving extra")

from embody.sims.driving import get_scenario  # noqa: E402
from embody.sims.driving.actors import Trajectory  # noqa: E402
from embody.sims.driving.control import FollowTrajectory  # noqa: E402
from embody.sims.driving.highway import HighwaySim  # noqa: E402
from embody.sims.driving.scenario import ActorSpec  # noqa: E402

STRAIGHT = np.zeros(2)  # hold speed, wheels straight


def _empty(name="highway", **ego):
    s = get_scenario(name)
    s.traffic.vehicles, s.traffic.merging = 0, 0
    for k, v in ego.items():
        setattr(s.ego, k, v)
    return s


def _actor(sim, name):
    return next(a for a in sim.actors() if a.name == name)


def test_a_scripted_actor_follows_its_waypoints():
    t = np.arange(0.0, 6.01, 0.5)
    y = -8.0 + 2.0 * np.sin(t)  # weaving across lane 2 at 20 m/s
    tr = Trajectory(t, 160.0 + 20.0 * t, y, np.arctan2(2.0 * np.cos(t), 20.0), np.full_like(t, 20.0))
    late = Trajectory([2.0, 4.0], [300.0, 340.0], [0.0, 0.0], [0.0, 0.0], [20.0, 20.0])
    sim = HighwaySim(_empty().with_scripted({"weaver": tr, "late": late}))
    assert [a.name for a in sim.actors()] == ["ego", "weaver"]  # "late" appears at t = 2 s
    worst = 0.0
    for _ in range(30):
        r = sim.step(STRAIGHT)
        a = _actor(sim, "weaver")
        x, y_ref, h, v = tr.at(r.obs.t)
        worst = max(worst, math.hypot(a.x - x, a.y - y_ref), abs(a.heading - h), abs(a.speed - v))
        if r.obs.t >= 2.0:
            assert _actor(sim, "late").x == pytest.approx(late.at(r.obs.t)[0])
    assert worst < 1e-6
    assert _actor(sim, "weaver").x == pytest.approx(160.0 + 20.0 * 6.0)  # past its last waypoint: keeps going


def test_cut_in_ends_in_the_ego_lane_ahead_of_the_ego():
    s = _empty("cut-in")
    s.actors = [
        ActorSpec(
            "cutter", lane=0, dx=-15.0, speed=30.0, behavior="cut-in", params={"speed": 30.0, "trigger_ahead": 4.0}
        )
    ]
    sim = HighwaySim(s)
    lanes = []
    for _ in range(40):  # 8 s at 25 m/s for the ego
        sim.step(STRAIGHT)
        lanes.append(_actor(sim, "cutter").lane)
    ego, cutter = _actor(sim, "ego"), _actor(sim, "cutter")
    assert lanes[0] == 0 and cutter.lane == ego.lane == 1
    assert cutter.x - ego.x > 5.0 and abs(cutter.y - ego.y) < 0.3
    assert not any(a.crashed for a in sim.actors())


def test_hard_brake_decelerates_at_its_rate_to_a_stop():
    s = _empty("hard-brake")
    s.actors[0].params = {"speed": 25.0, "at_time": 1.0, "decel": 6.0}
    s.actors[0].dx = 80.0  # far ahead of the ego
    sim = HighwaySim(s)
    speeds = []
    for _ in range(30):
        r = sim.step("SLOWER")
        speeds.append((r.obs.t, _actor(sim, "braker").speed))
    before = [v for t, v in speeds if t <= 1.0]
    assert all(v == pytest.approx(25.0, abs=0.2) for v in before)
    braking = [(t, v) for t, v in speeds if 1.4 <= t <= 4.0]
    rate = (braking[0][1] - braking[-1][1]) / (braking[-1][0] - braking[0][0])
    assert rate == pytest.approx(6.0, rel=0.05)
    assert speeds[-1][1] == pytest.approx(0.0, abs=1e-6)


def test_overtake_passes_the_ego_and_returns_to_its_lane():
    s = _empty(speed=20.0)
    s.actors = [
        ActorSpec(
            "passer",
            lane=1,
            dx=-30.0,
            speed=28.0,
            behavior="overtake",
            params={"speed": 28.0, "trigger_gap": 40.0, "return_gap": 10.0},
        )
    ]
    sim = HighwaySim(s)
    lanes = []
    for _ in range(60):
        sim.step(STRAIGHT)
        lanes.append(_actor(sim, "passer").lane)
    ego, passer = _actor(sim, "ego"), _actor(sim, "passer")
    assert 0 in lanes and lanes[-1] == 1 == ego.lane  # passed on the left, came back
    assert passer.x - ego.x > 15.0 and not passer.crashed


def test_lane_follow_keeps_lane_and_speed():
    s = _empty()
    s.actors = [ActorSpec("follower", lane=3, dx=20.0, speed=22.0, behavior="lane-follow", params={"speed": 24.0})]
    sim = HighwaySim(s)
    for _ in range(40):
        sim.step(STRAIGHT)
    a = _actor(sim, "follower")
    assert a.lane == 3 and a.y == pytest.approx(-12.0, abs=0.05) and a.speed == pytest.approx(24.0, abs=0.3)


def test_a_forced_collision_is_detected_and_ends_the_episode():
    # a scripted car standing in the ego's lane 30 m ahead; the ego holds 25 m/s
    wall = Trajectory([0.0, 10.0], [180.0, 180.0], [-4.0, -4.0], [0.0, 0.0], [0.0, 0.0])
    sim = HighwaySim(_empty().with_scripted({"wall": wall}))
    for _ in range(20):
        r = sim.step(STRAIGHT)
        if r.done:
            break
    assert r.metrics.collision and r.reason == "collision" and r.done
    assert r.metrics.ttc_s == 0.0 or r.metrics.lead_gap_m <= 0.5
    assert 0.9 < r.obs.t < 1.6  # 25 m of gap at 25 m/s


def test_ttc_is_finite_behind_a_slower_lead_and_infinite_without_one():
    lead = Trajectory([0.0, 20.0], [200.0, 200.0 + 15.0 * 20.0], [-4.0, -4.0], [0.0, 0.0], [15.0, 15.0])
    sim = HighwaySim(_empty().with_scripted({"lead": lead}))
    m = sim.step(STRAIGHT).metrics
    gap = 200.0 + 15.0 * 0.2 - (150.0 + 25.0 * 0.2) - 5.0
    assert m.lead_gap_m == pytest.approx(gap) and m.ttc_s == pytest.approx(gap / 10.0)
    free = HighwaySim(_empty()).step(STRAIGHT).metrics
    assert math.isinf(free.ttc_s) and math.isinf(free.lead_gap_m) and not free.collision


def test_off_road_and_progress():
    sim = HighwaySim(_empty(lane=0))
    m = [sim.step(np.array([0.0, 0.05])).metrics for _ in range(15)]  # steer left, off the leftmost lane
    assert not m[0].off_road and m[-1].off_road
    sim = HighwaySim(_empty())
    for _ in range(10):
        m = sim.step(STRAIGHT).metrics
    assert m.progress_m == pytest.approx(25.0 * 2.0)


def test_clone_then_restore_gives_identical_continuations():
    sim = HighwaySim(get_scenario("highway-dense"))
    for _ in range(5):
        sim.step(sim.expert_action())
    snap = sim.clone_state()

    def branch(actions):
        return np.array([np.concatenate([sim.step(a).obs.flat(), [sim.metrics().progress_m]]) for a in actions])

    plan = [sim.expert_action()] + ["LANE_LEFT", "FASTER"] + [np.array([1.0, 0.01])] * 7
    first = branch(plan)
    sim.restore_state(snap)
    second = branch(plan)
    sim.restore_state(snap)  # a snapshot restores any number of times
    third = branch(plan)
    assert np.array_equal(first, second) and np.array_equal(first, third)
    sim.restore_state(snap)
    assert sim.observe().t == snap.t


def _scene_trace(scenario, steps: int, policy) -> np.ndarray:
    """Every vehicle's whole dynamic state after every control step: position, heading, speed, lane,
    target lane, IDM timer, crashed, the applied action."""
    sim = HighwaySim(scenario)
    rows = []
    for _ in range(steps):
        sim.step(policy(sim))
        for v in sim.world.road.vehicles:
            lane = getattr(v, "target_lane_index", v.lane_index)
            rows.append(
                [*v.position, v.heading, v.speed, v.lane_index[2], lane[2], getattr(v, "timer", 0.0), v.crashed]
                + [float(v.action["steering"]), float(v.action["acceleration"])]
            )
    return np.array(rows, dtype=np.float64)


@pytest.mark.parametrize(
    "name, fast, expert",
    [("highway", False, False), ("highway", True, False), ("highway-dense", False, True), ("merge", False, True)],
)
def test_fast_road_gives_highway_envs_own_results(name, fast, expert):
    """FastRoad's batched act/step against highway-env's own Road loops, bit for bit, on the benchmark
    scenarios (the ego holding its lane, as ``bench driving`` does, or driven by the expert)."""
    import highway_env.road.road as hr

    import embody.sims.driving.highway as ours
    from embody.sims.driving.scenario import fast_settings

    scenario = fast_settings(get_scenario(name)) if fast else get_scenario(name)
    policy = (lambda sim: sim.expert_action()) if expert else (lambda sim: STRAIGHT)
    batched = _scene_trace(scenario, 100, policy)
    saved = {k: ours.FastRoad.__dict__[k] for k in ("act", "step", "neighbour_vehicles")}
    try:
        for k in saved:
            setattr(ours.FastRoad, k, getattr(hr.Road, k))
        plain = _scene_trace(scenario, 100, policy)
    finally:
        for k, v in saved.items():
            setattr(ours.FastRoad, k, v)
    assert batched.shape == plain.shape
    assert np.array_equal(batched, plain)


def test_actions_meta_and_continuous_follow_the_road_frame_signs():
    sim = HighwaySim(_empty())
    for action in ["LANE_LEFT"] + ["IDLE"] * 14:
        r = sim.step(action)
    assert r.obs.ego[1] == pytest.approx(0.0, abs=0.1) and r.info["lane"] == 0  # lane 1 → lane 0: y up by 4
    for _ in range(10):
        r = sim.step("FASTER")
    assert r.obs.ego[3] > 28.0
    sim = HighwaySim(_empty())
    r = sim.step(np.array([2.0, 0.1]))  # accelerate, steer left
    assert r.obs.ego[1] > -4.0 and r.obs.ego[2] > 0.0 and r.obs.ego[3] == pytest.approx(25.4)
    with pytest.raises(ValueError, match="unknown meta-action 'JUMP'"):
        sim.step("JUMP")


def test_observation_image_and_render_are_birds_eye_rgb():
    sim = HighwaySim(_empty())
    obs = sim.observe(image=True)
    assert obs.image.shape == (128, 128, 3) and obs.image.dtype == np.uint8
    ego_green = (obs.image[..., 1] > 150) & (obs.image[..., 0] < 100)
    rows, cols = np.nonzero(ego_green)
    assert len(rows) > 10 and abs(cols.mean() - 64) < 8 and abs(rows.mean() - 64) < 8  # the ego in the centre
    assert sim.render().shape == (240, 640, 3)


def test_expert_drives_the_in_domain_highway_without_collision():
    sim = HighwaySim(get_scenario("highway"))
    steps = 0
    while True:
        r = sim.step(sim.expert_action())
        steps += 1
        if r.done:
            break
    assert r.reason == "time" and steps == 150 and not r.metrics.collision
    assert r.metrics.progress_m > 450.0


def test_the_trajectory_follower_drives_the_ego_through_a_lane_change():
    t = np.arange(0.0, 8.0, 0.2)
    y = -4.0 + 4.0 / (1.0 + np.exp(-2.0 * (t - 3.0)))  # lane 1 → lane 0, ~3 s
    v = 25.0 + 0.5 * t  # while speeding up
    x = 150.0 + 25.0 * t + 0.25 * t**2
    tr = Trajectory(t, x, y, np.arctan2(np.gradient(y, t), v), v)
    sim = HighwaySim(_empty())
    policy, worst = FollowTrajectory(tr), 0.0
    for _ in range(35):
        obs = sim.observe()
        worst = max(worst, math.hypot(*(np.array(tr.at(obs.t)[:2]) - obs.ego[:2])))
        sim.step(policy.act(obs))
    assert worst < 0.5
    assert sim.observe().ego[1] == pytest.approx(0.0, abs=0.2)
