"""``embody plan eval``: learn atomic domains from tabletop demonstrations, fuse, retrieve, plan held-out tasks.

1. Record each family's demonstrations in the scene (``demos.py``), in the family's vocabulary.
2. Learn one atomic domain per family; build the library (fusion over all atomics).
3. Score the unification against the known vocabularies (pairwise precision/recall).
4. Re-solve every demonstrated task with its own atomic domain.
5. Plan each held-out task (``tasks.py``) with four domains: the retrieved meta-domain, the single
   atomic most similar to the instruction, the naive union of all atomics (identical names
   merged only) and the unified domain (all atomics fused). Every plan is mapped back to skill
   names and validated on the hand-written reference domain; its length is compared with the
   optimal plan there (Fast Downward, A* + LM-cut).
6. Optionally execute plans in the physical scene (``--execute N``).

Writes ``results.json``, ``report.md`` and PNG plots into the output folder.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from pathlib import Path

from embody.planners.fuse import Fusion, FusionConfig, fuse
from embody.planners.learn import learn_domain, save_traces
from embody.planners.pddl import Atom, Domain, Problem, read_domain
from embody.planners.retrieve import Library, resolve_problem
from embody.planners.solve import NoPlan, PlanningError, solve, validate
from embody.progress import Progress

from .demos import FAMILIES, REFERENCE, VOCABS, SymbolicScene, record_family
from .tasks import held_out_tasks

VARIANTS = ("meta", "single", "union", "unified")


@dataclass(frozen=True)
class StudyConfig:
    """The UniDomain study: learn a domain per demonstration family, fuse them, plan ``tasks`` held-out tasks."""

    scale: str = "tiny"
    demos_per_family: int = 2
    tasks: int = 21
    backend: str = "scene"  # "scene" (MuJoCo skills) | "symbolic" (the reference domain applied)
    planner: str = "fast-downward"
    timeout_s: float = 30.0
    embedder: str = "minilm"
    execute: int = 0  # held-out meta-domain plans to execute in the physical scene
    distractors: tuple[int, ...] = (0, 6)  # library sizes (distractor atomics) for the scaling check
    scaling_tasks: int = 2
    noise: float = 0.0  # probability that a recorded state misses a fact (perception noise)
    min_support: float = 1.0  # learn_domain's: fraction of occurrences a precondition/effect needs
    seed: int = 0

    @classmethod
    def for_scale(cls, scale: str, **kw) -> StudyConfig:
        """The ``tiny`` or ``paper`` configuration, keyword arguments that are not None overriding it; ValueError for
        another scale."""
        if scale not in ("tiny", "paper"):
            raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
        base = (
            dict(demos_per_family=2, tasks=21)
            if scale == "tiny"
            else dict(demos_per_family=5, tasks=42, execute=6, distractors=(0, 30, 300), scaling_tasks=5)
        )
        base.update({k: v for k, v in kw.items() if v is not None})
        return cls(scale=scale, **base)


def _scene(backend: str):
    if backend == "symbolic":
        return SymbolicScene()
    from embody.planners.tabletop import SceneConfig, TabletopScene

    return TabletopScene(SceneConfig(), render=False)


# ---------------------------------------------------------------- steps


def learn_library(cfg: StudyConfig, out: Path) -> tuple[Library, dict]:
    """Record each family's demonstrations (traces into ``out/traces``), learn its domain and build the library
    (saved in ``out/library``); returns it and ``{"traces", "failures"}``."""
    scene = _scene(cfg.backend)
    domains, descs, issues, failures, traces_all = [], {}, {}, [], {}
    for fam in FAMILIES:
        traces, fails = record_family(fam, cfg.demos_per_family, scene, cfg.seed, cfg.noise)
        failures += fails
        save_traces(traces, out / "traces" / f"{fam.name}.json")
        domain, found = learn_domain(traces, fam.name, min_support=cfg.min_support)
        domains.append(domain)
        descs[fam.name] = fam.description
        issues[fam.name] = [str(i) for i in found]
        traces_all[fam.name] = traces
    library = Library.build(
        domains, descs, {f.name: f"traces/{f.name}.json" for f in FAMILIES}, issues, FusionConfig(embedder=cfg.embedder)
    )
    library.save(out / "library")
    return library, {"traces": traces_all, "failures": failures}


def unification_quality(domains: dict[str, Domain], fusion: Fusion) -> dict:
    """Pairwise precision/recall of predicate and type merges against the families' vocabularies."""
    out = {}
    for kind in ("predicates", "types"):
        items = set()  # (family, reference name, unified name) of every name a family wrote
        for f in FAMILIES:
            d, inverse = domains[f.name], {v: k for k, v in VOCABS[f.vocab].items()}
            names = [p.name for p in d.predicates] if kind == "predicates" else list(d.types)
            items |= {(f.name, inverse.get(n, n), fusion.renames[f.name][kind].get(n, n)) for n in names}
        tp = fp = fn = 0
        for (_, r1, u1), (_, r2, u2) in combinations(sorted(items), 2):
            tp += r1 == r2 and u1 == u2
            fp += r1 != r2 and u1 == u2
            fn += r1 == r2 and u1 != u2
        out[kind] = {
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0,
            "false_merges": fp,
            "missed_merges": fn,
        }
    return out


SWEEP_THRESHOLDS = (0.4, 0.5, 0.6, 0.7, 0.8)


def unification_sweep(library: Library) -> list[dict]:
    """Predicate unification quality by embedder, operator-alignment bonus and threshold."""
    rows = []
    domains = list(library.domains.values())
    for embedder in ("minilm", "lexical"):
        for bonus in (0.0, library.cfg.alignment_bonus):
            for th in SWEEP_THRESHOLDS:
                cfg = replace(library.cfg, embedder=embedder, alignment_bonus=bonus, predicate_threshold=th)
                q = unification_quality(library.domains, fuse(domains, "sweep", cfg))["predicates"]
                rows.append({"embedder": embedder, "alignment_bonus": bonus, "threshold": th, **q})
    return rows


def resolve_demos(library: Library, traces: dict, cfg: StudyConfig) -> dict:
    """Each demonstration's task (its first state to its last) re-solved with its own atomic domain."""
    solved = total = 0
    for fam, ts in traces.items():
        for t in ts:
            if not t.steps:
                continue
            total += 1
            first, last = t.steps[0].before, t.steps[-1].after
            goal = frozenset(a for a in last if a not in first)
            if not goal:
                solved += 1
                continue
            p = Problem(t.name, fam, dict(t.objects), first, goal)
            try:
                solve(library.domains[fam], p, cfg.planner, cfg.timeout_s)
                solved += 1
            except (NoPlan, PlanningError):
                pass
    return {"solved": solved, "total": total}


def _attempt(plan_fn, ref: Domain, ref_problem: Problem) -> dict:
    """Run ``plan_fn() -> (skill steps, extra)``; the steps count only if valid on the reference problem."""
    t0 = time.perf_counter()
    try:
        steps, extra = plan_fn()
    except NoPlan as e:
        return {"ok": False, "why": f"no plan: {str(e)[:120]}", "time_s": time.perf_counter() - t0}
    except (PlanningError, ValueError) as e:  # ValueError: PDDLError, the goal is not expressible
        return {"ok": False, "why": f"{type(e).__name__}: {str(e)[:160]}", "time_s": time.perf_counter() - t0}
    elapsed = time.perf_counter() - t0
    why = validate(ref, ref_problem, steps)
    return {
        "ok": why is None,
        "why": why or "",
        "length": len(steps),
        "time_s": elapsed,
        "plan": [str(x) for x in steps],
        **extra,
    }


def _in_domain(domain: Domain, problem: Problem, renames, skill, cfg: StudyConfig):
    """A planning function for ``_attempt``: ``problem`` resolved into ``domain``, actions mapped by ``skill``."""

    def plan_fn():
        resolved, _ = resolve_problem(problem, domain, renames, cfg.embedder)
        plan = solve(domain, resolved, cfg.planner, cfg.timeout_s)
        return tuple(Atom(skill(x.predicate), x.args) for x in plan.steps), {}

    return plan_fn


def _meta(library: Library, task, cfg: StudyConfig):
    """A planning function for the retrieved meta-domain (retrieval and fusion count in its time)."""

    def plan_fn():
        tp = library.plan_task(task.problem, task.instruction, cfg.planner, cfg.timeout_s)
        return tp.skills, {"retrieved": tp.retrieval.selected}

    return plan_fn


def evaluate_tasks(library: Library, cfg: StudyConfig) -> list[dict]:
    """Plan each held-out task with every variant (``meta``, ``single``, ``union``, ``unified``); one row per task with
    the optimal plan from the reference domain."""
    ref = read_domain(REFERENCE)
    union, unified = library.union_domain(), library.fusion
    tasks = held_out_tasks(cfg.tasks, cfg.seed)
    rows = []
    bar = Progress(len(tasks), "plan eval", unit="tasks", every=20.0)
    for k, task in enumerate(tasks):
        p = task.problem
        opt = solve(ref, p, "fast-downward-opt", cfg.timeout_s)
        row = {
            "task": task.name,
            "template": task.template,
            "instruction": task.instruction,
            "optimal": len(opt),
            "optimal_plan": [str(s) for s in opt.steps],
        }
        row["families_needed"] = min_families({s.predicate for s in opt.steps}, library)
        best = library.rank_by_instruction(task.instruction)[0]
        attempts = {
            "meta": _meta(library, task, cfg),
            "single": _in_domain(library.domains[best], p, None, str, cfg),
            "union": _in_domain(union.domain, p, None, union.original, cfg),
            "unified": _in_domain(unified.domain, p, library.renames, unified.original, cfg),
        }
        row.update({v: _attempt(fn, ref, p) for v, fn in attempts.items()})
        row["single"]["atomic"] = best
        rows.append(row)
        bar.update(k + 1, meta_ok=sum(x["meta"]["ok"] for x in rows))
    bar.close()
    return rows


def min_families(skills: set[str], library: Library) -> list[str]:
    """The fewest families whose atomic domains together have every skill of a plan (a set cover)."""
    ops = {f.name: {o.name for o in library.domains[f.name].operators} for f in FAMILIES}
    for k in range(1, len(ops) + 1):
        for combo in combinations(ops, k):
            if skills <= set().union(*(ops[n] for n in combo)):
                return list(combo)
    return sorted(ops)


def summarize(rows: list[dict]) -> dict:
    """Per variant: ``success`` rate, ``solved``, ``tasks``, ``length_ratio`` to optimal, ``optimal_plans``,
    ``mean_time_s``."""
    out = {}
    for v in VARIANTS:
        ok = [r for r in rows if r[v]["ok"]]
        out[v] = {
            "success": len(ok) / len(rows) if rows else 0.0,
            "solved": len(ok),
            "tasks": len(rows),
            "length_ratio": (sum(r[v]["length"] / r["optimal"] for r in ok) / len(ok)) if ok else None,
            "optimal_plans": sum(r[v]["length"] == r["optimal"] for r in ok),
            "mean_time_s": sum(r[v].get("time_s", 0.0) for r in rows) / len(rows) if rows else 0.0,
        }
    return out


def run_study(cfg: StudyConfig, out: str | Path) -> dict:
    """The whole study: learn, evaluate, write ``results.json`` and the report into ``out``; returns the results."""
    out = Path(out)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    library, learned = learn_library(cfg, out)
    t_learn = time.perf_counter() - t0
    result = {
        "config": asdict(cfg),
        "learning": {
            "families": len(FAMILIES),
            "demos": sum(len(t) for t in learned["traces"].values()),
            "skill_failures": learned["failures"],
            "time_s": t_learn,
            "atomics": {
                n: {
                    "operators": len(d.operators),
                    "predicates": len(d.predicates),
                    "issues": len(library.atomics[i].issues),
                }
                for i, (n, d) in enumerate(library.domains.items())
            },
            "demos_resolved": resolve_demos(library, learned["traces"], cfg),
        },
        "unified": library.fusion.summary(),
        "unification": unification_quality(library.domains, library.fusion),
        "unification_sweep": unification_sweep(library),
        "merges": [str(m) for m in library.fusion.merges],
    }
    rows = evaluate_tasks(library, cfg)
    result["tasks"] = rows
    result["summary"] = summarize(rows)
    result["three_plus_families"] = sum(len(r["families_needed"]) >= 3 for r in rows)
    from .scaling import scaling

    result["scaling"] = scaling(
        library,
        held_out_tasks(cfg.scaling_tasks, cfg.seed),
        cfg.distractors,
        cfg.planner,
        cfg.timeout_s,
        read_domain(REFERENCE),
    )
    if cfg.execute:
        from .execute import execute_tasks

        result["execution"] = execute_tasks(rows[: cfg.execute], library, out)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    from .report import write_report

    write_report(result, out)
    return result
