"""``embody mpa train|eval|diagnose [--scale tiny|paper] [--out DIR] [--seed S] [--models DIR] [--set KEY=VALUE]``.

train: expert data, base BC, counterfactual branches, adapter and Q model into DIR/models.
eval:  trains first unless DIR (or --models DIR) already holds trained models, then writes
       DIR/results.json, DIR/report.md, DIR/score_vs_data.png and DIR/score_vs_k.png.
diagnose: argmax-Q on held-out branch points of DIR's (or --models DIR's) counterfactual data
       (diagnose.py); JSON on stdout and DIR/diagnose.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int


def common_arguments(p: argparse.ArgumentParser, models: bool = False) -> None:
    p.add_argument("--scale", choices=("tiny", "paper"), default="tiny",
                   help="tiny: the whole pipeline in < 3 min (CI); paper: ~20-35 min on 2 cores")
    p.add_argument("--out", default="runs/mpa", metavar="DIR", help="output folder (default runs/mpa)")
    p.add_argument("--seed", type=any_int, default=0)
    if models:
        p.add_argument("--models", metavar="DIR", help="take trained models from DIR/models instead")
    add_set(p, "the MPAConfig, on top of --scale", "eval.episodes=4 or data.expert_episodes=10")


def eval_arguments(p: argparse.ArgumentParser) -> None:
    common_arguments(p, models=True)


def run_train(args) -> int:
    return run(args, "train")


def run_eval(args) -> int:
    return run(args, "eval")


def run_diagnose(args) -> int:
    return run(args, "diagnose")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args, action: str) -> int:
    from embody.config import apply_overrides

    from .config import for_scale
    from .train import has_models, load_models, train_adapter_q, train_all

    cfg = apply_overrides(for_scale(args.scale, args.seed), texts=args.set)
    models = getattr(args, "models", None)
    out = Path(args.out)
    t0 = time.perf_counter()
    source = Path(models) if models else out
    if models and not has_models(source):
        raise exits.CommandError(f"--models {models}: no trained models under {source / 'models'} (bc/, adapter/, "
                                 f"q/, counterfactual.npz); run `embody mpa train --out {models}` first")
    if action == "diagnose" and not has_models(source):
        raise exits.CommandError(f"no trained models under {source / 'models'}; run `embody mpa train` first")
    out.mkdir(parents=True, exist_ok=True)
    if action == "diagnose":
        from .diagnose import q_pick

        result = q_pick(load_models(source)[1], cfg, seed=args.seed)
        (out / "diagnose.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        return exits.OK
    if action == "train" or not has_models(source):
        train_all(cfg, out, _log)
        source = out
    if action == "train":
        _log(f"mpa: models in {out / 'models'} ({time.perf_counter() - t0:.0f} s)")
        return exits.OK
    from .evaluate import run_evaluation
    from .report import write_report

    models, cf = load_models(source)
    ev = run_evaluation(models, cf, cfg, lambda sub: train_adapter_q(sub, cfg))
    train_info = json.loads((source / "models" / "train.json").read_text())
    command = f"embody mpa eval --scale {args.scale} --out {args.out} --seed {args.seed}" + \
        (f" --models {models}" if models else "") + "".join(f" --set {t}" for t in args.set)
    result = {"command": command, "config": asdict(cfg), "train": train_info, "eval": ev,
              "time_s": round(time.perf_counter() - t0, 1)}
    (out / "results.json").write_text(json.dumps(result, indent=2, default=float))
    path = write_report(result, out)
    _log(f"mpa: {path} ({result['time_s']:.0f} s)")
    return exits.OK
