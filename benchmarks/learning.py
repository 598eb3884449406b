"""``embody bench learning``: PPO on cartpole-swingup, several seeds, against the 70%-of-max bar.

For each seed: train with the task's default config within a wall-clock budget, record when
the training return (mean of the last 100 episodes) first reaches 70% of the maximum return,
then evaluate the final policy deterministically (20 episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np


def run_seed(seed: int, budget_s: float, steps: int | None) -> dict:
    from embody.train import resolve_config, train

    cfg = resolve_config("cartpole-swingup", seed=seed, steps=steps)
    cfg.video, cfg.eval_episodes, cfg.max_time_s = False, 20, budget_s
    with tempfile.TemporaryDirectory() as tmp:
        summary = train(cfg, Path(tmp) / "run")
        rows = [json.loads(x) for x in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    bar = 0.7 * summary["max_return"]
    hit = next((r for r in rows if (r["episode_return"] or 0) >= bar), None)
    return {"seed": seed, "train_s": rows[-1]["time_s"], "env_steps": rows[-1]["env_steps"],
            "steps_per_s": rows[-1]["steps_per_s"],
            "time_to_70pct_s": hit["time_s"] if hit else None, "steps_to_70pct": hit["env_steps"] if hit else None,
            "eval_return": summary["return_mean"], "eval_fraction_of_max": summary["return_fraction_of_max"]}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="embody bench learning", description=__doc__)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget", type=float, default=300.0, help="wall-clock seconds of training per seed")
    p.add_argument("--steps", type=int, default=None, help="env steps per seed (default: the task's)")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    rows = [run_seed(s, args.budget, args.steps) for s in range(args.seeds)]
    print(f"\ncartpole-swingup, PPO, {os.cpu_count()} cores, budget {args.budget:.0f} s per seed")
    print(f"{'seed':>4} {'train s':>8} {'env steps':>10} {'steps/s':>8} {'t→70% s':>8} {'eval return':>12} {'of max':>7}")
    for r in rows:
        t70 = f"{r['time_to_70pct_s']:.0f}" if r["time_to_70pct_s"] is not None else "—"
        print(f"{r['seed']:>4} {r['train_s']:>8.0f} {r['env_steps']:>10,} {r['steps_per_s']:>8,.0f} {t70:>8} "
              f"{r['eval_return']:>12.1f} {r['eval_fraction_of_max']:>7.1%}")
    frac = [r["eval_fraction_of_max"] for r in rows]
    ok = all(f >= 0.7 for f in frac) and all(r["train_s"] <= args.budget + 30 for r in rows)
    print(f"eval fraction of max: mean {np.mean(frac):.1%}, min {min(frac):.1%} — "
          f"{'PASS' if ok else 'BELOW TARGET'} (target: every seed ≥ 70% within {args.budget:.0f} s)")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "results.json").write_text(json.dumps(rows, indent=2))
    return 0
