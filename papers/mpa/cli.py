"""``embody mpa train|eval [--scale tiny|paper] [--out DIR] [--seed S] [--models DIR]``.

train: expert data, base BC, counterfactual branches, adapter and Q model into DIR/models.
eval:  trains first unless DIR (or --models DIR) already holds trained models, then writes
       DIR/results.json, DIR/report.md, DIR/score_vs_data.png and DIR/score_vs_k.png.
diagnose: argmax-Q on held-out branch points of DIR's (or --models DIR's) counterfactual data
       (diagnose.py); JSON on stdout and DIR/diagnose.json.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("mpa", help="MPA: model-based policy adaptation for end-to-end driving (papers/mpa)")
    p.add_argument("action", choices=("train", "eval", "diagnose"))
    p.add_argument("--scale", choices=("tiny", "paper"), default="tiny",
                   help="tiny: the whole pipeline in < 3 min (CI); paper: ~20-35 min on 2 cores")
    p.add_argument("--out", default="runs/mpa", metavar="DIR", help="output folder (default runs/mpa)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--models", metavar="DIR", help="eval: take trained models from DIR/models instead")
    p.set_defaults(fn=run)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args) -> int:
    from .config import for_scale
    from .train import has_models, load_models, train_adapter_q, train_all

    cfg = for_scale(args.scale, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    source = Path(args.models) if args.models else out
    if args.models and not has_models(source):
        _log(f"embody mpa: error: --models {args.models}: no trained models under {source / 'models'} "
             f"(bc/, adapter/, q/, counterfactual.npz); run `embody mpa train --out {args.models}` first")
        return 2
    if args.action == "diagnose":
        if not has_models(source):
            _log(f"embody mpa: error: no trained models under {source / 'models'}; run `embody mpa train` first")
            return 2
        from .diagnose import q_pick

        result = q_pick(load_models(source)[1], cfg, seed=args.seed)
        (out / "diagnose.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        return 0
    if args.action == "train" or not has_models(source):
        train_all(cfg, out, _log)
        source = out
    if args.action == "train":
        _log(f"mpa: models in {out / 'models'} ({time.perf_counter() - t0:.0f} s)")
        return 0
    from .evaluate import run_evaluation
    from .report import write_report

    models, cf = load_models(source)
    ev = run_evaluation(models, cf, cfg, lambda sub: train_adapter_q(sub, cfg))
    train_info = json.loads((source / "models" / "train.json").read_text())
    command = f"embody mpa eval --scale {args.scale} --out {args.out} --seed {args.seed}" + \
        (f" --models {args.models}" if args.models else "")
    result = {"command": command, "config": asdict(cfg), "train": train_info, "eval": ev,
              "time_s": round(time.perf_counter() - t0, 1)}
    (out / "results.json").write_text(json.dumps(result, indent=2, default=float))
    path = write_report(result, out)
    _log(f"mpa: {path} ({result['time_s']:.0f} s)")
    return 0
