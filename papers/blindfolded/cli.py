"""``embody blindfolded collect|train|eval|study|import|merge [--scale tiny|paper] [--domain maze|peg] [--out DIR] [--seed S]``.

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

import json
import sys
import time
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("blindfolded", help="Blindfolded experts: cloning experts denied task information "
                                           "(papers/blindfolded)")
    p.add_argument("action", choices=("collect", "train", "eval", "study", "import", "merge"))
    p.add_argument("--scale", choices=("tiny", "paper"), default="tiny",
                   help="tiny: the whole study in about a minute (CI); paper: levels × m ∈ 1..32 (peg 1..16) × "
                        "3 seeds (peg 2)")
    p.add_argument("--domain", choices=("maze", "peg"), default="maze",
                   help="the task family: maze (minigrid) or peg (peg insertion on the simulated arm, MuJoCo)")
    p.add_argument("--out", default="runs/blindfolded", metavar="DIR", help="output folder (default runs/blindfolded)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, metavar="N", help="study: the number of replicate seeds, from --seed "
                                                           "(default: the scale's)")
    p.add_argument("--from", dest="sources", action="append", metavar="DIR",
                   help="merge: a study's output folder (repeatable): their runs pooled into one report in --out")
    p.add_argument("--workers", type=int, default=1,
                   help="study: processes running the (seed, level) jobs in parallel (default 1; results do not "
                        "depend on it)")
    p.add_argument("--level", action="append", metavar="NAME",
                   help="collect/train/eval: only this information level (repeatable; maze: informed, region-K, blind, "
                        "blind-wall; peg: informed, region-4mm, region-8mm, blind)")
    p.add_argument("--m", type=int, help="collect/train/eval: the number of demonstrated tasks")
    p.add_argument("--demos", metavar="FILE", help="train, peg: train on this demonstrations file (e.g. what "
                                                    "`import` wrote; all its episodes) instead of DIR/demos")
    from .teleop import add_teleop_arguments

    add_teleop_arguments(p)  # collect --teleop keyboard|gamepad|spacemouse: a person demonstrates on the arm
    p.set_defaults(fn=run)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _model_path(out: Path, level: str, seed: int, m: int) -> Path:
    return out / "models" / f"{level}_seed{seed}_m{m}"  # an embody checkpoint directory


def run(args) -> int:
    if args.action == "collect" and getattr(args, "teleop", None):
        from .teleop import run_teleop

        return run_teleop(args)
    if args.action == "import":  # a teleop dataset as peg demonstrations (teleop.teleop_demos)
        from .teleop import run_import

        return run_import(args)
    import torch

    from .config import for_scale

    cfg = for_scale(args.scale, args.seed, args.domain)
    if args.workers < 1:
        _log(f"embody blindfolded: error: --workers must be >= 1, got {args.workers}")
        return 2
    cfg.workers = args.workers
    if args.seeds is not None:
        if args.seeds < 1:
            _log(f"embody blindfolded: error: --seeds must be >= 1, got {args.seeds}")
            return 2
        cfg.seeds = args.seeds
    torch.set_num_threads(cfg.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.m is not None and args.m < 1:
        _log(f"embody blindfolded: error: --m must be >= 1, got {args.m}")
        return 2
    if args.action == "study":
        from .study import run_study

        run_study(cfg, out, _log)
        return 0
    if args.action == "merge":
        from .study import merge_studies

        try:
            merge_studies(args.sources or [], out, _log)
        except (ValueError, IndexError) as e:
            _log(f"embody blindfolded: error: {e if args.sources else 'merge needs --from DIR (repeatable)'}")
            return 2
        return 0

    from . import demos as demo_io
    from .study import collect, demos_path, evaluate_cell, first_tasks, get_domain, train_on

    domain = get_domain(cfg)
    if getattr(args, "demos", None):
        return _train_on_file(args, cfg, domain, out)
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
        _log(f"embody blindfolded: error: {e}")
        return 2
    t0 = time.perf_counter()
    if args.action == "collect":
        collect(cfg, out, args.seed, levels, args.m, _log)
        _log(f"blindfolded: demonstrations in {out / 'demos'} ({time.perf_counter() - t0:.0f} s)")
        return 0
    if hasattr(domain, "save_policy"):  # peg: the models are deployable run directories
        save_policy, load_policy = domain.save_policy, domain.load_policy
    else:
        from .history_bc import load_policy, save_policy

    summary = {}
    for lv in levels:
        path = demos_path(out, lv, args.seed)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no demonstrations for level {lv!r}; run `embody blindfolded collect "
                                    f"--scale {args.scale} --out {args.out} --seed {args.seed}` first")
        demos = demo_io.load(path, domain.obs_spec)
        n_tasks = len(demos.meta.get("tasks", [])) if "episode_tasks" in demos.meta else len(demos.episode_lengths)
        m = args.m or n_tasks
        if m > n_tasks:
            _log(f"embody blindfolded: error: --m {m}, but {path} holds demonstrations of {n_tasks} tasks")
            return 2
        tasks = [int(t) for t in demos.meta["tasks"][:m]]
        model = _model_path(out, lv, args.seed, m)
        if args.action == "train":
            policy, info = train_on(cfg, domain, first_tasks(demos, m), args.seed)
            save_policy(policy, model, {"level": lv, "m": m, "seed": args.seed, "tasks": tasks})
            summary[lv] = {"m": m, "model": str(model), **info}
            acc = f", accuracy {info['accuracy']:.2f}" if "accuracy" in info else ""
            _log(f"blindfolded: {lv}: m={m}, loss {info['loss']:.3f}{acc} -> {model}")
        else:
            if not ((model / "checkpoint.json").exists() or (model / "checkpoint").is_dir()):
                raise FileNotFoundError(f"{model}: no trained policy; run `embody blindfolded train --scale "
                                        f"{args.scale} --out {args.out} --seed {args.seed} --m {m}` first")
            policy, _ = load_policy(model)
            cell = evaluate_cell(cfg, domain, policy, tasks, args.seed)
            summary[lv] = {"m": m, "I_bits": domain.information(lv, cfg.heldout_tasks()),
                           **{k: v for k, v in cell.items() if not k.endswith("_outcomes")}}
            _log(f"blindfolded: {lv}: m={m}, training-task success {cell['train_success']:.2f}, held-out success "
                 f"{cell['heldout_success']:.2f}, held-out mean steps {cell['heldout_steps']:.1f}")
    name = "train.json" if args.action == "train" else "eval.json"
    from embody.files import write_atomic

    write_atomic(out / name, json.dumps(summary, indent=2, default=float))
    _log(f"blindfolded: {out / name} ({time.perf_counter() - t0:.0f} s)")
    return 0


def _train_on_file(args, cfg, domain, out: Path) -> int:
    """``train --domain peg --demos FILE``: the domain's student on one demonstrations file (every
    episode; ``meta.level`` names the model) → DIR/models/<level>_seed<S>_m<holes>/."""
    from embody.datasets.format import DatasetFormatError

    from . import demos as demo_io

    if args.action != "train" or cfg.domain != "peg":
        _log("embody blindfolded: error: --demos FILE is for `train --domain peg`")
        return 2
    try:
        demos = demo_io.load(args.demos, domain.obs_spec)
    except (FileNotFoundError, DatasetFormatError) as e:
        _log(f"embody blindfolded: error: {e}")
        return 2
    level = str(demos.meta.get("level") or Path(args.demos).stem)
    m = len(demos.meta.get("tasks") or []) or len(demos.episode_lengths)  # demonstrated holes
    model = _model_path(out, level, args.seed, m)
    policy, info = domain.train(demos, args.seed)
    domain.save_policy(policy, model, {"level": level, "m": m, "seed": args.seed, "demos": str(args.demos),
                                       "tasks": demos.meta.get("tasks", []), "dataset": demos.meta.get("dataset")})
    _log(f"blindfolded: {level}: {m} episodes of {args.demos}, loss {info['loss']:.3f} -> {model}")
    return 0
