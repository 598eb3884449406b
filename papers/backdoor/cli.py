"""``embody backdoor trigger SPEC --scenario NAME --out DIR``: a trigger (and its patches) from a spec file;
``embody backdoor dataset LIBRARY --out DIR``: a poisoned offline driving dataset from a trigger library;
``embody backdoor train DATASET --agent NAME --out DIR``: one of the five offline agents on it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, fraction, nonneg_float, nonneg_int, positive_int
from embody.sims.driving.cli import add_carla_arguments, carla_config


def trigger_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="a trigger spec file (YAML or JSON) with an attackers section")
    p.add_argument("--scenario", default="cut-in", help="the driving scenario the attackers join (default cut-in)")
    p.add_argument("--out", required=True, metavar="DIR", help="the trigger library: NAME.csv and NAME.json")
    p.add_argument("--patches", type=nonneg_int, default=2, help="near-miss patch scenes to keep (default 2)")
    p.add_argument("--margin", type=nonneg_float, default=0.5, help="robustness to reach (default 0.5)")
    p.add_argument("--population", type=positive_int, default=12)
    p.add_argument("--iterations", type=positive_int, default=8)
    p.add_argument("--seed", type=any_int, default=0, help="the scene's seed")
    p.add_argument("--slow", action="store_true", help="highway-env's full settings instead of the fast ones")
    p.add_argument("--sim", choices=("highway", "carla"), default="highway", help="carla: a running CARLA server")
    add_carla_arguments(p)


def run_trigger(args) -> int:
    """Refine the attackers until the spec holds; exit 3 (unsolvable) with the best scene when it never does."""
    from embody.sims.driving import fast_settings, get_scenario

    from .generate import RefineConfig, patches, refine, save_trigger
    from .spec import load_spec

    base = get_scenario(args.scenario)
    base = base if args.slow else fast_settings(base)
    spec = load_spec(args.spec, base.dt)
    names = {a.name for a in spec.attackers}
    base.actors = [a for a in base.actors if a.name not in names]  # the spec's attackers replace same-named ones
    cfg = RefineConfig(
        args.population,
        max(1, args.population // 4),
        args.iterations,
        args.margin,
        args.seed,
        sim=args.sim,
        carla=carla_config(args),
    )
    trigger = refine(spec, base, cfg, lambda m: print(m, file=sys.stderr))
    out = Path(args.out)
    save_trigger(trigger, spec, out, spec.name)
    kept = [
        save_trigger(p, spec, out, f"{spec.name}-patch{i}")
        for i, p in enumerate(patches(spec, base, trigger, cfg, args.patches))
    ]
    print(
        json.dumps(
            {
                "trigger": str(out / f"{spec.name}.csv"),
                "robustness": trigger.robustness,
                "satisfied": trigger.satisfied,
                "patches": [str(k) for k in kept],
            },
            indent=2,
        )
    )
    if not trigger.satisfied:
        print(
            f"embody backdoor trigger: {args.spec} was not satisfied: best robustness {trigger.robustness:.3f} "
            f"< margin {args.margin:g}",
            file=sys.stderr,
        )
        return exits.UNSOLVABLE
    return exits.OK


def dataset_arguments(p: argparse.ArgumentParser) -> None:
    from .dataset import TARGETS

    p.add_argument("library", help="a trigger library folder (embody backdoor trigger --out)")
    p.add_argument("--out", required=True, metavar="DIR", help="the dataset folder (LeRobot layout), new or absent")
    p.add_argument("--config", metavar="FILE", help="a YAML file of PoisonConfig values")
    p.add_argument("--episodes", type=positive_int, help="episodes in all (default 40)")
    p.add_argument("--poison-rate", type=fraction, help="share of trigger episodes (default 0.1)")
    p.add_argument("--patch-rate", type=fraction, help="share of patch episodes, clean labels (default 0.1)")
    p.add_argument("--target", choices=sorted(TARGETS), help="the attacker's target behaviour (default brake)")
    p.add_argument("--seed", type=any_int)
    add_set(p, "the PoisonConfig", "reward=keep or noise=[0.0,0.5]")


def run_dataset(args) -> int:
    """Generate the poisoned dataset; prints the episode counts as JSON."""
    from embody.config import apply_overrides, from_dict, load_yaml

    from .dataset import PoisonConfig, generate

    cfg = from_dict(PoisonConfig, load_yaml(args.config), args.config) if args.config else PoisonConfig()
    flags = {"episodes": args.episodes, "poison_rate": args.poison_rate, "patch_rate": args.patch_rate}
    apply_overrides(cfg, flags | {"target": args.target, "seed": args.seed}, args.set)
    counts = generate(cfg, Path(args.library), Path(args.out), log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(counts, indent=2))
    return exits.OK


def train_arguments(p: argparse.ArgumentParser) -> None:
    from embody.policies.offline_agents import AGENTS

    p.add_argument("dataset", help="an offline driving dataset (embody backdoor dataset --out)")
    p.add_argument("--agent", required=True, choices=AGENTS, help="the offline agent")
    p.add_argument("--out", required=True, metavar="DIR", help="the agent's checkpoint folder")
    p.add_argument("--steps", type=positive_int, help="gradient steps (default: the agent's)")
    p.add_argument("--seed", type=any_int, default=0)
    add_set(p, "the agent's config", "batch_size=128 or cql_alpha=2")


def run_train(args) -> int:
    """Train the agent on the dataset's transitions and save it with the dataset's path in its metadata."""
    from embody.config import parse_override
    from embody.policies.offline_agents import Transitions, save_agent, train_agent

    overrides = dict(parse_override(t) for t in args.set) | {"seed": args.seed}
    if args.steps:
        overrides["steps"] = args.steps
    agent = train_agent(args.agent, Transitions.from_dataset(args.dataset), overrides)
    save_agent(args.out, agent, {"dataset": str(Path(args.dataset).resolve()), "agent": args.agent})
    print(json.dumps({"agent": args.agent, "out": args.out, "summary": getattr(agent, "summary", {})}, indent=2))
    return exits.OK


def study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=["tiny", "paper"], default="tiny")
    p.add_argument("--out", required=True, metavar="DIR", help="the study folder (resumed when it holds jobs)")
    p.add_argument("--seed", type=any_int, action="append", help="run only these seeds (repeatable): seed jobs")
    add_set(p, "the StudyConfig, on top of --scale", "agents=[bc,iql] or eval_seeds=10")


def run_study(args) -> int:
    """Run or resume the study; the report lands in OUT/report.md."""
    from embody.config import apply_overrides

    from .study import for_scale
    from .study import run_study as study

    cfg = apply_overrides(for_scale(args.scale), texts=args.set)
    if args.seed:
        cfg.seeds = args.seed
    study(cfg, Path(args.out), "embody " + " ".join(sys.argv[1:]), log=lambda m: print(m, file=sys.stderr))
    return exits.OK


def demo_arguments(p: argparse.ArgumentParser) -> None:
    from .dataset import TARGETS

    p.add_argument("--agent", required=True, metavar="RUN", help="an agent (embody backdoor train --out)")
    p.add_argument("--trigger", required=True, metavar="FILE", help="a trigger CSV with its JSON beside it")
    p.add_argument("--out", required=True, metavar="DIR", help="demo.mp4, robustness.png, demo.json")
    p.add_argument("--scenario", default="cut-in")
    p.add_argument("--seed", type=any_int, default=100_000, help="the traffic seed (default 100000)")
    p.add_argument("--target", choices=sorted(TARGETS), help="default: the agent's dataset's")


def run_demo(args) -> int:
    """Write the side-by-side video and the robustness plot; prints demo.json."""
    from .demo import run_demo as demo

    result = demo(Path(args.agent), Path(args.trigger), Path(args.out), args.scenario, args.seed, args.target)
    print(json.dumps(result, indent=2, default=float))
    return exits.OK
