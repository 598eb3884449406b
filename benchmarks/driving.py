"""``embody bench driving``: env-steps/s of our highway-env adapter against raw highway-env, in one run.

All rows drive the in-domain ``highway`` scenario's settings: 4 lanes, 20 IDM/MOBIL background
vehicles, 15 Hz simulation, 5 Hz control (one env step = 3 simulation steps), the ego holding a
constant continuous action (no acceleration, wheels straight).

  raw          highway-env's own ``highway-v0`` gymnasium env with that config (ContinuousAction,
               Kinematics observation, its reward), stepped by ``env.step``: the peer
  ours         HighwaySim on the same scenario: our observation (kinematic features), per-step
               metrics (collision, off-road, progress, TTC), the scenario's actors
  ours+expert  the same, the ego driven by the IDM/MOBIL expert (what behavior cloning records)
  raw-fast     highway-v0 with our fast settings (12 vehicles, 5 Hz simulation, traffic-traffic
               collisions off — highway-env's own "highway-fast-v0" recipe)
  ours-fast    HighwaySim with fast_settings(scenario)
  ours-fast×2  ours-fast episodes on two worker processes (runner.run_episodes): the two workers'
               env-steps/s added up (each measured inside its worker while stepping), and the
               whole call's env-steps/s including process start ("incl. start"); highway-env cannot
               batch, so this is how we use both cores

Traffic placement differs (highway-v0 puts every vehicle ahead of the ego, our scenarios spread
them around it), so vehicle interactions differ slightly; the vehicle count, models and rates match.
Each single-process row is the best of ``--repeats`` timed runs of ``--steps`` steps after a reset; the
rows take turns (raw, ours, ..., raw, ours, ...), so that load drifting during the run reaches all of them.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from embody.commands import nonneg_int, positive_int


class _Row:
    """One timed workload: ``reset`` and ``step`` closures, the best rate seen so far."""

    def __init__(self, reset, step, close):
        self.reset, self.step, self.close, self.best = reset, step, close, 0.0

    def time(self, steps: int) -> None:
        self.reset()
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.best = max(self.best, steps / (time.perf_counter() - start))


def raw_row(scenario, fast: bool) -> _Row:
    """highway-env's own env on ``scenario`` (``fast``: with traffic collisions off, as
    highway-fast-v0). Needs the ``driving`` extra."""
    import gymnasium as gym

    from embody.extras import require

    require("highway_env", "driving")  # registers highway-v0

    s = scenario.settings
    config = {
        "lanes_count": scenario.road.lanes,
        "vehicles_count": scenario.traffic.vehicles,
        "vehicles_density": scenario.traffic.density,
        "simulation_frequency": s.simulation_frequency,
        "policy_frequency": s.policy_frequency,
        "duration": 10**6,
        "action": {"type": "ContinuousAction"},
        "observation": {"type": "Kinematics"},
    }
    env = gym.make("highway-v0", config=config).unwrapped
    if fast:  # what highway-fast-v0 does after placing vehicles
        original = env._create_vehicles

        def create():
            original()
            for v in env.road.vehicles:
                if v not in env.controlled_vehicles:
                    v.check_collisions = False

        env._create_vehicles = create
    action = np.zeros(2)
    seeds = iter(range(10**6))
    return _Row(lambda: env.reset(seed=next(seeds)), lambda: env.step(action), env.close)


def ours_row(scenario, expert: bool = False) -> _Row:
    """embody's ``HighwaySim`` on ``scenario`` (``expert``: the expert's action computed each step too)."""
    from embody.sims.driving.highway import HighwaySim

    sim = HighwaySim(scenario)
    action = np.zeros(2)
    seeds = iter(range(10**6))
    step = (lambda: sim.step(sim.expert_action())) if expert else (lambda: sim.step(action))
    return _Row(lambda: sim.reset(next(seeds)), step, sim.close)


def parallel_rate(scenario, steps: int, episodes: int) -> tuple[float, float]:
    """(env-steps/s summed over the two workers while they step, env-steps/s over the whole call
    including process start)."""
    from embody.sims.driving.runner import EpisodeJob, run_episodes

    job = EpisodeJob(scenario, policy="constant", max_steps=steps)
    start = time.perf_counter()
    results = run_episodes(job, episodes, workers=2)
    wall = time.perf_counter() - start
    stepping = 2 * float(np.mean([r["env_steps_per_s"] for r in results]))
    return stepping, sum(r["steps"] for r in results) / wall


def measure(steps: int, repeats: int, parallel_episodes: int) -> dict:
    """Every row's env-steps/s (``env_steps_per_s``: raw, ours, ours+expert, the fast variants, the
    two-worker rows) and the ratios ours / raw: the results.json dict."""
    from embody.sims.driving.scenario import fast_settings, get_scenario

    scenario = get_scenario("highway")
    scenario.settings.duration_s = 10**6  # never end inside a timed run
    fast = fast_settings(scenario)
    timed = {
        "raw": raw_row(scenario, fast=False),
        "ours": ours_row(scenario),
        "ours+expert": ours_row(scenario, expert=True),
        "raw-fast": raw_row(fast, fast=True),
        "ours-fast": ours_row(fast),
    }
    for _ in range(repeats):  # interleaved, so that a change of machine load reaches every row alike
        for row in timed.values():
            row.time(steps)
    rows = {name: row.best for name, row in timed.items()}
    for row in timed.values():
        row.close()
    if parallel_episodes:
        rows["ours-fast×2"], rows["ours-fast×2 incl. start"] = parallel_rate(fast, steps, parallel_episodes)
    s, f = scenario.settings, fast.settings
    return {
        "cores": os.cpu_count(),
        "steps": steps,
        "repeats": repeats,
        "parallel_episodes": parallel_episodes,
        "scenario": {
            "lanes": scenario.road.lanes,
            "vehicles": scenario.traffic.vehicles,
            "simulation_hz": s.simulation_frequency,
            "policy_hz": s.policy_frequency,
        },
        "fast": {
            "vehicles": fast.traffic.vehicles,
            "simulation_hz": f.simulation_frequency,
            "policy_hz": f.policy_frequency,
            "traffic_collisions": fast.traffic.collisions,
        },
        "env_steps_per_s": rows,
        "ours_over_raw": rows["ours"] / rows["raw"],
        "ours_fast_over_raw": rows["ours-fast"] / rows["raw"],
        "ours_fast_over_raw_fast": rows["ours-fast"] / rows["raw-fast"],
    }


def main(argv: list[str]) -> int:
    """``embody bench driving``: measure, print the table; ``--out DIR`` writes ``results.json``.
    Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench driving", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", type=positive_int, default=150, help="env steps per timed run (150 = a 30 s episode)")
    p.add_argument(
        "--repeats", type=positive_int, default=5, help="timed runs per row, rows taking turns (the best is kept)"
    )
    p.add_argument("--parallel-episodes", type=nonneg_int, default=4, help="episodes for the two-worker row (0: skip)")
    p.add_argument("--quick", action="store_true", help="20 steps, 1 run, no two-worker row: a smoke run")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.parallel_episodes = 20, 1, 0
    result = measure(args.steps, args.repeats, args.parallel_episodes)
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    sc, f = r["scenario"], r["fast"]
    print(
        f"\nembody bench driving: env-steps/s on the highway scenario ({sc['lanes']} lanes, "
        f"{sc['vehicles']} vehicles, {sc['simulation_hz']} Hz simulation, {sc['policy_hz']} Hz control); "
        f"fast: {f['vehicles']} vehicles, {f['simulation_hz']} Hz simulation, no traffic-traffic collisions; "
        f"{r['cores']} cores\n"
    )
    print("| row | env-steps/s | vs raw |\n|---|---|---|")
    raw = r["env_steps_per_s"]["raw"]
    for name, rate in r["env_steps_per_s"].items():
        print(f"| {name} | {rate:.1f} | {rate / raw:.2f} |")
    print(
        f"\nbest of {r['repeats']} runs of {r['steps']} steps; ours-fast×2: two worker processes, "
        f"{r['parallel_episodes']} episodes of {r['steps']} steps (mean rate per worker × 2; and the whole call)"
    )
