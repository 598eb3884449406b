"""Driving: one scenario API over highway-env (embedded default, headless) and CARLA (a client of a
user-run server). Road frame, actions, observations and metrics: base.py and frames.py.

  base.py       DrivingSim protocol, Observation, StepMetrics, actions, errors
  frames.py     road frame ↔ highway-env and CARLA coordinates
  scenario.py   Scenario dataclasses, the named scenarios (SCENARIOS), fast settings
  actors.py     scripted actors: Trajectory, the actors CSV
  behaviors.py  lane-follow, overtake, cut-in, hard-brake behavior models
  control.py    trajectory follower (waypoints → actions), lane keeping, bicycle model
  policies.py   expert (IDM/MOBIL), idle, constant, checkpoint policies
  highway.py    the highway-env backend;  carla.py  the CARLA backend
  runner.py     closed-loop episodes, at most two worker processes;  cli.py  ``embody drive``

Backends load lazily by name (``--sim``), so neither highway-env nor carla is imported before use.
"""

from __future__ import annotations

from embody.registry import Registry

from .base import (
    ACCEL_MAX,
    META_ACTIONS,
    STEER_MAX,
    ActorState,
    DrivingError,
    DrivingSim,
    Observation,
    SimulatorUnavailable,
    StepMetrics,
    StepResult,
    UnsupportedFeature,
    denormalize_action,
    driving_score,
    normalize_action,
)
from .scenario import SCENARIOS, Scenario, fast_settings, get_scenario

DRIVING_SIMS: Registry = Registry("driving simulator")
DRIVING_SIMS.register("highway", "embody.sims.driving.highway:HighwaySim", extra="driving")
DRIVING_SIMS.register("carla", "embody.sims.driving.carla:CarlaSim", extra="driving")


def make_driving_sim(name: str, scenario: Scenario, carla=None, carla_module=None) -> DrivingSim:
    """Build backend ``name`` (highway, carla) playing ``scenario``; ``carla``: a CarlaConfig
    (server address, timeout, map), ``carla_module``: a stand-in for the carla package (tests)."""
    cls = DRIVING_SIMS.get(name)
    if name == "carla":
        return cls(scenario, carla, carla_module=carla_module)
    return cls(scenario)


__all__ = [
    "ACCEL_MAX",
    "DRIVING_SIMS",
    "META_ACTIONS",
    "SCENARIOS",
    "STEER_MAX",
    "ActorState",
    "DrivingError",
    "DrivingSim",
    "Observation",
    "Scenario",
    "SimulatorUnavailable",
    "StepMetrics",
    "StepResult",
    "UnsupportedFeature",
    "denormalize_action",
    "driving_score",
    "fast_settings",
    "get_scenario",
    "make_driving_sim",
    "normalize_action",
]
