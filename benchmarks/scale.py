"""``embody bench scale``: PPO's env-steps/s with 1, 2 and 4 Ray rollout workers against the single-process path.

Two workloads, each with its task's default PPO settings and the same total envs on every row:

  pybullet  h1_2-velocity on PyBullet (16 envs): the simulator steps its envs in a Python loop, one core
  mujoco    h1_2-velocity on MuJoCo (256 envs): batched C stepping on the adapter's threads

Rows: ``single`` (``embody train`` without ``--workers``), then N workers on a Ray instance started on this machine
(each worker reserves min(1, cores / N) CPUs, so 4 workers share 2 cores). Each row runs ``--iterations`` PPO
iterations after one warm-up iteration (worker start-up and first-step compilation excluded) and reports env-steps/s
over them. Per-iteration overhead of the Ray path = the learner's wait for the rollout − the slowest worker's own
rollout time (weights out, trajectories back, Ray scheduling).
"""

from __future__ import annotations

import argparse
import os

from embody.commands import positive_int

WORKLOADS = {"pybullet": ("h1_2-velocity", "pybullet", 16), "mujoco": ("h1_2-velocity", "mujoco", 256)}


def measure_row(task: str, sim: str, n_envs: int, workers: int, iterations: int) -> dict:
    """PPO env-steps/s over ``iterations`` after a warm-up one; with ``workers``: Ray's per-iteration overhead [s]."""
    import numpy as np
    import torch

    from embody.policies.actor_critic import ActorCritic
    from embody.policies.ppo import PPO
    from embody.runs import build_env
    from embody.train import resolve_config

    cores = os.cpu_count() or 1
    cfg = resolve_config(task, sim=sim, n_envs=n_envs, workers=workers, worker_cpus=min(1.0, cores / max(workers, 1)))
    torch.manual_seed(0)
    torch.set_num_threads(cfg.torch_threads)
    env = build_env(cfg, n_envs=1 if workers else None)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    pool = None
    if workers:
        from embody.scale import RolloutWorkers

        pool = RolloutWorkers(cfg, policy.init_kwargs(), workers, None, cfg.worker_cpus)
    ppo = PPO(env, policy, cfg.ppo, update_threads=cores, mirror=env.task.mirror(), workers=pool)
    rows: list[dict] = []
    ppo.learn(cfg.ppo.n_steps * n_envs * (iterations + 1), rows.append)
    first, last = rows[0], rows[-1]
    result = {
        "env_steps_per_s": (last["env_steps"] - first["env_steps"]) / (last["time_s"] - first["time_s"]),
        "update_s_per_iteration": (last["time/update_s"] - first["time/update_s"]) / iterations,
    }
    if pool is not None:
        waits = np.diff([r["time/collect_s"] for r in rows])
        result["ray_overhead_s_per_iteration"] = float(np.mean(waits - [r["time/worker_s"] for r in rows[1:]]))
        pool.close()
    env.close()
    return result


def measure(workloads: list[str], workers: list[int], iterations: int, envs: int | None = None) -> dict:
    """Every workload's rows (single, then each worker count) and their ratios to single: the results.json dict.
    ``envs`` replaces the workloads' env counts. Stops the Ray instance it started."""
    out: dict = {"cores": os.cpu_count(), "iterations": iterations, "workloads": {}}
    for name in workloads:
        task, sim, n_envs = WORKLOADS[name]
        n_envs = envs or n_envs
        rows = {"single": measure_row(task, sim, n_envs, 0, iterations)}
        for n in workers:
            rows[f"{n} workers"] = measure_row(task, sim, n_envs, n, iterations)
        base = rows["single"]["env_steps_per_s"]
        for row in rows.values():
            row["vs_single"] = row["env_steps_per_s"] / base
        out["workloads"][name] = {"task": task, "sim": sim, "n_envs": n_envs, "rows": rows}
    if workers:
        import ray

        ray.shutdown()
    return out


def main(argv: list[str]) -> int:
    """``embody bench scale``: measure, print the table; ``--out DIR`` writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS))
    p.add_argument("--workers", nargs="+", type=positive_int, default=[1, 2, 4], help="worker counts to time")
    p.add_argument("--iterations", type=positive_int, default=4, help="timed PPO iterations per row")
    p.add_argument("--envs", type=positive_int, help="total envs of every row (default: the workload's)")
    p.add_argument("--quick", action="store_true", help="mujoco, 16 envs, 1 and 2 workers, 1 iteration: a smoke run")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    if args.quick:
        args.workloads, args.workers, args.iterations, args.envs = ["mujoco"], [1, 2], 1, 16
    result = measure(args.workloads, args.workers, args.iterations, args.envs)
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    print(f"\nembody bench scale: PPO env-steps/s, {r['iterations']} iterations per row, {r['cores']} cores\n")
    print("| workload | envs | row | env-steps/s | vs single | Ray overhead per iteration |\n|---|---|---|---|---|---|")
    for name, w in r["workloads"].items():
        for row_name, row in w["rows"].items():
            overhead = row.get("ray_overhead_s_per_iteration")
            cell = f"{overhead * 1000:.0f} ms" if overhead is not None else "—"
            print(
                f"| {name} ({w['task']}) | {w['n_envs']} | {row_name} | {row['env_steps_per_s']:,.0f} "
                f"| {row['vs_single']:.2f} | {cell} |"
            )
