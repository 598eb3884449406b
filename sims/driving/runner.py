"""Closed-loop driving episodes, spread over at most two worker processes.

highway-env is a pure-Python loop per vehicle, so it cannot be batched like the physics
simulators; instead independent episodes run in parallel processes — at most two, because
these machines have two cores and a third process only adds switching. Each worker builds its
own simulator and policy from an EpisodeJob (our own config objects cross the process boundary
through multiprocessing's pickling; nothing user-supplied is unpickled, nothing pickled is
stored). CARLA episodes run one after another in this process: one server, one client.
"""

from __future__ import annotations

import copy
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from .base import StepMetrics, summarize
from .scenario import Scenario

MAX_WORKERS = 2


@dataclass
class EpisodeJob:
    """One closed-loop episode to run: a scenario in a sim (``highway`` or ``carla``) driven by a policy."""

    scenario: Scenario
    sim: str = "highway"
    policy: str = "expert"  # expert, idle, constant or a checkpoint path (policies.make_policy)
    seed: int = 0
    max_steps: int | None = None  # None: until the scenario's duration, a collision or the road's end
    video: str | None = None  # an MP4 of this episode
    carla: object | None = None  # a carla.CarlaConfig


def run_episode(job: EpisodeJob, sim=None, keep_steps: bool = False) -> dict:
    """One episode; returns its summarize() dict plus seed, wall time and env-steps/s
    (and the per-step metrics as dicts when ``keep_steps``)."""
    from . import make_driving_sim
    from .policies import make_policy

    own = sim is None
    sim = sim or make_driving_sim(job.sim, job.scenario, job.carla)
    try:
        obs = sim.reset(job.seed)
        policy = make_policy(job.policy, sim)
        policy.reset()
        steps: list[StepMetrics] = []
        reason = "max_steps"
        writer = None
        if job.video:
            from embody.video import VideoWriter

            writer = VideoWriter(Path(job.video), fps=job.scenario.settings.policy_frequency)
            writer.write(sim.render())
        start = time.perf_counter()
        try:
            while job.max_steps is None or len(steps) < job.max_steps:
                result = sim.step(policy.act(obs))
                obs = result.obs
                steps.append(result.metrics)
                if writer is not None:
                    writer.write(sim.render())
                if result.done:
                    reason = result.reason
                    break
        finally:
            if writer is not None:
                writer.close()
        wall = time.perf_counter() - start
        out = {
            "seed": job.seed,
            **summarize(steps, reason),
            "wall_s": round(wall, 3),
            "env_steps_per_s": round(len(steps) / wall, 2) if wall > 0 else None,
        }
        if job.video:
            out["video"] = str(job.video)
        if keep_steps:
            out["per_step"] = [vars(s) for s in steps]
        return out
    finally:
        if own:
            sim.close()


def run_episodes(job: EpisodeJob, episodes: int, workers: int = MAX_WORKERS) -> list[dict]:
    """``episodes`` episodes with seeds job.seed, job.seed + 1, ...; a video (if asked) of the first only."""
    jobs = [replace(job, seed=job.seed + i, video=job.video if i == 0 else None) for i in range(episodes)]
    workers = max(1, min(int(workers), MAX_WORKERS, episodes))
    if workers == 1 or job.sim == "carla":
        return [run_episode(j) for j in jobs]
    context = multiprocessing.get_context("spawn")  # no forked copies of torch/pygame state
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(run_episode, [copy.deepcopy(j) for j in jobs]))


def aggregate(results: list[dict]) -> dict:
    """Across episodes: collision rate, off-road rate, mean progress, worst TTC, throughput."""
    n = len(results)
    if n == 0:
        return {"episodes": 0}
    ttcs = [r["min_ttc_s"] for r in results if r.get("min_ttc_s") is not None]
    steps = sum(r["steps"] for r in results)
    wall = sum(r["wall_s"] for r in results)
    return {
        "episodes": n,
        "collision_rate": sum(bool(r.get("collision")) for r in results) / n,
        "off_road_rate": sum(r.get("off_road_steps", 0) > 0 for r in results) / n,
        "mean_progress_m": round(sum(r.get("progress_m") or 0.0 for r in results) / n, 3),
        "min_ttc_s": min(ttcs) if ttcs else None,
        "env_steps": steps,
        "env_steps_per_s_per_worker": round(steps / wall, 2) if wall > 0 else None,
    }
