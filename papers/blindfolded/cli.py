"""``embody blindfolded collect|train|eval|study|import|merge [--scale tiny|paper] [--domain maze|peg] [--out DIR]
[--seed S] [--set KEY=VALUE]``: subcommands, each with its own flags (``embody blindfolded ACTION --help``).

collect: expert demonstrations of every level (or --level) on the seed's first m training tasks
         (--m, default the scale's largest m) into DIR/demos/<level>_seed<S>.npz.
train:   a history-conditioned BC policy per level on the first --m (default all) demonstrations of
         DIR/demos into DIR/models/<level>_seed<S>_m<m>/ (embody checkpoints; + DIR/train.json; peg: a
         run directory that `embody deploy DIR/models/... --robot peg_arm --target sim` runs).
eval:    those policies on their training tasks and on the held-out tasks: DIR/eval.json and a table.
study:   the whole study (levels × m × seeds): DIR/results.json, report.md, success_vs_m.png,
         gap_vs_sqrt_I_over_m.png. --seeds N replicates from --seed; --workers N processes.
merge:   --from DIR (repeatable): studies of the same configuration on other seeds pooled into one in DIR.
collect --teleop keyboard|gamepad|spacemouse: a person demonstrates peg insertion on the (simulated
         or real) arm through the safety supervisor into DIR/teleop (teleop.py).
import:  a teleop dataset (--dataset, default DIR/teleop) as peg demonstrations (its successful episodes)
         in DIR/demos/<level>_seed<S>.npz (level human or human-region-<side>mm), or --out FILE.npz.
train --domain peg --demos FILE: the GRU student on that demonstrations file (e.g. import's) into
         DIR/models/<level>_seed<S>_m<holes>/ (deployable).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from embody import exits
from embody.commands import add_merge_arguments, add_set, any_int, positive_int


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scale",
        choices=("tiny", "paper"),
        default="tiny",
        help="tiny: the whole study in about a minute (CI); paper: levels × m ∈ 1..32 (peg 1..16) × 3 seeds",
    )
    p.add_argument(
        "--domain",
        choices=("maze", "peg"),
        default="maze",
        help="the task family: maze (minigrid) or peg (peg insertion on the simulated arm, MuJoCo)",
    )
    p.add_argument("--out", default="runs/blindfolded", metavar="DIR", help="output folder (default runs/blindfolded)")
    p.add_argument("--seed", type=any_int, default=0)
    add_set(p, "the StudyConfig, on top of --scale", "m_values=[1,2] or peg.max_steps=300")


def _cells(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument(
        "--level",
        action="append",
        metavar="NAME",
        help="only this information level (repeatable; maze: informed, region-K, blind, blind-wall; "
        "peg: informed, region-4mm, region-8mm, blind)",
    )
    p.add_argument("--m", type=positive_int, help="the number of demonstrated tasks")


def collect_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded collect``: the study cells, and ``--teleop`` for a person's demonstrations."""
    from .teleop import add_teleop_arguments

    _cells(p)
    add_teleop_arguments(p)  # collect --teleop keyboard|gamepad|spacemouse: a person demonstrates on the arm


def train_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded train``: the study cells, or ``--demos FILE`` (peg) to train on one file."""
    _cells(p)
    p.add_argument(
        "--demos",
        metavar="FILE",
        help="peg: train on this demonstrations file (e.g. what `import` wrote; all its episodes) instead of DIR/demos",
    )


def eval_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded eval``: the study cells."""
    _cells(p)


def study_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded study``: the configuration, ``--seeds`` replicates and ``--workers``."""
    _common(p)
    p.add_argument(
        "--seeds",
        type=positive_int,
        metavar="N",
        help="the number of replicate seeds, from --seed (default: the scale's)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="processes running the (seed, level) jobs in parallel (default 1; results do not depend on it)",
    )


def import_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded import``: the teleop dataset in, the demonstrations file out."""
    p.add_argument(
        "--out",
        default="runs/blindfolded",
        metavar="DIR|FILE.npz",
        help="DIR/demos/<level>_seed<S>.npz, or this .npz file",
    )
    p.add_argument("--seed", type=any_int, default=0)
    p.add_argument("--dataset", metavar="DIR", help="the teleop dataset (default OUT/teleop)")


def merge_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``embody blindfolded merge``: ``--from`` study folders, ``--out``."""
    add_merge_arguments(p, "a study's output folder", "runs/blindfolded")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _config(args):
    import torch

    from embody.config import apply_overrides

    from .config import for_scale

    cfg = apply_overrides(for_scale(args.scale, args.seed, args.domain), texts=args.set)
    torch.set_num_threads(cfg.threads)
    return cfg


def run_study_command(args) -> int:
    """``embody blindfolded study``: the whole study into ``--out``; returns the exit code."""
    from .study import run_study

    cfg = _config(args)
    cfg.workers = args.workers
    if args.seeds is not None:
        cfg.seeds = args.seeds
    run_study(cfg, Path(args.out), _log)
    return exits.OK


def run_merge(args) -> int:
    """``embody blindfolded merge``: pool studies run in several folders; CommandError for folders that do not
    combine."""
    from .study import merge_studies

    try:
        merge_studies(args.sources, Path(args.out), _log)
    except (ValueError, IndexError) as e:
        raise exits.CommandError(str(e)) from None
    return exits.OK


def run_import(args) -> int:
    """``embody blindfolded import``: a teleop dataset to a demonstrations file."""
    from .teleop import run_import as run

    return run(args)


def run_collect(args) -> int:
    """``embody blindfolded collect``: expert demonstrations of the selected cells, or a person's with ``--teleop``."""
    if args.teleop:
        from .teleop import run_teleop

        return run_teleop(args)
    return _cells_action(args, "collect")


def run_train(args) -> int:
    """``embody blindfolded train``: train the selected cells, or on ``--demos FILE``."""
    if args.demos:
        return _train_on_file(args, _config(args), Path(args.out))
    return _cells_action(args, "train")


def run_eval(args) -> int:
    """``embody blindfolded eval``: evaluate the selected cells' trained learners."""
    return _cells_action(args, "eval")


def _model_path(out: Path, level: str, seed: int, m: int) -> Path:
    return out / "models" / f"{level}_seed{seed}_m{m}"  # an embody checkpoint directory


def _cells_action(args, action: str) -> int:
    """collect / train / eval of each level's cell (the --m first tasks of --seed)."""
    from embody.files import write_atomic

    from . import demos as demo_io
    from .study import collect, demos_path, evaluate_cell, first_tasks, get_domain, train_on

    cfg = _config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    domain = get_domain(cfg)
    try:
        levels = [lv for lv in (args.level or domain.levels())]
        if cfg.domain == "peg":
            from .peg import information_bits

            for lv in levels:
                information_bits(lv)  # ValueError naming the valid levels
        else:
            from .maze import Level

            for lv in levels:
                Level.parse(lv)
    except ValueError as e:
        raise exits.CommandError(str(e)) from None
    t0 = time.perf_counter()
    if action == "collect":
        collect(cfg, out, args.seed, levels, args.m, _log)
        _log(f"blindfolded: demonstrations in {out / 'demos'} ({time.perf_counter() - t0:.0f} s)")
        return exits.OK
    if hasattr(domain, "save_policy"):  # peg: the models are deployable run directories
        save_policy, load_policy = domain.save_policy, domain.load_policy
    else:
        from .history_bc import load_policy, save_policy

    summary = {}
    for lv in levels:
        path = demos_path(out, lv, args.seed)
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: no demonstrations for level {lv!r}; run `embody blindfolded collect "
                f"--scale {args.scale} --out {args.out} --seed {args.seed}` first"
            )
        demos = demo_io.load(path, domain.obs_spec)
        n_tasks = len(demos.meta.get("tasks", [])) if "episode_tasks" in demos.meta else len(demos.episode_lengths)
        m = args.m or n_tasks
        if m > n_tasks:
            raise exits.CommandError(f"--m {m}, but {path} holds demonstrations of {n_tasks} tasks")
        tasks = [int(t) for t in demos.meta["tasks"][:m]]
        model = _model_path(out, lv, args.seed, m)
        if action == "train":
            policy, info = train_on(cfg, domain, first_tasks(demos, m), args.seed)
            save_policy(policy, model, {"level": lv, "m": m, "seed": args.seed, "tasks": tasks})
            summary[lv] = {"m": m, "model": str(model), **info}
            acc = f", accuracy {info['accuracy']:.2f}" if "accuracy" in info else ""
            _log(f"blindfolded: {lv}: m={m}, loss {info['loss']:.3f}{acc} -> {model}")
        else:
            if not ((model / "checkpoint.json").exists() or (model / "checkpoint").is_dir()):
                raise FileNotFoundError(
                    f"{model}: no trained policy; run `embody blindfolded train --scale "
                    f"{args.scale} --out {args.out} --seed {args.seed} --m {m}` first"
                )
            policy, _ = load_policy(model)
            cell = evaluate_cell(cfg, domain, policy, tasks, args.seed)
            summary[lv] = {
                "m": m,
                "I_bits": domain.information(lv, cfg.heldout_tasks()),
                **{k: v for k, v in cell.items() if not k.endswith("_outcomes")},
            }
            _log(
                f"blindfolded: {lv}: m={m}, training-task success {cell['train_success']:.2f}, held-out success "
                f"{cell['heldout_success']:.2f}, held-out mean steps {cell['heldout_steps']:.1f}"
            )
    name = "train.json" if action == "train" else "eval.json"
    write_atomic(out / name, json.dumps(summary, indent=2, default=float))
    _log(f"blindfolded: {out / name} ({time.perf_counter() - t0:.0f} s)")
    return exits.OK


def _train_on_file(args, cfg, out: Path) -> int:
    """``train --domain peg --demos FILE``: the domain's student on one demonstrations file (every
    episode; ``meta.level`` names the model) → DIR/models/<level>_seed<S>_m<holes>/."""
    from . import demos as demo_io
    from .study import get_domain

    if cfg.domain != "peg":
        raise exits.CommandError("--demos FILE is for `train --domain peg`")
    domain = get_domain(cfg)
    demos = demo_io.load(args.demos, domain.obs_spec)
    level = str(demos.meta.get("level") or Path(args.demos).stem)
    m = len(demos.meta.get("tasks") or []) or len(demos.episode_lengths)  # demonstrated holes
    model = _model_path(out, level, args.seed, m)
    policy, info = domain.train(demos, args.seed)
    domain.save_policy(
        policy,
        model,
        {
            "level": level,
            "m": m,
            "seed": args.seed,
            "demos": str(args.demos),
            "tasks": demos.meta.get("tasks", []),
            "dataset": demos.meta.get("dataset"),
        },
    )
    _log(f"blindfolded: {level}: {m} episodes of {args.demos}, loss {info['loss']:.3f} -> {model}")
    return exits.OK
