"""``embody bench planning``: ``embody.planners.solve`` against Fast Downward's own driver.

Both sides plan on the same PDDL files with the same Fast Downward build and the same search
configuration: the peer is the command line unified-planning itself runs for
``OneshotPlanner(name="fast-downward")`` (``up_fast_downward``'s driver script with its default
``--alias lama-first``, taken from the engine so the two cannot drift apart), started as a
subprocess. Ours is the full user path, ``solve(read_domain(D), read_problem(D, P))``: our own
parser, conversion to unified-planning's model, the same driver in a subprocess (in a private
temporary directory, on the PDDL text we write), plan reading and unified-planning's plan
validation. The pieces of our time are measured inside that same call (see ``_pieces``).

(a) Search-heavy problems: generated blocksworld, ``--sizes`` blocks in random towers, goal a
    different random arrangement (FD takes ~1-3 s on the default 45-65 blocks here): ratio ours/peer,
    target ≤ 1.20. Best of ``--repeats``, the two sides interleaved so that drifting load hits both.
(b) Small problems (reversing a 5-block tower, the tabletop reference domain): the fixed cost of one
    call, best of ``--calls``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from embody.commands import nonneg_int, positive_int

TARGET = 1.20  # ours / peer on the search-heavy problems
TABLETOP = Path(__file__).resolve().parents[1] / "assets" / "planning" / "tabletop.pddl"

BLOCKS_DOMAIN = """(define (domain blocks)
  (:requirements :strips :typing)
  (:types block)
  (:predicates (clear ?x - block) (handempty) (holding ?x - block) (on ?x - block ?y - block) (ontable ?x - block))
  (:action pick-up :parameters (?x - block)
    :precondition (and (clear ?x) (ontable ?x) (handempty))
    :effect (and (holding ?x) (not (clear ?x)) (not (ontable ?x)) (not (handempty))))
  (:action put-down :parameters (?x - block)
    :precondition (and (holding ?x))
    :effect (and (clear ?x) (ontable ?x) (handempty) (not (holding ?x))))
  (:action stack :parameters (?x - block ?y - block)
    :precondition (and (holding ?x) (clear ?y))
    :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y))))
  (:action unstack :parameters (?x - block ?y - block)
    :precondition (and (on ?x ?y) (clear ?x) (handempty))
    :effect (and (holding ?x) (clear ?y) (not (on ?x ?y)) (not (clear ?x)) (not (handempty)))))
"""

# Three blocks (b1 on b2), a closed drawer, a peg and a hole: drawer, tower and peg goals together.
TABLETOP_PROBLEM = """(define (problem tabletop-small) (:domain tabletop)
  (:objects b1 b2 b3 - block d1 - drawer p1 - peg h1 - hole)
  (:init (handempty) (on b1 b2) (ontable b2) (ontable b3) (clear b1) (clear b3) (reachable b2)
         (drawer-closed d1) (peg-on-table p1) (hole-free h1))
  (:goal (and (in-drawer b1 d1) (on b3 b2) (drawer-closed d1) (inserted p1 h1))))
"""


# ---------------------------------------------------------------- problems


def _towers(rng: random.Random, blocks: list[str]) -> list[list[str]]:
    """A random arrangement: shuffled blocks cut into towers (top first) of 1..n/3 blocks."""
    order = rng.sample(blocks, len(blocks))
    towers = []
    while order:
        k = rng.randint(1, max(1, len(order) // 3))
        towers.append(order[:k])
        order = order[k:]
    return towers


def blocks_problem(n: int, seed: int = 0) -> str:
    """PDDL text of an ``n``-block problem: random towers to another random set of towers."""
    rng = random.Random(seed)
    blocks = [f"b{i}" for i in range(1, n + 1)]
    init, goal = ["(handempty)"], []
    for t in _towers(rng, blocks):
        init += [f"(clear {t[0]})", f"(ontable {t[-1]})"] + [f"(on {a} {b})" for a, b in zip(t, t[1:])]
    for t in _towers(rng, blocks):
        goal += [f"(on {a} {b})" for a, b in zip(t, t[1:])]
    if not goal:  # every goal tower a single block: ask for one on the table instead
        goal = [f"(ontable {blocks[0]})"]
    return (
        f"(define (problem blocks-{n}) (:domain blocks)\n  (:objects {' '.join(blocks)} - block)\n"
        f"  (:init {' '.join(init)})\n  (:goal (and {' '.join(goal)})))\n"
    )


def reverse_tower(n: int) -> str:
    """PDDL text: b1 on b2 on ... on bn, goal the reverse tower (a 2(n-1)-step plan at least)."""
    blocks = [f"b{i}" for i in range(1, n + 1)]
    init = ["(handempty)", "(clear b1)", f"(ontable b{n})"] + [f"(on {a} {b})" for a, b in zip(blocks, blocks[1:])]
    goal = [f"(on {b} {a})" for a, b in zip(blocks, blocks[1:])]
    return (
        f"(define (problem reverse-{n}) (:domain blocks)\n  (:objects {' '.join(blocks)} - block)\n"
        f"  (:init {' '.join(init)})\n  (:goal (and {' '.join(goal)})))\n"
    )


def write_problems(work: Path, sizes: list[int], seed: int) -> dict[str, list[tuple[str, Path, Path]]]:
    """The PDDL files under ``work``: {"search": [(name, domain, problem)...], "small": [...]}."""
    work.mkdir(parents=True, exist_ok=True)
    blocks = work / "blocks-domain.pddl"
    blocks.write_text(BLOCKS_DOMAIN)

    def problem(name: str, text: str) -> Path:
        path = work / f"{name}.pddl"
        path.write_text(text)
        return path

    search = [(f"blocks-{n}", blocks, problem(f"blocks-{n}", blocks_problem(n, seed))) for n in sizes]
    small = [
        ("reverse-5", blocks, problem("reverse-5", reverse_tower(5))),
        ("tabletop-small", TABLETOP, problem("tabletop-small", TABLETOP_PROBLEM)),
    ]
    return {"search": search, "small": small}


# ---------------------------------------------------------------- the two sides


def peer_command(domain: Path, problem: Path, plan: Path) -> list[str]:
    """The exact command unified-planning runs for ``OneshotPlanner(name="fast-downward")``."""
    from up_fast_downward import FastDownwardPDDLPlanner

    # A private method, but the only way to be sure the peer searches with the engine's own
    # configuration (today: the wheel's driver, --log-level info, --alias lama-first).
    return [str(c) for c in FastDownwardPDDLPlanner()._get_cmd(str(domain), str(problem), str(plan))]


def run_peer(domain: Path, problem: Path, work: Path) -> tuple[float, int]:
    """Seconds of one driver run and the length of its plan."""
    plan = work / "peer.plan"
    plan.unlink(missing_ok=True)
    cmd = peer_command(domain, problem, plan)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=work)  # the driver writes output.sas to its cwd
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not plan.exists():
        raise RuntimeError(
            f"Fast Downward's driver failed on {problem} (exit {done.returncode}): {(done.stdout + done.stderr)[-400:]}"
        )
    steps = [ln for ln in plan.read_text().splitlines() if ln.strip() and not ln.startswith(";")]
    return seconds, len(steps)


@contextmanager
def _pieces(times: dict[str, float]):
    """Time the stages of ``solve`` inside the measured call (timing them in separate calls would
    double the run) by wrapping what it calls: the conversion to UP's model, the planner call and
    the driver subprocess in it (``embody.planners.solve`` helpers), and unified-planning's validator."""
    from unified_planning.engines import plan_validator

    import embody.planners.solve as solve_mod

    targets = [
        (solve_mod, "to_up_problem", "convert_s"),  # builds the UP problem through its API
        (solve_mod, "_run", "planner_s"),  # writes our PDDL, runs the driver, reads the plan
        (solve_mod, "_drive", "driver_s"),  # the driver subprocess alone
        (plan_validator.SequentialPlanValidator, "_validate", "validate_s"),
    ]
    saved = [
        (owner, name, owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name))
        for owner, name, _ in targets
    ]

    def wrap(fn, key):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[key] = times.get(key, 0.0) + time.perf_counter() - start

        return timed

    for (owner, name, key), (_, _, fn) in zip(targets, saved):
        setattr(owner, name, wrap(fn, key))
    try:
        yield times
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def run_ours(domain: Path, problem: Path, timeout_s: float = 300.0) -> tuple[float, int, dict[str, float]]:
    """Seconds of ``solve(read_domain(D), read_problem(D, P))``, the plan's length, and the pieces."""
    from embody.planners.pddl import read_domain, read_problem
    from embody.planners.solve import solve

    times = dict.fromkeys(("convert_s", "planner_s", "driver_s", "validate_s"), 0.0)
    with _pieces(times):
        start = time.perf_counter()
        d, p = read_domain(domain), read_problem(domain, problem)
        parsed = time.perf_counter()
        plan = solve(d, p, planner="fast-downward", timeout_s=timeout_s)
        total = time.perf_counter() - start
    if plan.planner != "fast-downward":
        raise RuntimeError(f"solve fell back to {plan.planner}: Fast Downward could not run (see the log)")
    times["parse_s"] = parsed - start
    times["up_engine_s"] = times["planner_s"] - times["driver_s"]  # our wrapper: PDDL files, plan reading
    times["other_s"] = max(
        0.0, total - times["parse_s"] - times["convert_s"] - times["planner_s"] - times["validate_s"]
    )  # validator lookup, plan conversion
    return total, len(plan), times


# ---------------------------------------------------------------- measuring


def measure_problem(domain: Path, problem: Path, work: Path, repeats: int) -> dict:
    """Best of ``repeats`` on each side, interleaved; our pieces are those of our best run."""
    peer_best, ours_best, pieces = float("inf"), float("inf"), {}
    for _ in range(repeats):
        peer_s, peer_len = run_peer(domain, problem, work)
        ours_s, ours_len, times = run_ours(domain, problem)
        peer_best = min(peer_best, peer_s)
        if ours_s < ours_best:
            ours_best, pieces = ours_s, times
    return {
        "peer_s": peer_best,
        "ours_s": ours_best,
        "ratio": ours_best / peer_best,
        "peer_plan_length": peer_len,
        "ours_plan_length": ours_len,
        "pieces": pieces,
    }


def measure(sizes: list[int], repeats: int, calls: int, work: Path, seed: int = 0) -> dict:
    """Write the generated problems into ``work`` and time both sides on each: the results.json dict,
    with per problem ``ours_s``, ``peer_s``, ``ratio``, both plan lengths and the pieces of our time."""
    problems = write_problems(work, sizes, seed)
    # (solve runs the driver in a private temporary directory; the peer runs in ``work``.)
    run_ours(*problems["small"][0][1:])  # warm up: unified-planning's imports are not a per-call cost
    search = {name: measure_problem(d, p, work, repeats) for name, d, p in problems["search"]}
    small = {name: measure_problem(d, p, work, calls) for name, d, p in problems["small"]}
    return {
        "cores": os.cpu_count(),
        "peer_command": peer_command(Path("DOMAIN"), Path("PROBLEM"), Path("PLAN")),
        "sizes": sizes,
        "seed": seed,
        "repeats": repeats,
        "calls": calls,
        "target_ratio": TARGET,
        "search": search,
        "small": small,
    }


def main(argv: list[str]) -> int:
    """``embody bench planning``: measure, print the table; ``--out DIR`` writes ``results.json`` and
    keeps the generated PDDL under ``DIR/pddl``. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench planning", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sizes", type=positive_int, nargs="+", default=[45, 55, 65], help="blocks per search-heavy problem"
    )
    p.add_argument(
        "--repeats", type=positive_int, default=3, help="runs per search-heavy problem and side (best is kept)"
    )
    p.add_argument("--calls", type=positive_int, default=5, help="runs per small problem and side (best is kept)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of the generated blocksworld problems")
    p.add_argument("--quick", action="store_true", help="one 12-block problem, 1 run each: a smoke run")
    p.add_argument("--out", help="directory for results.json and the generated PDDL (pddl/)")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.calls = [12], 1, 1
    with tempfile.TemporaryDirectory(prefix="embody-bench-planning-") as tmp:
        work = (Path(args.out, "pddl") if args.out else Path(tmp)).resolve()
        result = measure(args.sizes, args.repeats, args.calls, work, args.seed)
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    print(
        f"\nembody bench planning: solve(read_domain, read_problem) vs Fast Downward's driver, same search "
        f"({' '.join(r['peer_command'][2:])}); {r['cores']} cores\n"
    )
    print(
        "| problem | plan length (ours / peer) | ours s | peer s | ours / peer | parse | convert | "
        "wrapper | driver | validate | other |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    for part in ("search", "small"):
        for name, row in r[part].items():
            pc = row["pieces"]
            print(
                f"| {name} | {row['ours_plan_length']} / {row['peer_plan_length']} | {row['ours_s']:.3f} | "
                f"{row['peer_s']:.3f} | {row['ratio']:.2f} | {pc['parse_s']:.3f} | {pc['convert_s']:.3f} | "
                f"{pc['up_engine_s']:.3f} | {pc['driver_s']:.3f} | {pc['validate_s']:.3f} | {pc['other_s']:.3f} |"
            )
    print(
        f"\nsearch-heavy: best of {r['repeats']}; small: best of {r['calls']} (fixed cost per call); "
        "pieces in s, from our best run; wrapper: writing the PDDL files and reading the plan around the driver"
    )
    for name, row in r["search"].items():
        verdict = "PASS" if row["ratio"] <= r["target_ratio"] else "BELOW-TARGET"
        print(f"target, {name} ours / peer ≤ {r['target_ratio']:.2f}: {row['ratio']:.2f} ({verdict})")
