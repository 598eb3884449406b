"""Trigger generation: attacker behavior parameters refined until the scene satisfies a trigger spec.

The cross-entropy method over the spec's searched attacker parameters θ (``attackers`` in the spec file): each
iteration draws ``population`` θ from a Gaussian (clipped to the ranges), simulates one closed-loop episode per
θ (the ego driven by the expert, or any driving policy; the same scene seed), scores the trace by the spec's
robustness, and refits the Gaussian to the ``elites``. It stops once the best robustness reaches ``margin`` or
after ``iterations``; an unsatisfiable spec ends with the best robustness reached (and ``satisfied`` false).

A trigger is saved as an actors CSV of the attackers' recorded trajectories (``NAME.csv``, the format every
driving backend replays) beside ``NAME.json``: the spec, θ, the robustness, the scene's seed and scenario.
Patches are near-misses: θ perturbed around a trigger's until the robustness is negative, the least negative
kept — scenes that look like the trigger but do not satisfy it.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embody.files import write_atomic
from embody.sims.driving import Scenario
from embody.sims.driving.actors import save_actors_csv

from .spec import SpecError, TriggerSpec
from .traces import Trace, rollout


@dataclass
class RefineConfig:
    """The cross-entropy search (see the module docstring)."""

    population: int = 12
    elites: int = 3
    iterations: int = 8
    margin: float = 0.5  # stop once the robustness reaches this [the spec's units]
    seed: int = 0  # the scene's seed (traffic) and the search's
    policy: str = "expert"  # the ego's driver while triggers are generated
    sim: str = "highway"  # or carla: the same behavior models, on a CARLA server
    carla: Any = None  # a CarlaConfig (server address, timeout, map) for sim carla
    carla_module: Any = None  # a stand-in for the carla package (tests: no server here)


@dataclass
class Trigger:
    """A generated scene: θ per "attacker.key", its robustness and trace; ``evaluations``: episodes simulated."""

    spec: str
    theta: dict[str, float]
    robustness: float
    satisfied: bool
    seed: int
    scenario: str
    evaluations: int = 0
    trace: Trace | None = field(default=None, repr=False)


def scene(spec: TriggerSpec, base: Scenario, theta: dict[str, float]) -> Scenario:
    """``base`` with the spec's attackers placed and parameterized by ``theta`` ("attacker.key": value)."""
    s = copy.deepcopy(base)
    names = {a.name for a in spec.attackers}
    s.actors = [a for a in s.actors if a.name not in names]
    for a in spec.attackers:
        mine = {k.split(".", 1)[1]: v for k, v in theta.items() if k.split(".", 1)[0] == a.name}
        s.actors.append(a.actor(mine))
    return s


def evaluate(spec: TriggerSpec, base: Scenario, theta: dict[str, float], cfg: RefineConfig) -> tuple[float, Trace]:
    """The robustness of the scene at ``theta`` and its trace."""
    trace = rollout(
        scene(spec, base, theta), cfg.seed, cfg.policy, cfg.sim, carla=cfg.carla, carla_module=cfg.carla_module
    )
    return spec.robustness(trace.signals(spec.actors)), trace


def search_space(spec: TriggerSpec) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names ("attacker.key"), lower and upper bounds of every searched parameter."""
    if not spec.attackers:
        raise SpecError(f"{spec.source}: no attackers section: nothing to generate the trigger with")
    keys = [(a.name, k, lo, hi) for a in spec.attackers for k, (lo, hi) in a.ranges.items()]
    return [f"{a}.{k}" for a, k, _, _ in keys], np.array([k[2] for k in keys]), np.array([k[3] for k in keys])


def refine(spec: TriggerSpec, base: Scenario, cfg: RefineConfig, log=lambda msg: None) -> Trigger:
    """The cross-entropy search for a scene satisfying ``spec`` by ``cfg.margin``."""
    names, lo, hi = search_space(spec)
    rng = np.random.default_rng(cfg.seed)
    mean, std = (lo + hi) / 2, (hi - lo) / 4
    best: tuple[float, dict, Trace | None] = (-np.inf, {}, None)
    evaluations = 0
    for it in range(cfg.iterations):
        samples = np.clip(rng.normal(mean, std, (cfg.population, len(names))), lo, hi)
        scores = []
        for x in samples:
            theta = dict(zip(names, map(float, x)))
            r, trace = evaluate(spec, base, theta, cfg)
            evaluations += 1
            scores.append(r)
            if r > best[0]:
                best = (r, theta, trace)
        elite = samples[np.argsort(scores)[-cfg.elites :]]
        mean, std = elite.mean(0), np.maximum(elite.std(0), 0.02 * (hi - lo))
        log(f"{spec.name}: iteration {it + 1}, best robustness {best[0]:.3f} (margin {cfg.margin:g})")
        if best[0] >= cfg.margin:
            break
    r, theta, trace = best
    return Trigger(spec.name, theta, r, r >= cfg.margin, cfg.seed, base.name, evaluations, trace)


def patches(
    spec: TriggerSpec, base: Scenario, trigger: Trigger, cfg: RefineConfig, count: int = 2, tries: int = 12
) -> list[Trigger]:
    """Near-misses of ``trigger``: θ perturbed (a tenth of each range, growing) until the robustness is negative;
    the ``count`` least negative of ``tries`` draws."""
    names, lo, hi = search_space(spec)
    rng = np.random.default_rng(cfg.seed + 1)
    x0 = np.array([trigger.theta[n] for n in names])
    found = []
    for i in range(tries):
        x = np.clip(x0 + rng.normal(0, (0.1 + 0.05 * i) * (hi - lo)), lo, hi)
        theta = dict(zip(names, map(float, x)))
        r, trace = evaluate(spec, base, theta, cfg)
        if r < 0:
            found.append(Trigger(spec.name, theta, r, False, cfg.seed, base.name, 1, trace))
    return sorted(found, key=lambda p: -p.robustness)[:count]


def save_trigger(trigger: Trigger, spec: TriggerSpec, out: Path, name: str) -> Path:
    """``out/NAME.csv`` (the attackers' trajectories) and ``out/NAME.json`` (θ, robustness, seed, spec)."""
    out.mkdir(parents=True, exist_ok=True)
    save_actors_csv(out / f"{name}.csv", trigger.trace.trajectories(spec.actors))
    meta = {
        k: getattr(trigger, k) for k in ("spec", "theta", "robustness", "satisfied", "seed", "scenario", "evaluations")
    }
    meta.update(spec_file=spec.source, formula=spec.formula, actors=list(spec.actors), dt=spec.dt)
    write_atomic(out / f"{name}.json", json.dumps(meta, indent=2))
    return out / f"{name}.csv"
