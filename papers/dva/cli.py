"""``embody dva train TASK``: D.VA (SHAC with a pixel actor, ``embody train TASK --algo shac --set pixels=N``) with the
plugin's options; ``embody dva study --scale tiny|paper``: the study (``study.py``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, positive_int


def train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="a differentiable task: cartpole-swingup, hopper, arm-reach")
    p.add_argument("--sim", default="mujoco", help="a simulator with capability 'differentiable' (default mujoco)")
    p.add_argument("--pixels", type=positive_int, default=64, help="image side (default 64; the paper: 84)")
    p.add_argument("--frames", type=positive_int, default=3, help="stacked frames (default 3)")
    p.add_argument("--source", default="render", help="pixel source: render (default), cartpole-raster")
    p.add_argument(
        "--through",
        action="store_true",
        help="let the gradient through the rendering (needs a source "
        "that draws differentiable images: cartpole-raster)",
    )
    p.add_argument("--steps", type=positive_int, help="total env steps")
    p.add_argument("--envs", type=positive_int, help="number of parallel envs (default 64)")
    p.add_argument("--seed", type=any_int)
    p.add_argument("--out", help="run directory (default: runs/TASK-dva-TIMESTAMP)")
    add_set(p, "the TrainConfig", "shac.horizon=16")


def run_train(args) -> int:
    from embody.train import resolve_config, train

    sets = [f"pixels={args.pixels}", f"frames={args.frames}", f"pixel_source={args.source}"]
    sets += ["shac.render_gradient=true"] if args.through else []
    cfg = resolve_config(
        args.task,
        None,
        [*sets, *args.set],
        algo="shac",
        sim=args.sim,
        n_envs=args.envs or 64,
        steps=args.steps,
        seed=args.seed,
    )
    out = Path(args.out or f"runs/{cfg.task}-dva-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "checkpoint").exists():
        raise exits.CommandError(f"{out} already holds a run; choose another --out")
    train(cfg, out)
    print(f"run written to {out}")
    return exits.OK


def study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=["tiny", "paper"], default="tiny", help="tiny: < 3 min on 2 cores")
    p.add_argument("--sim", help="a simulator with capability 'differentiable' (default mujoco)")
    p.add_argument("--out", required=True, metavar="DIR", help="the study folder (resumed when it holds jobs)")
    p.add_argument("--seed", type=any_int, action="append", help="run only these seeds (repeatable): seed jobs")
    add_set(p, "the StudyConfig, on top of --scale", "arms=[dva,shac-state] or budget_s=120")


def run_study(args) -> int:
    """Run or resume the study; the report lands in OUT/report.md."""
    from embody.config import apply_overrides

    from .study import for_scale
    from .study import run_study as study

    cfg = apply_overrides(for_scale(args.scale), texts=args.set)
    cfg.seeds = args.seed or cfg.seeds
    cfg.sim = args.sim or cfg.sim
    study(cfg, Path(args.out), "embody " + " ".join(sys.argv[1:]), log=lambda m: print(m, file=sys.stderr))
    return exits.OK
