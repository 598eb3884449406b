"""``embody bench learning``: PPO with a task's default config, several seeds, against the task's bar.

For each seed: train within a wall-clock budget, then evaluate the final policy
deterministically. A uniform random policy is evaluated on the same env (same config, same
evaluation seed) as the baseline. Bars (each task's ``learning_bar``; any task with one, plugins' too):

* return  — eval return ≥ frac × the task's maximum return (cartpole-swingup: 70 %);
* length  — eval mean episode length ≥ ratio × the random policy's (H1-2 tasks: 5×);
* success — eval success rate ≥ frac (arm-reach: 90 %);
* tracking — eval linear-velocity error ≤ 0.25 m/s, yaw-rate error ≤ 0.3 rad/s and ≥ 95 % of
  episodes without a fall (h1_2-velocity).

Training speed is printed against the raw physics of the same env in the same run: the bare
``mujoco.rollout`` over the same model, batch, threads and decimation, holding the default pose
(so the learner's whole overhead — task code, policy, PPO update — shows as the ratio), with a breakdown of
the milliseconds per 1,000 env steps into raw physics, the rest of the rollout and the PPO update; a task's
``rollout_variants`` (a frozen policy driving part of the robot, or not) are timed against each other. Snapshots
at ``--at`` minutes (default 10, 20, 30, within the budget) are evaluated too, so that a
task's tracking error and survival show against wall-clock.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from embody.commands import nonneg_int, positive_float, positive_int

EVAL_EPISODES = 20


def bars() -> dict[str, tuple]:
    """task -> its ``learning_bar``, for every registered task (plugins' too) that has one."""
    from embody.sims.tasks import TASKS

    return {name: TASKS.get(name).learning_bar for name in TASKS.names() if TASKS.get(name).learning_bar}


def random_baseline(task: str, overrides: list[str]) -> dict:
    """Deterministic-seed evaluation of uniform random actions on the task's default env."""
    from embody.policies.base import RandomPolicy
    from embody.policies.evaluate import evaluate
    from embody.runs import build_env
    from embody.train import resolve_config

    env = build_env(resolve_config(task, overrides=overrides), n_envs=16, seed=12345, evaluation=True)
    result = evaluate(env, RandomPolicy(env.observation_size, env.action_size), EVAL_EPISODES)
    env.close()
    return result.summary(env.task.max_episode_return)


def run_seed(
    task: str,
    seed: int,
    budget_s: float,
    steps: int | None,
    overrides: list[str],
    keep: Path | None,
    evaluate_only: bool = False,
    snapshots_s: list[float] = (),
) -> dict:
    """Train (or, with ``evaluate_only``, re-evaluate the kept run) one seed within ``budget_s``. Returns
    ``seed``, ``train_s``, ``env_steps``, ``steps_per_s``, ``eval`` (the evaluation summary), ``snapshots``
    ({minutes: evaluation summary} of the snapshots at ``snapshots_s``), ``run`` (its folder when kept,
    else None) and ``metrics`` (every training row)."""
    from embody.train import evaluate_run, resolve_config, snapshot_name, train

    cfg = resolve_config(task, overrides=overrides, seed=seed, steps=steps)
    cfg.eval_episodes, cfg.max_time_s, cfg.snapshots_s = EVAL_EPISODES, budget_s, list(snapshots_s)
    cfg.video = keep is not None
    with tempfile.TemporaryDirectory() as tmp:
        out = (keep / f"seed{seed}") if keep else Path(tmp) / "run"
        summary = evaluate_run(out, EVAL_EPISODES) if evaluate_only else train(cfg, out)
        snapshots = {
            f"{t / 60:g}": evaluate_run(out, EVAL_EPISODES, checkpoint=snapshot_name(t))
            for t in snapshots_s
            if (out / snapshot_name(t)).is_dir()
        }
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {
        "seed": seed,
        "train_s": rows[-1]["time_s"],
        "env_steps": rows[-1]["env_steps"],
        "steps_per_s": rows[-1]["steps_per_s"],
        "collect_s": rows[-1].get("time/collect_s"),  # absent in runs trained before it was logged
        "update_s": rows[-1].get("time/update_s"),
        "eval": summary,
        "snapshots": snapshots,
        "run": str(out) if keep else None,
        "metrics": rows,
    }


def raw_physics_rate(task: str, overrides: list[str], seconds: float = 3.0) -> float | None:
    """env-steps/s of the bare ``mujoco.rollout`` on the training env's model, batch, threads and decimation,
    holding the default pose from the env's reset state; None for other simulators."""
    import mujoco
    from mujoco import rollout

    from embody.train import build_env, resolve_config

    env = build_env(resolve_config(task, overrides=overrides))
    sim = env.sim
    if sim.name != "mujoco":
        env.close()
        return None
    env.reset()
    n, dec, threads = sim.n_envs, sim.config.decimation, min(sim.config.n_threads or os.cpu_count() or 1, sim.n_envs)
    pool = rollout.Rollout(nthread=0 if threads <= 1 else threads)
    datas = [mujoco.MjData(sim.model) for _ in range(threads)]
    state = sim.get_state()
    ctrl = np.zeros((n, dec, sim.model.nu))
    ctrl[:] = sim.robot.default_pose[sim.robot.actuated]
    out = np.zeros((n, dec, state.shape[1]))
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        pool.rollout([sim.model] * n, datas, state, ctrl, skip_checks=True, nstep=dec, state=out)
        state[:] = out[:, -1]
        calls += 1
    rate = calls * n / (time.perf_counter() - start)
    env.close()
    return rate


def rollout_rates(task: str, overrides: list[str], steps: int = 30) -> dict[str, float]:
    """env-steps/s of a rollout (an untrained actor's action, then the env step) for each of the task's
    ``rollout_variants``, on the training env's batch; empty for a task without variants."""
    import torch

    from embody.policies.actor_critic import ActorCritic
    from embody.runs import build_env
    from embody.sims.tasks import TASKS
    from embody.train import resolve_config

    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in TASKS.get(task).rollout_variants(Path(tmp)).items():
            cfg = resolve_config(task, overrides=[*overrides, *extra])
            env = build_env(cfg)
            actor = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
            obs, _ = env.reset()
            for i in range(steps + 5):  # 5 to warm up
                if i == 5:
                    start = time.perf_counter()
                obs, *_ = env.step(actor.act(torch.as_tensor(obs)).numpy())
            rates[label] = steps * env.n_envs / (time.perf_counter() - start)
            env.close()
    return rates


def time_to_bar(bar: tuple[str, float], rows: list[dict], baseline: dict) -> float | None:
    """Training time [s] at which the training metric (last 100 episodes, stochastic policy) first met the bar."""
    kind, value = bar
    if kind == "return":
        key, level = "episode_return", value * (baseline.get("max_return") or float("inf"))
    elif kind == "length":
        key, level = "episode_length", value * baseline["length_mean"]
    else:  # success and tracking need an evaluation: see the snapshots
        return None
    return next((r["time_s"] for r in rows if (r.get(key) or 0) >= level), None)


def plot_curves(task: str, curves: dict[int, list[dict]], path: Path) -> None:
    """Training return (mean of the last 100 episodes) against wall-clock time, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for seed, rows in curves.items():
        ax.plot([r["time_s"] / 60 for r in rows], [r["episode_return"] for r in rows], label=f"seed {seed}")
    ax.set_xlabel("training time [min]")
    ax.set_ylabel("training return")
    ax.set_title(f"{task}: PPO")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def passes(bar: tuple[str, float], summary: dict, baseline: dict) -> bool:
    """Whether an evaluation ``summary`` meets the task's ``bar`` (kind, value); see the module docstring."""
    kind, value = bar
    if kind == "return":
        return summary["return_fraction_of_max"] >= value
    if kind == "length":
        return summary["length_mean"] >= value * baseline["length_mean"]
    if kind == "tracking":
        lin, yaw, survival = value
        return (
            summary["lin_vel_error"] <= lin
            and summary["yaw_rate_error"] <= yaw
            and summary["survival_rate"] >= survival
        )
    return summary.get("success_rate", 0.0) >= value


def print_speed(rows: list[dict], raw: float | None) -> None:
    """Training env-steps/s against the raw physics rate measured in the same run, and where a training
    step's time goes: the raw physics it needs, the rest of the rollout beyond that (task code, policy,
    normalizers, resets, and physics slower than the standing robot's), the PPO update, and the remainder
    (checkpoints, logging)."""
    if raw is None or not rows or "train_s" not in rows[0]:
        return
    rates = [r["steps_per_s"] for r in rows]
    print(
        f"training {np.mean(rates):,.0f} env-steps/s (seeds {min(rates):,.0f}–{max(rates):,.0f}); raw physics "
        f"{raw:,.0f}: ratio {np.mean(rates) / raw:.2f}"
    )
    timed = [r for r in rows if r.get("collect_s") is not None]
    if timed:
        per_k = lambda key: 1e6 * np.mean([r[key] / r["env_steps"] for r in timed])  # noqa: E731  ms per 1k steps
        physics, total, collect, update = 1e6 / raw, per_k("train_s"), per_k("collect_s"), per_k("update_s")
        print(
            f"ms per 1,000 env steps: {total:.0f} = raw physics {physics:.0f} + rest of the rollout "
            f"{collect - physics:.0f} + PPO update {update:.0f} + other {total - collect - update:.0f}"
        )
        if collect < physics:
            print("(the raw rate came out below the rollout's own: something else ran during its measurement)")


def print_snapshots(rows: list[dict]) -> None:
    """Each seed's evaluation at each snapshot: return, length, the task's tracking errors (instantaneous and
    averaged over a gait period), survival, the share of steps with a leg joint over its velocity limit and the share
    of episodes with a step the deploy supervisor would fault on."""
    if not any(r["snapshots"] for r in rows):
        return
    print(
        f"{'seed':>6} {'min':>5} {'return':>9} {'length':>7} {'lin err':>8} {'yaw err':>8} {'yaw gait':>8} "
        f"{'survival':>9} {'over-speed':>10} {'faulted':>8}"
    )
    fmt = lambda e, k, f: f"{e[k]:{f}}" if k in e else "—"  # noqa: E731
    for r in rows:
        for minutes, e in r["snapshots"].items():
            print(
                f"{r['seed']:>6} {minutes:>5} {e['return_mean']:>9.2f} {e['length_mean']:>7.1f} "
                f"{fmt(e, 'lin_vel_error', '.3f'):>8} {fmt(e, 'yaw_rate_error', '.3f'):>8} "
                f"{fmt(e, 'yaw_rate_error_gait', '.3f'):>8} {fmt(e, 'survival_rate', '.0%'):>9} "
                f"{fmt(e, 'over_speed', '.1%'):>10} {fmt(e, 'supervisor_fault', '.0%'):>8}"
            )


def main(argv: list[str]) -> int:
    """``embody bench learning``: the random baseline, then every seed; prints a table and PASS or
    BELOW TARGET. ``--out DIR`` writes ``results.json`` and ``learning.png``. Returns 0 either way."""
    p = argparse.ArgumentParser(
        prog="embody bench learning", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", default="cartpole-swingup", choices=sorted(bars()))
    p.add_argument("--seeds", type=positive_int, default=3)
    p.add_argument("--first-seed", type=nonneg_int, default=0, help="seeds K … K + seeds − 1 (to add seeds to a study)")
    p.add_argument("--budget", type=positive_float, default=300.0, help="wall-clock seconds of training per seed")
    p.add_argument("--steps", type=positive_int, default=None, help="env steps per seed (default: the task's)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="training config override, as for embody train",
    )
    p.add_argument("--keep", help="keep each seed's run directory under DIR/seedN (for embody eval / sim2sim)")
    p.add_argument("--evaluate-only", action="store_true", help="re-evaluate the runs kept under --keep, no training")
    p.add_argument(
        "--at", default="10,20,30", help="minutes of training at which snapshots are evaluated (within the budget)"
    )
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    keep = Path(args.keep) if args.keep else None
    if args.evaluate_only and keep is None:
        p.error("--evaluate-only needs --keep DIR")
    snapshots = [60 * float(m) for m in args.at.split(",") if m and 60 * float(m) <= args.budget]
    baseline = random_baseline(args.task, args.overrides)
    raw = raw_physics_rate(args.task, args.overrides)
    rollouts = rollout_rates(args.task, args.overrides)
    rows = [
        run_seed(args.task, s, args.budget, args.steps, args.overrides, keep, args.evaluate_only, snapshots)
        for s in range(args.first_seed, args.first_seed + args.seeds)
    ]
    bar = bars()[args.task]
    curves = {r["seed"]: r["metrics"] for r in rows}
    for r in rows:
        r["time_to_bar_s"] = time_to_bar(bar, r.pop("metrics"), baseline)
    print(f"\n{args.task}, PPO, {os.cpu_count()} cores, budget {args.budget:.0f} s per seed; bar: {bar[0]} {bar[1]}")
    print(
        f"{'seed':>6} {'train s':>8} {'env steps':>11} {'steps/s':>8} {'t→bar s':>8} {'return':>9} {'length':>7} "
        f"{'success':>8} {'bar':>5}"
    )
    for r in [{"seed": "random", "eval": baseline}, *rows]:
        e = r["eval"]
        succ = f"{e['success_rate']:.0%}" if "success_rate" in e else "—"
        t_bar = "—" if r.get("time_to_bar_s") is None else f"{r['time_to_bar_s']:.0f}"
        train_cols = (
            f"{r['train_s']:>8.0f} {r['env_steps']:>11,} {r['steps_per_s']:>8,.0f} {t_bar:>8}"
            if "train_s" in r
            else f"{'':>8} {'':>11} {'':>8} {'':>8}"
        )
        verdict = "" if r["seed"] == "random" else ("PASS" if passes(bar, e, baseline) else "BELOW")
        print(f"{r['seed']:>6} {train_cols} {e['return_mean']:>9.2f} {e['length_mean']:>7.1f} {succ:>8} {verdict:>5}")
    print_speed(rows, raw)
    if rollouts:
        first = next(iter(rollouts.values()))
        print("rollout env-steps/s: " + "; ".join(f"{k} {v:,.0f} ({v / first:.2f}×)" for k, v in rollouts.items()))
    print_snapshots(rows)
    ok = all(passes(bar, r["eval"], baseline) for r in rows) and all(r["train_s"] <= args.budget + 60 for r in rows)
    print(f"{'PASS' if ok else 'BELOW TARGET'}: every seed must meet the bar within {args.budget:.0f} s")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "results.json").write_text(
            json.dumps(
                {
                    "task": args.task,
                    "bar": bar,
                    "random": baseline,
                    "raw_physics_steps_per_s": raw,
                    "rollout_steps_per_s": rollouts,
                    "seeds": rows,
                },
                indent=2,
            )
        )
        plot_curves(args.task, curves, Path(args.out, "learning.png"))
    return 0
