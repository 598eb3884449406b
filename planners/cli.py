"""``embody plan``: learn, fuse, solve, task, demo (UniDomain's plugin adds ``plan eval``).

Exit codes (every subcommand, ``embody.exits``): 0 solved/done, 2 input error (malformed PDDL, traces,
library, instruction; contradicting domains), 3 unsolvable, 4 timeout, 5 planner not available; the
errors carry their codes. Plans are written in the IPC format: one ``(action arg ...)`` per line, then
``; cost = N``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embody import exits
from embody.commands import command, fraction, group, positive_float


def _say(*parts) -> None:
    print(*parts, file=sys.stderr)


def _write_plan(plan, out: str | None) -> None:
    text = plan.to_text()
    if out:
        from embody.files import write_atomic

        write_atomic(out, text)
        _say(f"plan of {len(plan)} steps ({plan.planner}, {plan.time_s:.2f} s) written to {out}")
    else:
        sys.stdout.write(text)


def _read_problem(path: str, domain, domain_path: str, renames: dict | None = None):
    """A user's problem: read against its own domain file when it names that domain; otherwise
    parsed on its own and translated into the domain's vocabulary."""
    from embody.planners.pddl import parse_problem_text, read_problem, read_text
    from embody.planners.retrieve import resolve_problem

    problem = parse_problem_text(read_text(path), path)
    if problem.domain_name == domain.name.lower() and not renames:
        return read_problem(domain_path, path)
    resolved, notes = resolve_problem(problem, domain, renames)
    for n in notes:
        _say(f"{path}: {n}")
    return resolved


# ---------------------------------------------------------------- subcommands


def _learn(args) -> int:
    from embody.planners.fuse import FusionConfig
    from embody.planners.learn import learn_domain, load_traces
    from embody.planners.pddl import read_domain
    from embody.planners.retrieve import Library

    domains, descs, sources, issues = [], {}, {}, {}
    for path in map(Path, args.traces):
        if path.suffix == ".pddl":
            d = read_domain(path)
        else:
            d, found = learn_domain(load_traces(path), path.stem, min_support=args.min_support, strict=args.strict)
            issues[d.name] = [str(i) for i in found]
            for i in found:
                _say(f"{path}: {i}")
            descs[d.name] = _description(path)
        sources[d.name] = str(path)
        domains.append(d)
    library = Library.build(domains, descs, sources, issues, FusionConfig(embedder=args.embedder))
    root = library.save(args.out)
    s = library.fusion.summary()
    print(json.dumps({"library": str(root), "atomics": len(domains), **s}, indent=1))
    return 0


def _description(path: Path) -> str:
    """A trace file's optional top-level ``"description"`` (what the demonstrations show)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    return data.get("description", "") if isinstance(data, dict) else ""


def _fuse(args) -> int:
    from embody.planners.fuse import FusionConfig, fuse
    from embody.planners.pddl import read_domain, write_domain

    cfg = FusionConfig(embedder=args.embedder, on_conflict="keep" if args.allow_conflicts else "error")
    domains = [read_domain(p) for p in args.domains]
    fusion = fuse(domains, Path(args.out).stem, cfg, unify=not args.no_unify)
    write_domain(fusion.domain, args.out)
    report = fusion.save_report(Path(args.out).with_suffix(".json"))
    for m in fusion.merges:
        _say(m)
    for c in fusion.conflicts:
        _say(f"conflict: {c}")
    print(json.dumps({"domain": args.out, "renames_and_report": str(report), **fusion.summary()}, indent=1))
    return 0


def _solve(args) -> int:
    from embody.planners.pddl import read_domain
    from embody.planners.solve import solve

    domain = read_domain(args.domain)
    renames = None
    if args.renames:
        from embody.planners.fuse import merged_renames

        renames = merged_renames(json.loads(Path(args.renames).read_text())["renames"])
    problem = _read_problem(args.problem, domain, args.domain, renames)
    plan = solve(domain, problem, args.planner or "fast-downward", args.timeout, fallback=args.planner is None)
    _write_plan(plan, args.out)
    return 0


def _task(args) -> int:
    from embody.planners.language import ChatClient, goal_from_instruction
    from embody.planners.pddl import Problem, parse_problem_text, read_text, write_domain
    from embody.planners.retrieve import Library

    library = Library.load(args.library)
    problem = parse_problem_text(read_text(args.problem), args.problem)
    resolved, notes = library.resolve_problem(
        Problem(problem.name, problem.domain_name, problem.objects, problem.init, frozenset())
    )
    for n in notes:
        _say(f"{args.problem}: {n}")
    if args.instruction:
        client = ChatClient(args.llm_url, args.llm_model) if args.llm_url else None
        goal = goal_from_instruction(
            args.instruction,
            resolved.objects,
            library.fusion.domain.predicates,
            client=client,
            resolve=library.resolve_predicate,
        )
    else:
        goal = library.resolve_problem(problem)[0].goal
    resolved = Problem(resolved.name, resolved.domain_name, resolved.objects, resolved.init, goal)
    _say("goal:", " ".join(map(str, sorted(goal))))
    task = library.plan_task(
        resolved, args.instruction, args.planner or "fast-downward", args.timeout, fallback=args.planner is None
    )
    for name in task.retrieval.selected:
        _say(f"retrieved {name}: {task.retrieval.reasons[name]}")
    if args.meta_out:
        write_domain(task.meta.domain, args.meta_out)
    _write_plan(task.plan, args.out)
    return 0


def _demo(args) -> int:
    from embody.planners.demo import DemoConfig, run_demo

    report = run_demo(
        DemoConfig(
            problem=args.problem,
            instruction=args.instruction,
            library=args.library,
            video=not args.no_video,
            perturb=args.perturb,
        ),
        Path(args.out),
    )
    print(json.dumps(report, indent=1))
    return exits.OK if report["goal_reached"] else exits.UNSOLVABLE


# ---------------------------------------------------------------- parser


group("plan", "PDDL planning: learn domains from traces, fuse, solve, plan tasks, demo")


def _common(q: argparse.ArgumentParser, planner: bool = True) -> None:
    q.add_argument("--embedder", default="minilm", choices=("minilm", "lexical"), help="name embeddings")
    if planner:
        q.add_argument(
            "--planner",
            choices=("fast-downward", "fast-downward-opt", "pyperplan"),
            help="default: fast-downward, falling back to pyperplan if it cannot run",
        )
        q.add_argument("--timeout", type=positive_float, default=60.0, help="planning time limit [s]")


def _learn_arguments(q: argparse.ArgumentParser) -> None:
    q.add_argument("traces", nargs="+", help="trace files (JSON, one atomic domain each) or domain .pddl files")
    q.add_argument("--out", required=True, help="library folder")
    q.add_argument("--min-support", type=fraction, default=1.0, help="fraction of occurrences a fact needs")
    q.add_argument("--strict", action="store_true", help="any issue in the traces is an error")
    _common(q, planner=False)


def _fuse_arguments(q: argparse.ArgumentParser) -> None:
    q.add_argument("domains", nargs="+", help="domain .pddl files")
    q.add_argument("--out", required=True, help="fused domain .pddl (the report and rename maps go beside it, .json)")
    q.add_argument("--allow-conflicts", action="store_true", help="keep contradicting operators apart")
    q.add_argument("--no-unify", action="store_true", help="merge identical names only (the naive union)")
    _common(q, planner=False)


def _solve_arguments(q: argparse.ArgumentParser) -> None:
    q.add_argument("--domain", required=True)
    q.add_argument("--problem", required=True)
    q.add_argument("--renames", help="a fusion report (.json from plan fuse) to translate the problem's names")
    q.add_argument("--out", help="plan file (default: stdout)")
    _common(q)


def _task_arguments(q: argparse.ArgumentParser) -> None:
    q.add_argument("instruction", help='e.g. "put b1 in the drawer" ("" : use the problem\'s goal)')
    q.add_argument("--library", required=True)
    q.add_argument("--problem", required=True, help="objects and initial state (any vocabulary)")
    q.add_argument("--out", help="plan file (default: stdout)")
    q.add_argument("--meta-out", help="write the meta-domain here")
    q.add_argument("--llm-url", help="an OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1); default: rules")
    q.add_argument("--llm-model", default="default", help="model name sent to the endpoint")
    _common(q)


def _demo_arguments(q: argparse.ArgumentParser) -> None:
    q.add_argument("--problem", help="a problem in the reference vocabulary (default: the built-in demo)")
    q.add_argument("--instruction", help="the goal as an instruction (rules) instead of the problem's goal")
    q.add_argument("--library", help="plan with domains retrieved from this library (default: the reference domain)")
    q.add_argument("--out", default="runs/plan-demo", help="folder for plan.txt, demo.mp4, report.json")
    q.add_argument("--no-video", action="store_true")
    q.add_argument(
        "--perturb",
        metavar="STEP:KIND:OBJ",
        help="inject a failure after the STEP-th executed step, e.g. "
        "7:drop:b1 (kinds: drop, knock, far, open-drawer, close-drawer)",
    )


command("plan learn", "learn atomic domains from trace files (or take PDDL domains) into a library", _learn_arguments)(
    _learn
)
command("plan fuse", "fuse domains into one (unify names, deduplicate operators, causal graph)", _fuse_arguments)(_fuse)
command("plan solve", "plan a problem in a domain", _solve_arguments)(_solve)
command("plan task", "plan an instruction with domains retrieved from a library", _task_arguments)(_task)
command("plan demo", "plan and execute a task in the tabletop scene, re-planning on failure", _demo_arguments)(_demo)
