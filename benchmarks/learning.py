"""``embody bench learning``: PPO with a task's default config, several seeds, against the task's bar.

For each seed: train within a wall-clock budget, then evaluate the final policy
deterministically. A uniform random policy is evaluated on the same env (same config, same
evaluation seed) as the baseline. Bars by task:

* return  — eval return ≥ frac × the task's maximum return (cartpole-swingup: 70 %);
* length  — eval mean episode length ≥ ratio × the random policy's (H1-2 tasks: 5×);
* success — eval success rate ≥ frac (arm-reach: 90 %).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

BARS = {
    "cartpole-swingup": ("return", 0.7),
    "h1_2-velocity": ("length", 5.0),
    "h1_2-stand": ("length", 5.0),
    "arm-reach": ("success", 0.9),
    "peg-insert": ("success", 0.5),
}
EVAL_EPISODES = 20


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
) -> dict:
    """Train (or, with ``evaluate_only``, re-evaluate the kept run) one seed within ``budget_s``. Returns
    ``seed``, ``train_s``, ``env_steps``, ``steps_per_s``, ``eval`` (the evaluation summary), ``run``
    (its folder when kept, else None) and ``metrics`` (every training row)."""
    from embody.train import evaluate_run, resolve_config, train

    cfg = resolve_config(task, overrides=overrides, seed=seed, steps=steps)
    cfg.eval_episodes, cfg.max_time_s = EVAL_EPISODES, budget_s
    cfg.video = keep is not None
    with tempfile.TemporaryDirectory() as tmp:
        out = (keep / f"seed{seed}") if keep else Path(tmp) / "run"
        summary = evaluate_run(out, EVAL_EPISODES) if evaluate_only else train(cfg, out)
        rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {
        "seed": seed,
        "train_s": rows[-1]["time_s"],
        "env_steps": rows[-1]["env_steps"],
        "steps_per_s": rows[-1]["steps_per_s"],
        "eval": summary,
        "run": str(out) if keep else None,
        "metrics": rows,
    }


def time_to_bar(bar: tuple[str, float], rows: list[dict], baseline: dict) -> float | None:
    """Training time [s] at which the training metric (last 100 episodes, stochastic policy) first met the bar."""
    kind, value = bar
    if kind == "return":
        key, level = "episode_return", value * (baseline.get("max_return") or float("inf"))
    elif kind == "length":
        key, level = "episode_length", value * baseline["length_mean"]
    else:
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
    return summary.get("success_rate", 0.0) >= value


def main(argv: list[str]) -> int:
    """``embody bench learning``: the random baseline, then every seed; prints a table and PASS or
    BELOW TARGET. ``--out DIR`` writes ``results.json`` and ``learning.png``. Returns 0 either way."""
    p = argparse.ArgumentParser(
        prog="embody bench learning", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", default="cartpole-swingup", choices=sorted(BARS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget", type=float, default=300.0, help="wall-clock seconds of training per seed")
    p.add_argument("--steps", type=int, default=None, help="env steps per seed (default: the task's)")
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
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    keep = Path(args.keep) if args.keep else None
    if args.evaluate_only and keep is None:
        p.error("--evaluate-only needs --keep DIR")
    baseline = random_baseline(args.task, args.overrides)
    rows = [
        run_seed(args.task, s, args.budget, args.steps, args.overrides, keep, args.evaluate_only)
        for s in range(args.seeds)
    ]
    bar = BARS[args.task]
    curves = {r["seed"]: r["metrics"] for r in rows}
    for r in rows:
        r["time_to_bar_s"] = time_to_bar(bar, r.pop("metrics"), baseline)
    print(f"\n{args.task}, PPO, {os.cpu_count()} cores, budget {args.budget:.0f} s per seed; bar: {bar[0]} {bar[1]:g}")
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
    ok = all(passes(bar, r["eval"], baseline) for r in rows) and all(r["train_s"] <= args.budget + 60 for r in rows)
    print(f"{'PASS' if ok else 'BELOW TARGET'}: every seed must meet the bar within {args.budget:.0f} s")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "results.json").write_text(
            json.dumps({"task": args.task, "bar": bar, "random": baseline, "seeds": rows}, indent=2)
        )
        plot_curves(args.task, curves, Path(args.out, "learning.png"))
    return 0
