"""``embody bench tasks``: env-steps/s of every task on every installed simulator.

Each task runs with its default config (domain randomization included) at ``--envs`` envs
under uniform random actions, resets included. Its peer is the same simulator stepping the
same robot, batch and decimation with the task's first commands and no task code around it
(physics only), measured in the same run: "task / physics" is the share of the simulator's
speed that survives observations, rewards, resets and randomization (1.0: no overhead).
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def _rate(step, steps: int, n_envs: int) -> float:
    from embody.benchmarks import best_seconds

    return n_envs / best_seconds(step, steps)


def measure(task: str, sim: str, n_envs: int, steps: int) -> dict:
    """``task`` on ``sim``: ``env_steps_per_s``, ``physics_only_per_s`` and their ``ratio``; or, when the
    simulator cannot run the task, ``unsupported`` with the reason."""
    from embody.sims.base import ModelError, UnsupportedTask
    from embody.sims.vec_env import make_env

    try:
        env = make_env(task, sim, n_envs=n_envs, seed=0)
    except (UnsupportedTask, ModelError) as e:  # a capability, or a model the engine cannot load
        return {"task": task, "sim": sim, "envs": n_envs, "unsupported": str(e)}
    rng = np.random.default_rng(0)
    env.reset()
    actions = rng.uniform(-1, 1, (steps, n_envs, env.action_size))
    i = iter(range(10**9))
    env_rate = _rate(lambda: env.step(actions[next(i) % steps]), steps, n_envs)
    command = env.task.action_to_command(actions[0])
    physics_rate = _rate(lambda: env.sim.step(command), steps, n_envs)
    env.close()
    return {
        "task": task,
        "sim": sim,
        "envs": n_envs,
        "env_steps_per_s": env_rate,
        "physics_only_per_s": physics_rate,
        "ratio": env_rate / physics_rate,
    }


def main(argv: list[str]) -> int:
    """``embody bench tasks``: every task (or ``--task``) on every installed simulator (or ``--sim``), printed
    as a Markdown table; ``--out DIR`` writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results
    from embody.sims import installed_simulators
    from embody.sims.tasks import TASKS

    p = argparse.ArgumentParser(
        prog="embody bench tasks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", nargs="*", default=None, help="tasks (default: all registered)")
    p.add_argument("--sim", nargs="*", default=None, help="simulators (default: all installed)")
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--steps", type=int, default=50, help="control steps per repetition (best of 3)")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    tasks = args.task or sorted(TASKS.names())
    sims = args.sim or installed_simulators()
    rows = []
    for task in tasks:
        for sim in sims:
            rows.append(measure(task, sim, args.envs, args.steps))
            r = rows[-1]
            print(
                f"  {task} on {sim}: "
                + (f"{r['env_steps_per_s']:,.0f} env-steps/s" if "ratio" in r else "unsupported"),
                flush=True,
            )
    print(f"\nembody bench tasks: {args.envs} envs, random actions, {os.cpu_count()} cores")
    print("| task | sim | env-steps/s | physics only | task / physics |\n|---|---|---|---|---|")
    for r in rows:
        if "unsupported" in r:
            print(f"| {r['task']} | {r['sim']} | unsupported: {r['unsupported']} | | |")
        else:
            print(
                f"| {r['task']} | {r['sim']} | {r['env_steps_per_s']:,.0f} | {r['physics_only_per_s']:,.0f} | "
                f"{r['ratio']:.2f} |"
            )
    save_results(args.out, rows)
    return 0
