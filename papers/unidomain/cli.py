"""``embody plan eval``: the UniDomain study (study.py) under the core ``plan`` group."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, fraction, nonneg_int, positive_int


def eval_arguments(q: argparse.ArgumentParser) -> None:
    """Arguments of ``embody plan eval``: scale, output folder, demonstration backend, task count, noise and
    embedder."""
    q.add_argument("--scale", default="tiny", choices=("tiny", "paper"))
    q.add_argument("--out", default="runs/plan-eval")
    q.add_argument(
        "--backend", choices=("scene", "symbolic"), help="demonstrations: MuJoCo skills (default) or symbolic"
    )
    q.add_argument("--tasks", type=positive_int, help="held-out tasks (default: 21 tiny, 42 paper)")
    q.add_argument("--execute", type=nonneg_int, help="meta-domain plans to execute in the scene")
    q.add_argument("--seed", type=any_int)
    q.add_argument("--noise", type=fraction, help="probability that a recorded state misses a fact (default 0)")
    q.add_argument("--min-support", type=fraction, help="learning: fraction of occurrences a fact needs (default 1)")
    q.add_argument("--embedder", default="minilm", choices=("minilm", "lexical"))
    add_set(q, "the StudyConfig, on top of --scale", "distractors=[0,10] or timeout_s=10")


def run_eval(args) -> int:
    """``embody plan eval``: the UniDomain study into ``--out``."""
    from embody.config import apply_overrides

    from .study import StudyConfig, run_study

    cfg = StudyConfig.for_scale(
        args.scale,
        backend=args.backend,
        tasks=args.tasks,
        embedder=args.embedder,
        execute=args.execute,
        seed=args.seed,
        noise=args.noise,
        min_support=args.min_support,
    )
    apply_overrides(cfg, texts=args.set)
    result = run_study(cfg, args.out)
    print(json.dumps(result["summary"], indent=1))
    print(f"report written to {Path(args.out) / 'report.md'}", file=sys.stderr)
    return exits.OK
