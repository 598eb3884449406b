"""``embody mpa train|eval|diagnose|merge [--scale tiny|paper] [--out DIR] [--seed S] [--models DIR] [--set KEY=VALUE]``.

train: expert data, base BC, counterfactual branches, adapter and Q model into DIR/models.
eval:  trains first unless DIR (or --models DIR) already holds trained models, then writes
       DIR/results.json, DIR/report.md, DIR/score_vs_data.png and DIR/score_vs_k.png.
diagnose: argmax-Q on held-out branch points of DIR's (or --models DIR's) counterfactual data
       (diagnose.py); JSON on stdout and DIR/diagnose.json.
eval --seeds N [--workers W]: N replicate seeds, each a job writing DIR/seed<S>/ (resumable; study.py),
       pooled into DIR/results.json and report.md; merge --from DIR ...: such folders run apart, pooled.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from embody import exits
from embody.commands import add_merge_arguments, add_set, any_int, positive_int
from embody.files import write_atomic


def common_arguments(p: argparse.ArgumentParser, models: bool = False) -> None:
    """``--scale``, ``--out``, ``--seed``, ``--set`` (and ``--models`` DIR when ``models``) of every ``embody mpa``
    command."""
    p.add_argument(
        "--scale",
        choices=("tiny", "paper"),
        default="tiny",
        help="tiny: the whole pipeline in < 3 min (CI); paper: ~20-35 min on 2 cores",
    )
    p.add_argument("--out", default="runs/mpa", metavar="DIR", help="output folder (default runs/mpa)")
    p.add_argument("--seed", type=any_int, default=0)
    if models:
        p.add_argument("--models", metavar="DIR", help="take trained models from DIR/models instead")
    add_set(p, "the MPAConfig, on top of --scale", "eval.episodes=4 or data.expert_episodes=10")


def eval_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody mpa eval``: the common ones, ``--seeds`` and ``--workers``."""
    common_arguments(p, models=True)
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        metavar="N",
        help="replicate seeds from --seed, each a resumable job in DIR/seed<S>/, pooled in DIR",
    )
    p.add_argument("--workers", type=positive_int, default=1, help="processes running the seeds (default 1)")
    p.add_argument(
        "--retrain-q",
        action="store_true",
        help="with --models: fit a new Q model (the --set q.* settings) on its counterfactual data first",
    )


def diagnose_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody mpa diagnose``: the common ones."""
    common_arguments(p, models=True)


def merge_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody mpa merge``: ``--from`` seed-job folders, ``--out``."""
    add_merge_arguments(p, "an `eval --seeds` output folder", "runs/mpa")


def run_merge(args) -> int:
    """``embody mpa merge``: pool seed jobs run in several folders; CommandError for folders that do not combine."""
    from .study import merge

    try:
        merge([Path(s) for s in args.sources], Path(args.out), _log)
    except ValueError as e:  # not a folder of seed jobs, another configuration, the same seed twice
        raise exits.CommandError(str(e)) from None
    return exits.OK


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _models(args) -> Path | None:
    """--models DIR, checked: it must hold trained models."""
    from .train import has_models

    if args.models and not has_models(Path(args.models)):
        raise exits.CommandError(
            f"--models {args.models}: no trained models under {Path(args.models) / 'models'} "
            f"(bc/, adapter/, q/, counterfactual.npz); run `embody mpa train --out "
            f"{args.models}` first"
        )
    return Path(args.models) if args.models else None


def run_train(args) -> int:
    """``embody mpa train``: every model into OUT/models."""
    from .study import make_config
    from .train import train_all

    t0, out = time.perf_counter(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_all(make_config(args.scale, args.seed, args.set), out, _log)
    _log(f"mpa: models in {out / 'models'} ({time.perf_counter() - t0:.0f} s)")
    return exits.OK


def run_diagnose(args) -> int:
    """``embody mpa diagnose``: how well the Q model picks among held-out counterfactual plans, into
    OUT/diagnose.json."""
    from .diagnose import q_pick
    from .study import make_config
    from .train import has_models, load_models

    out = Path(args.out)
    source = _models(args) or out
    if not has_models(source):
        raise exits.CommandError(f"no trained models under {source / 'models'}; run `embody mpa train` first")
    result = q_pick(load_models(source)[1], make_config(args.scale, args.seed, args.set), seed=args.seed)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "diagnose.json", json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return exits.OK


def run_eval(args) -> int:
    """``embody mpa eval``: evaluate every agent, one seed in OUT or ``--seeds`` resumable seed jobs pooled in OUT."""
    from .study import evaluate_seed, make_config, run_seeds

    models, out = _models(args), Path(args.out)
    command = (
        f"embody mpa eval --scale {args.scale} --out {args.out} --seed {args.seed}"
        + (f" --models {models}" if models else "")
        + (" --retrain-q" if args.retrain_q else "")
        + "".join(f" --set {t}" for t in args.set)
    )
    if args.retrain_q and not models:
        raise exits.CommandError("--retrain-q needs --models DIR (the trained models whose Q model it replaces)")
    if args.seeds == 1:
        evaluate_seed(make_config(args.scale, args.seed, args.set), out, models, command, _log, args.retrain_q)
    else:
        run_seeds(
            args.scale,
            args.set,
            [args.seed + i for i in range(args.seeds)],
            out,
            models,
            args.workers,
            f"{command} --seeds {args.seeds}",
            _log,
            args.retrain_q,
        )
    return exits.OK
