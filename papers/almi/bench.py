"""``embody bench almi-gpu``: ALMI's tasks on the GPU path (``--sim mjx``), run by ``scripts/gpu_check.sh``.

For ``almi-lower`` (legs under velocity commands, the arms playing clips) and ``almi-upper`` (the arms tracking clips,
the legs driven by the frozen lower policy): the vector env's env-steps/s on MJX and on MuJoCo's CPU path (the peer,
same run) with the simulator's share of the time, then PPO on ``almi-lower`` on MJX for ``--budget`` seconds.
``--tiny`` sizes it for a CPU (4 envs, one 8-step PPO iteration).
"""

from __future__ import annotations

import argparse

from embody.benchmarks import save_results
from embody.benchmarks.gpu import TINY_TRAIN, env_rates, print_env_rows, train_rates
from embody.commands import positive_float, positive_int

TASKS = ("almi-lower", "almi-upper")


def main(argv: list[str]) -> int:
    """Measure, print the table; ``--out DIR`` writes ``results.json``. Returns 0."""
    p = argparse.ArgumentParser(
        prog="embody bench almi-gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--envs", type=positive_int, default=4096)
    p.add_argument("--steps", type=positive_int, default=50, help="timed env steps per task and simulator")
    p.add_argument("--budget", type=positive_float, default=120.0, help="seconds of PPO on almi-lower on MJX")
    p.add_argument("--tiny", action="store_true", help="4 envs, 3 steps, one 8-step PPO iteration: the CPU check")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    steps, overrides = (32, TINY_TRAIN) if args.tiny else (None, [])
    if args.tiny:
        args.envs, args.steps = 4, 3
    result = {"envs": args.envs, "env": {t: env_rates(t, args.envs, args.steps) for t in TASKS}}
    result["train"] = train_rates("almi-lower", args.envs, args.budget, steps, overrides)
    print(f"\nembody bench almi-gpu: {args.envs} envs\n\n| measure | env-steps/s | notes |\n|---|---|---|")
    for task, rates in result["env"].items():
        print_env_rows(task, rates)
    t = result["train"]
    print(
        f"| PPO on almi-lower, MJX | {t['env_steps_per_s']:,.0f} | {t['env_steps']:,} env steps in {t['train_s']:.0f} s |"
    )
    save_results(args.out, result)
    return 0
