"""Does retrieval matter as the library grows? Planning time with distractor atomic domains.

UniDomain's unified domain has thousands of operators, and retrieving a small meta-domain is
what keeps planning tractable. Our six families give 11 operators, too few to tell. Here the
library is padded with *distractor* atomic domains: copies of the learned atomics whose types,
predicates and actions are renamed to fresh pseudo-words, so nothing unifies them with the real
ones (as unrelated skills from other demonstrations would be). Each library size plans the same
held-out tasks with the retrieved meta-domain and with the unified domain.
"""

from __future__ import annotations

import random
import time

from embody.planners.pddl import Atom, Domain, Operator, Predicate
from embody.planners.retrieve import Library, resolve_problem
from embody.planners.solve import NoPlan, PlanningError, solve, validate

SYLLABLES = ("ka", "lo", "mi", "ne", "pu", "ro", "si", "ta", "vu", "zo", "be", "du", "fi", "go", "hu", "ja")


def _word(rng: random.Random, used: set[str]) -> str:
    while True:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(3, 4)))
        if w not in used:
            used.add(w)
            return w


def distractor(domain: Domain, name: str, rng: random.Random, used: set[str]) -> Domain:
    """``domain`` with every type, predicate and action renamed to a fresh pseudo-word."""
    names = {t: _word(rng, used) for t in domain.types}
    names |= {p.name: _word(rng, used) for p in domain.predicates}
    names |= {o.name: _word(rng, used) for o in domain.operators}

    def atoms(s):
        return frozenset(Atom(names[a.predicate], a.args) for a in s)

    def params(ps):
        return tuple((v, names.get(t, t)) for v, t in ps)

    return Domain(
        name,
        tuple(names[t] for t in domain.types),
        tuple(Predicate(names[p.name], params(p.params)) for p in domain.predicates),
        tuple(
            Operator(names[o.name], params(o.params), atoms(o.preconditions), atoms(o.add), atoms(o.delete))
            for o in domain.operators
        ),
    )


def padded_library(library: Library, n: int, seed: int = 0) -> Library:
    """``library``'s atomics plus ``n`` distractors (cycling through them as templates)."""
    rng, used = random.Random(seed), set()
    real = list(library.domains.values())
    extra = [distractor(real[i % len(real)], f"distractor-{i:04d}", rng, used) for i in range(n)]
    descs = {a.name: a.description for a in library.atomics}
    return Library.build(real + extra, descs, cfg=library.cfg)


def scaling(
    library: Library, tasks: list, sizes: tuple[int, ...], planner: str, timeout_s: float, ref: Domain
) -> list[dict]:
    """Per library size: build time, unified operators, mean meta / unified planning time and success."""
    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        lib = padded_library(library, n)
        row = {
            "distractors": n,
            "atomics": len(lib.atomics),
            "operators": len(lib.fusion.domain.operators),
            "build_s": time.perf_counter() - t0,
        }
        for variant in ("meta", "unified"):
            ok, times = 0, []
            for task in tasks:
                t0 = time.perf_counter()
                try:
                    steps = _plan(lib, task, variant, planner, timeout_s)
                    ok += validate(ref, task.problem, steps) is None
                except (NoPlan, PlanningError, ValueError):
                    pass
                times.append(time.perf_counter() - t0)
            row[variant] = {"solved": ok, "tasks": len(tasks), "mean_time_s": sum(times) / len(times)}
        rows.append(row)
    return rows


def _plan(lib: Library, task, variant: str, planner: str, timeout_s: float) -> tuple[Atom, ...]:
    if variant == "meta":
        return lib.plan_task(task.problem, task.instruction, planner, timeout_s).skills
    d = lib.fusion.domain
    plan = solve(d, resolve_problem(task.problem, d, lib.renames, lib.cfg.embedder)[0], planner, timeout_s)
    return tuple(Atom(lib.fusion.original(s.predicate), s.args) for s in plan.steps)
