"""``embody almi train --scale tiny|paper --out DIR`` and ``embody almi compose --lower RUN --upper RUN --out DIR``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, nonneg_int, positive_float, positive_int


def _common(p: argparse.ArgumentParser, out: str, what: str) -> None:
    p.add_argument(
        "--scale",
        choices=("tiny", "paper"),
        default="tiny",
        help="tiny: the whole pipeline in < 3 min (CI); paper: 2 rounds of 4 M-step stages (40-70 min on 2 cores)",
    )
    p.add_argument("--out", default=out, metavar="DIR", help=what)
    p.add_argument("--seed", type=any_int, default=0)
    add_set(p, "every stage's training config, on top of --scale", "env.randomization.enabled=false")


def train_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "runs/almi", "the whole-body run; stages under DIR/stages")
    p.add_argument("--no-curricula", action="store_true", help="clips at full amplitude from the whole library")
    _deploy_steps(p, "a last lower stage")


def _deploy_steps(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--deploy-steps",
        type=nonneg_int,
        default=0,
        metavar="N",
        help=f"{what} of N env steps against the joint velocity limits, for embody deploy "
        "(5600000 made the committed checkpoint); 0: none",
    )


def run_train(args) -> int:
    """``embody almi train``: the stages (resuming finished ones), then the composed whole-body run in OUT."""
    from .train import make_config, train_almi

    t0 = time.perf_counter()
    cfg = make_config(args.scale, args.seed, args.set, not args.no_curricula, args.deploy_steps)
    summary = train_almi(cfg, Path(args.out), _log)
    print(json.dumps(summary, indent=2))
    _log(f"almi: whole-body run in {args.out} ({time.perf_counter() - t0:.0f} s)")
    return exits.OK


def compose_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lower", required=True, metavar="RUN", help="an almi-lower run directory")
    p.add_argument("--upper", required=True, metavar="RUN", help="an almi-upper run directory")
    p.add_argument("--out", required=True, metavar="DIR", help="the whole-body run")
    p.add_argument("--scale", choices=("tiny", "paper"), default="paper", help="the evaluation's size")
    add_set(p, "the whole-body run's config", "env.randomization.enabled=false")


def run_compose(args) -> int:
    """``embody almi compose``: one whole-body run from a lower and an upper run, evaluated."""
    from .train import compose, make_config

    cfg = make_config(args.scale, overrides=args.set)
    print(json.dumps(compose(Path(args.lower), Path(args.upper), Path(args.out), cfg), indent=2))
    return exits.OK


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="almi whole-body runs, grouped by parent folder: STUDY/METHOD/seedN"
    )
    p.add_argument(
        "--clips", metavar="DIR", help="a clip folder (default: the procedural families no stage trained on)"
    )
    p.add_argument("--episodes", type=positive_int, default=20, help="20 s episodes per run (default 20)")
    p.add_argument("--sim", help="simulator (default: each run's)")
    p.add_argument("--out", default="runs/almi-eval", metavar="DIR", help="results.json, report.md, plot")


def run_eval(args) -> int:
    """``embody almi eval``: the runs on held-out motions while walking; a table per method with intervals."""
    from .evaluate import evaluate_methods, write_report

    clips = Path(args.clips) if args.clips else None
    if clips is not None and not clips.is_dir():
        raise exits.CommandError(f"{clips}: clip folder is missing")
    methods = evaluate_methods([Path(r) for r in args.runs], args.episodes, clips, args.sim)
    write_report(methods, Path(args.out), "embody " + " ".join(sys.argv[1:]))
    print((Path(args.out) / "report.md").read_text())
    return exits.OK


def study_arguments(p: argparse.ArgumentParser) -> None:
    _common(p, "runs/almi-study", "DIR/<method>/seed<S> runs; results.json, report.md, plot")
    p.add_argument("--seeds", type=positive_int, default=1, metavar="N", help="seeds --seed … --seed+N−1")
    _deploy_steps(p, "every method's last stage (the legs; whole-body: the whole policy)")
    p.add_argument("--report", action="store_true", help="only the report of the jobs already in DIR; trains nothing")


def run_study(args) -> int:
    """``embody almi study``: the four methods × seeds (resumable), then the held-out evaluation."""
    from embody.jobs import read_store

    from .study import run_study as study
    from .train import make_config

    cfg = make_config(args.scale, args.seed, args.set, deploy_steps=args.deploy_steps)
    seeds = [] if args.report else list(range(args.seed, args.seed + args.seeds))
    if args.report and not read_store(args.out)[1]:
        raise exits.CommandError(f"{Path(args.out) / 'jobs'}: no finished jobs to report")
    study(cfg, seeds, Path(args.out), "embody " + " ".join(sys.argv[1:]), _log)
    print((Path(args.out) / "report.md").read_text())
    return exits.OK


def export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="an almi (whole-body) run")
    p.add_argument("--clips", required=True, metavar="DIR", help="the clip folder (embody motion generate/retarget)")
    p.add_argument("--commands", type=positive_int, default=4, metavar="N", help="the first N command templates")
    p.add_argument("--out", required=True, metavar="DIR", help="the dataset (LeRobot layout)")
    p.add_argument("--seconds", type=positive_float, default=10.0, help="episode length (default 10)")
    p.add_argument("--no-video", action="store_true", help="skip the camera video")


def run_export(args) -> int:
    """``embody almi export-dataset``: every clip × command template, one episode each, into a dataset."""
    from .export import export_dataset

    summary = export_dataset(
        Path(args.run), Path(args.clips), args.commands, Path(args.out), args.seconds, not args.no_video
    )
    print(json.dumps(summary, indent=2))
    return exits.OK
