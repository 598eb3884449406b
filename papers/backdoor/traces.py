"""Multi-vehicle traces: closed-loop driving episodes recorded as the signals trigger specs are written over.

A trace is the scene at every control step, the reset state included: each named actor's road-frame pose and
speed. ``signals`` turns it into the spec's signals relative to the ego; ``trajectories`` into the scripted
actors of the actors CSV, so that a generated trigger replays without its behavior models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from embody.sims.driving import ActorState, Scenario, fast_settings, get_scenario, make_driving_sim

ABSENT_M = 1000.0  # an actor not (yet) in the scene reads as this far ahead and to the left


def empty_scene(name: str, duration_s: float | None = None, fast: bool = True) -> Scenario:
    """Scenario ``name`` without its scripted actors (attackers join it), with the fast simulator settings unless
    ``fast`` is False, and ``duration_s`` when given."""
    base = get_scenario(name)
    base = fast_settings(base) if fast else base
    base.actors = []
    if duration_s is not None:
        base.settings.duration_s = duration_s
    return base


@dataclass
class Trace:
    """``t`` (T,) [s] and, per actor name (the ego as "ego"), rows (T, 4) of x, y, heading, speed (NaN while the
    actor is absent); ``ended_by``: how the episode ended."""

    t: np.ndarray
    states: dict[str, np.ndarray]
    ended_by: str = ""

    def signals(self, actors: tuple[str, ...]) -> dict[str, np.ndarray]:
        """{``ACTOR_SIGNAL``: (T,)}: dx, dy [m] and dv [m/s] relative to the ego, and speed [m/s]."""
        ego, out = self.states["ego"], {}
        for a in actors:
            s = self.states.get(a, np.full_like(ego, np.nan))
            absent = np.isnan(s[:, 0])
            out[f"{a}_dx"] = np.where(absent, ABSENT_M, s[:, 0] - ego[:, 0])
            out[f"{a}_dy"] = np.where(absent, ABSENT_M, s[:, 1] - ego[:, 1])
            out[f"{a}_speed"] = np.where(absent, 0.0, s[:, 3])
            out[f"{a}_dv"] = np.where(absent, 0.0, s[:, 3] - ego[:, 3])
        return out

    def trajectories(self, actors: tuple[str, ...]) -> dict:
        """{actor: Trajectory} of the actors' recorded waypoints (from when each appears), for the actors CSV."""
        from embody.sims.driving.actors import Trajectory

        out = {}
        for a in actors:
            s = self.states[a]
            keep = ~np.isnan(s[:, 0])
            out[a] = Trajectory(self.t[keep], s[keep, 0], s[keep, 1], s[keep, 2], s[keep, 3])
        return out


def rollout(
    scenario: Scenario,
    seed: int,
    policy: str = "expert",
    sim: str = "highway",
    steps: int | None = None,
    carla=None,
    carla_module=None,
) -> Trace:
    """One closed-loop episode of ``scenario`` (its duration, or ``steps`` control steps) in driving backend ``sim``
    (``carla``: its CarlaConfig; ``carla_module``: a stand-in for the carla package), the ego driven by
    ``policy`` (expert, idle, constant or a run directory), recorded as a Trace."""
    from embody.sims.driving.policies import make_policy

    env = make_driving_sim(sim, scenario, carla, carla_module)
    try:
        obs = env.reset(seed)
        driver = make_policy(policy, env)
        driver.reset()
        frames, reason = [env.actors()], "max_steps"
        while steps is None or len(frames) <= steps:
            result = env.step(driver.act(obs))
            obs = result.obs
            frames.append(env.actors())
            if result.done:
                reason = result.reason
                break
    finally:
        env.close()
    return trace_of(frames, scenario.dt, reason)


def trace_of(frames: list[list[ActorState]], dt: float, reason: str = "") -> Trace:
    """A Trace from the scene at successive control steps (``dt`` apart), each a list of actors, the ego's kind "ego"."""
    names = {a.name if a.kind != "ego" else "ego" for frame in frames for a in frame}
    states = {n: np.full((len(frames), 4), np.nan) for n in names}
    for i, frame in enumerate(frames):
        for a in frame:
            states["ego" if a.kind == "ego" else a.name][i] = (a.x, a.y, a.heading, a.speed)
    return Trace(np.arange(len(frames)) * dt, states, reason)
