"""The scenario registry, its errors, overrides, behavior-model parameters, and a contract test:
every named scenario builds in highway-env and steps without NaN."""

import numpy as np
import pytest

from embody.config import ConfigError, apply_overrides
from embody.registry import UnknownName
from embody.sims.driving import SCENARIOS, fast_settings, get_scenario
from embody.sims.driving.base import DrivingError
from embody.sims.driving.behaviors import BEHAVIORS, make_behavior

NAMES = ["cut-in", "hard-brake", "highway", "highway-dense", "merge", "roundabout"]


def test_the_named_scenarios_are_registered():
    assert SCENARIOS.names() == NAMES


def test_an_unknown_scenario_lists_the_valid_ones():
    with pytest.raises(UnknownName) as e:
        get_scenario("autobahn")
    assert str(e.value) == f"unknown scenario 'autobahn'; valid: {', '.join(NAMES)}"


def test_each_call_gives_a_fresh_copy_and_overrides_are_checked():
    a = get_scenario("highway")
    apply_overrides(a, texts=["traffic.vehicles=3", "settings.duration_s=5"])
    assert (a.traffic.vehicles, a.settings.duration_s) == (3, 5.0)
    assert get_scenario("highway").traffic.vehicles == 20
    with pytest.raises(ConfigError, match="unknown config key 'traffic.cars'"):
        apply_overrides(a, texts=["traffic.cars=3"])
    with pytest.raises(ConfigError, match="not one of"):
        apply_overrides(a, texts=["road.kind=autobahn"])


def test_fast_settings_trade_fidelity_for_speed_and_say_so_in_the_name():
    f = fast_settings(get_scenario("highway-dense"))
    assert f.traffic.vehicles == 12 and not f.traffic.collisions and f.name == "highway-dense+fast"
    assert f.settings.simulation_frequency == f.settings.policy_frequency


def test_behavior_parameters_are_checked_by_name():
    assert sorted(BEHAVIORS) == ["cut-in", "hard-brake", "lane-follow", "overtake"]
    assert make_behavior("hard-brake", {"decel": 9.0}).decel == 9.0
    with pytest.raises(
        DrivingError, match="unknown behavior 'swerve'; valid: cut-in, hard-brake, lane-follow, overtake"
    ):
        make_behavior("swerve")
    with pytest.raises(DrivingError, match="unknown parameter.*brake_force; valid: speed, at_time, decel"):
        make_behavior("hard-brake", {"brake_force": 3})


@pytest.mark.parametrize("name", NAMES)
def test_every_scenario_builds_and_steps_in_highway_env(name):
    pytest.importorskip("highway_env", reason="needs the driving extra")
    from embody.sims.driving import DrivingSim
    from embody.sims.driving.highway import HighwaySim

    sim = HighwaySim(get_scenario(name))
    assert isinstance(sim, DrivingSim)
    obs = sim.reset(seed=1)
    k = sim.scenario.settings.obs_vehicles
    assert obs.ego.shape == (6,) and obs.others.shape == (k, 7) and obs.flat().shape == (6 + 7 * k,)
    for _ in range(3):
        r = sim.step(sim.expert_action())
    assert np.all(np.isfinite(r.obs.flat())) and r.obs.t == pytest.approx(0.6)
    assert r.obs.others[:, 0].sum() >= 1  # someone is around
    assert np.isfinite(r.metrics.progress_m) and r.metrics.progress_m > 0


def test_a_bad_ego_lane_is_refused_with_the_scenario_named():
    pytest.importorskip("highway_env", reason="needs the driving extra")
    from embody.sims.driving.highway import HighwaySim

    s = get_scenario("cut-in")
    s.ego.lane = 5
    with pytest.raises(DrivingError, match="scenario 'cut-in': ego lane 5 outside 0..2"):
        HighwaySim(s)
