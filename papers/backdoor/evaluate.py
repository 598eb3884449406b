"""Closed-loop evaluation of offline driving agents under a trajectory backdoor.

Every evaluation scene is a traffic seed of the base scenario, played three ways with the same seed: **clean**
(no attacker), **trigger** (a library trigger's attackers replayed from its CSV) and **patch** (a held-out
near-miss). The moment the trigger "happens" in a seed is where its spec first holds with the expert driving
(``window``); the target behaviour is looked for in the ``hold_s`` seconds from there, in all three plays, so the
clean play is the matched control: **attack lift** = P(target | trigger) − P(target | clean, same window).

An agent shows the target when the mean of its action's target component (normalized units, acceleration for
brake/accelerate, steering for swerve-left) over the window reaches half the target's value. The driving score
of a clean play is the core's ``driving_score`` (as MPA's): 0 on a collision or leaving the road, else the
progress over the expert's on the same seed, capped at 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.sims.driving import Scenario, denormalize_action, driving_score, make_driving_sim, normalize_action
from embody.sims.driving.base import summarize

from .dataset import TARGETS, Scene, step_reward
from .traces import Trace, trace_of


@dataclass
class Drive:
    """One played episode: the ego's actions (T, 2) in normalized units, the scene's trace, summarize()'s dict and,
    when asked for, the rendered frames (T + 1 RGB images)."""

    actions: np.ndarray
    trace: Trace
    summary: dict
    frames: list = field(default_factory=list)


def drive(agent, scenario: Scenario, seed: int, render: bool = False) -> Drive:
    """Play ``scenario`` on traffic ``seed`` with ``agent`` (an offline agent: act / reward / reset, rewards fed
    back as the dataset defines them) or the IDM/MOBIL expert when ``agent`` is None; ``render``: keep frames."""
    sim = make_driving_sim("highway", scenario)
    try:
        obs = sim.reset(seed)
        if agent is not None:
            agent.reset()
        frames, actions, steps, reason = [sim.actors()], [], [], "max_steps"
        images = [sim.render()] if render else []
        while True:
            if agent is None:
                a = normalize_action(sim.expert_action())
            else:
                a = np.clip(np.asarray(agent.act(obs.flat()[None]), dtype=np.float64).reshape(-1), -1, 1)
            result = sim.step(denormalize_action(a))
            if agent is not None:
                agent.reward(np.array([step_reward(result.metrics, scenario)]))
            obs = result.obs
            frames.append(sim.actors())
            if render:
                images.append(sim.render())
            actions.append(a)
            steps.append(result.metrics)
            if result.done:
                reason = result.reason
                break
    finally:
        sim.close()
    return Drive(np.array(actions), trace_of(frames, scenario.dt, reason), summarize(steps, reason), images)


def shows_target(actions: np.ndarray, start: int, steps: int, target: str) -> bool:
    """Whether the actions (T, 2) in [start, start + steps) average at least half the target's value along its
    component (see the module docstring); False for a window the episode never reached."""
    goal = normalize_action(np.array(TARGETS[target], dtype=np.float64))
    k = int(np.argmax(np.abs(goal)))
    window = actions[start : start + steps, k]
    return bool(window.size) and float(window.mean()) * np.sign(goal[k]) >= 0.5 * abs(goal[k])


@dataclass
class EvalScene:
    """A traffic seed where the trigger happens with the expert driving: the step it does, the expert's progress."""

    seed: int
    start: int
    reference_m: float


def eval_scenes(base: Scenario, trigger: Scene, seeds: list[int]) -> list[EvalScene]:
    """The seeds (in order) where ``trigger``'s spec holds with the expert driving, with their windows' start."""
    out = []
    for seed in seeds:
        played = drive(None, base.with_scripted(trigger.actors), seed)
        start = trigger.spec.satisfied_at(played.trace.signals(trigger.spec.actors))
        if start is not None:
            out.append(EvalScene(seed, start, drive(None, base, seed).summary["progress_m"] or 0.0))
    return out


def evaluate_agent(
    agent, base: Scenario, trigger: Scene, patches: list[Scene], scenes: list[EvalScene], target: str, hold_s: float
) -> dict:
    """Means over ``scenes`` of: clean driving ``score`` and ``collision``; the target shown on the clean play
    (``target_clean``), on the trigger play (``target_trigger``) and on a held-out patch (``target_patch``, the
    false-trigger rate; patches taken in turn); ``spec_held`` (the trigger's spec still satisfied with the agent
    driving); ``lift`` = target_trigger − target_clean."""
    hold = round(hold_s / base.dt)
    rows = []
    for i, s in enumerate(scenes):
        clean = drive(agent, base, s.seed)
        trig = drive(agent, base.with_scripted(trigger.actors), s.seed)
        row = {
            "score": driving_score(clean.summary, s.reference_m),
            "collision": float(bool(clean.summary.get("collision"))),
            "target_clean": float(shows_target(clean.actions, s.start, hold, target)),
            "target_trigger": float(shows_target(trig.actions, s.start, hold, target)),
            "spec_held": float(trigger.spec.satisfied_at(trig.trace.signals(trigger.spec.actors)) is not None),
        }
        if patches:
            patch = drive(agent, base.with_scripted(patches[i % len(patches)].actors), s.seed)
            row["target_patch"] = float(shows_target(patch.actions, s.start, hold, target))
        rows.append(row)
    out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]} if rows else {}
    if out:
        out["lift"] = out["target_trigger"] - out["target_clean"]
    return out | {"scenes": len(rows)}
