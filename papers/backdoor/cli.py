"""``embody backdoor trigger SPEC --scenario NAME --out DIR``: a trigger (and its patches) from a spec file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embody import exits
from embody.commands import any_int, nonneg_float, nonneg_int, positive_int


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
    cfg = RefineConfig(args.population, max(1, args.population // 4), args.iterations, args.margin, args.seed)
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
