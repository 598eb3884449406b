"""A library of atomic domains, and retrieval of the ones a task needs (UniDomain's online step).

A library is a folder written by ``Library.build(...).save(DIR)`` (``embody plan learn``)::

    DIR/library.json        atomic domains: name, file, description, source; the fusion config
    DIR/atomic/NAME.pddl    each atomic domain as learned (or as the user wrote it)
    DIR/unified.pddl        all atomics fused (types and predicates unified, operators deduplicated)
    DIR/unified.json        the fusion report: rename maps, merges, causal edges, provenance

For a task, ``retrieve`` picks atomics (1) by embedding similarity of the instruction to each
atomic's description, then (2) greedily, the atomic that makes the most goal-relevant atoms
reachable, until every goal atom is reachable from the initial state under the delete relaxation
(the causal-graph closure, evaluated on the task's objects). ``Library.meta_domain`` fuses the
retrieved atomics, already in the unified vocabulary, into the meta-domain that is planned with.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from embody.files import write_atomic

from .embed import get_embedder, humanize, similarity
from .fuse import Fusion, FusionConfig, fuse, merged_renames, rename_problem
from .pddl import Atom, Domain, Operator, PDDLError, Problem, check_problem, read_domain, write_domain
from .solve import Plan, solve


@dataclass(frozen=True)
class RetrievalConfig:
    """How many atomics ``retrieve`` takes for their description alone, above which similarity, and at most in all."""

    text_top_k: int = 1  # atomics taken for their description alone (0: none)
    text_threshold: float = 0.35  # ... if at least this similar to the instruction
    max_domains: int = 12


@dataclass
class Atomic:
    """An atomic domain of a library as listed in ``library.json``."""

    name: str
    file: str  # relative to the library folder
    description: str = ""
    source: str = ""  # traces file or PDDL file it came from
    issues: list[str] = field(default_factory=list)


@dataclass
class Retrieval:
    """What ``retrieve`` chose: atomic names in order, why each (name → reason), and whether the goal is reachable."""

    selected: list[str]  # atomic names, in the order chosen
    reasons: dict[str, str]
    goal_reachable: bool  # under the delete relaxation, with the selected atomics


@dataclass
class TaskPlan:
    """What ``plan_task`` returns: the plan in the meta-domain's names, the same steps named by
    skill, the retrieval, the meta-domain's fusion, and notes (e.g. atoms dropped from the problem)."""

    plan: Plan  # in the meta-domain's names
    skills: tuple[Atom, ...]  # the same steps, each action named as in its source domain (the skill)
    retrieval: Retrieval
    meta: Fusion
    notes: list[str]


# ---------------------------------------------------------------- grounding


def _ground(op: Operator, objects: dict[str, str]) -> list[tuple[frozenset[Atom], frozenset[Atom]]]:
    """(preconditions, adds) of every grounding of ``op`` over the typed objects."""
    pools = [[o for o, t in objects.items() if t == typ or typ == "object"] for _, typ in op.params]
    out = []
    for combo in itertools.product(*pools):
        if len(set(combo)) != len(combo):
            continue  # learned operators never bind one object twice
        b = dict(zip((v for v, _ in op.params), combo))
        out.append(
            (
                frozenset(Atom(a.predicate, tuple(b.get(x, x) for x in a.args)) for a in op.preconditions),
                frozenset(Atom(a.predicate, tuple(b.get(x, x) for x in a.args)) for a in op.add),
            )
        )
    return out


def relaxed_reachable(actions: Sequence[tuple[frozenset[Atom], frozenset[Atom]]], init: frozenset[Atom]) -> set[Atom]:
    """Atoms reachable from ``init`` ignoring deletes (fixed point over the ground actions)."""
    reached, todo = set(init), list(actions)
    while True:
        rest = [a for a in todo if not a[0] <= reached]
        fired = [a for a in todo if a[0] <= reached]
        if not fired:
            return reached
        for _, add in fired:
            reached |= add
        todo = rest


def _relevant(actions, goal: frozenset[Atom]) -> set[Atom]:
    """Atoms the goal may depend on: the goal, and the preconditions of actions adding relevant atoms."""
    rel, changed = set(goal), True
    while changed:
        changed = False
        for pre, add in actions:
            if add & rel and not pre <= rel:
                rel |= pre
                changed = True
    return rel


# ---------------------------------------------------------------- vocabulary


def _nearest(name: str, candidates: list[str], embedder: str, threshold: float) -> tuple[str | None, float]:
    if not candidates:
        return None, 0.0
    s = similarity(get_embedder(embedder), [name], candidates)[0]
    i = int(np.argmax(s))
    return (candidates[i] if s[i] >= threshold else None), float(s[i])


def resolve_predicate(
    domain: Domain, name: str, arity: int, embedder: str = "minilm", threshold: float = 0.55
) -> str | None:
    """``name`` if ``domain`` has it with this arity, else its most similar predicate of that arity."""
    arities = {p.name: len(p.params) for p in domain.predicates}
    if arities.get(name) == arity:
        return name
    return _nearest(name, [n for n, k in arities.items() if k == arity], embedder, threshold)[0]


def resolve_problem(
    problem: Problem, domain: Domain, renames: dict | None = None, embedder: str = "minilm", threshold: float = 0.55
) -> tuple[Problem, list[str]]:
    """``problem`` in ``domain``'s vocabulary, restricted to what the domain can talk about.

    Names go through the rename map first, then to the most similar name of the domain (predicates:
    of the same arity). Objects of a type the domain lacks and init atoms it cannot express are
    dropped (noted); a goal atom it cannot express is a ``PDDLError``. Returns the problem and notes.
    """
    problem = rename_problem(problem, renames or {}, domain.name)
    notes: list[str] = []
    tmap: dict[str, str | None] = {t: t for t in domain.types} | {"object": "object"}
    for t in sorted(set(problem.objects.values()) - set(tmap)):
        tmap[t], s = _nearest(t, list(domain.types), embedder, threshold)
        notes.append(
            f"type {t} -> {tmap[t]} (similarity {s:.2f})"
            if tmap[t]
            else f"objects of type {t} dropped (no such type in {domain.name}; best similarity {s:.2f})"
        )
    objects = {o: tmap[t] for o, t in problem.objects.items() if tmap[t]}
    pmap: dict[str, str | None] = {p.name: p.name for p in domain.predicates}
    for a in sorted(problem.init | problem.goal):
        if a.predicate not in pmap:
            pmap[a.predicate] = resolve_predicate(domain, a.predicate, len(a.args), embedder, threshold)
            notes.append(f"predicate {a.predicate} -> {pmap[a.predicate] or 'nothing'}")

    def expressible(a: Atom) -> bool:
        return pmap[a.predicate] is not None and all(x in objects for x in a.args)

    def atoms(s):
        return frozenset(Atom(pmap[a.predicate], a.args) for a in s if expressible(a))

    lost = sorted(str(a) for a in problem.goal if not expressible(a))
    if lost:
        raise PDDLError(f"problem {problem.name}: goal {' '.join(lost)} cannot be expressed in domain {domain.name}")
    dropped = sorted(str(a) for a in problem.init if not expressible(a))
    if dropped:
        notes.append(f"init atoms dropped (not expressible in {domain.name}): {' '.join(dropped)}")
    out = Problem(problem.name, domain.name, objects, atoms(problem.init), atoms(problem.goal))
    check_problem(domain, out)
    return out, notes


# ---------------------------------------------------------------- the library


class Library:
    """Atomic domains, their fusion into one unified vocabulary, and task planning over them
    (folder layout in the module docstring). ``root``: the folder it was loaded from or saved to
    (None for one built and not saved yet)."""

    def __init__(
        self, root: Path | None, atomics: list[Atomic], domains: dict[str, Domain], fusion: Fusion, cfg: FusionConfig
    ):
        self.root, self.atomics, self.domains, self.fusion, self.cfg = root, atomics, domains, fusion, cfg
        self.renames = merged_renames(fusion.renames)

    @classmethod
    def build(
        cls,
        domains: Sequence[Domain],
        descriptions: dict[str, str] | None = None,
        sources: dict[str, str] | None = None,
        issues: dict[str, list[str]] | None = None,
        cfg: FusionConfig = FusionConfig(),
    ) -> Library:
        """A library (not yet saved) of ``domains`` (distinct names), fused with ``cfg``; the optional maps
        are keyed by domain name. Raises what ``fuse`` raises (``FusionConflict``, ``PDDLError``)."""
        descriptions, sources, issues = descriptions or {}, sources or {}, issues or {}
        fusion = fuse(domains, "unified", cfg)
        atomics = [
            Atomic(
                d.name,
                f"atomic/{d.name}.pddl",
                descriptions.get(d.name, ""),
                sources.get(d.name, ""),
                issues.get(d.name, []),
            )
            for d in domains
        ]
        return cls(None, atomics, {d.name: d for d in domains}, fusion, cfg)

    def save(self, root: str | Path) -> Path:
        """Write the library to ``root`` (layout in the module docstring) and return it; every file is
        written atomically and ``library.json`` last, so a folder without it is not a library."""
        root = Path(root)
        for a in self.atomics:
            write_domain(self.domains[a.name], root / a.file)
        write_domain(self.fusion.domain, root / "unified.pddl")
        self.fusion.save_report(root / "unified.json")
        meta = {"atomics": [asdict(a) for a in self.atomics], "fusion_config": asdict(self.cfg)}
        write_atomic(root / "library.json", json.dumps(meta, indent=1))  # last: the library exists once it is there
        self.root = root
        return root

    @classmethod
    def load(cls, root: str | Path) -> Library:
        """Read a library saved by ``save`` and re-fuse its atomics; PDDLError when ``library.json`` is
        missing or malformed or an atomic domain does not parse."""
        root = Path(root)
        try:
            meta = json.loads((root / "library.json").read_text())
            atomics = [Atomic(**a) for a in meta["atomics"]]
            cfg = FusionConfig(**meta["fusion_config"])
        except OSError as e:
            raise PDDLError(f"{root}: not a library (no readable library.json: {e.strerror or e})") from e
        except (ValueError, KeyError, TypeError) as e:
            raise PDDLError(f"{root / 'library.json'}: malformed: {e}") from e
        domains = {a.name: read_domain(root / a.file) for a in atomics}
        # Re-fusing (not reading unified.json) keeps the library one source of truth; it is fast.
        return cls(root, atomics, domains, fuse(list(domains.values()), "unified", cfg), cfg)

    # ------------------------------------------------------------ vocabulary

    def unified_atomic(self, name: str) -> Domain:
        """Atomic ``name`` in the unified vocabulary (types, predicates and actions renamed)."""
        d, r = self.domains[name], self.fusion.renames[name]
        tm, pm, am = r["types"], r["predicates"], r["actions"]

        def atoms(s):
            return frozenset(Atom(pm.get(a.predicate, a.predicate), a.args) for a in s)

        ops = tuple(
            Operator(
                am.get(o.name, o.name),
                tuple((v, tm.get(t, t)) for v, t in o.params),
                atoms(o.preconditions),
                atoms(o.add),
                atoms(o.delete),
            )
            for o in d.operators
        )
        preds = tuple(
            replace(p, name=pm.get(p.name, p.name), params=tuple((v, tm.get(t, t)) for v, t in p.params))
            for p in d.predicates
        )
        return Domain(name, tuple(tm.get(t, t) for t in d.types), preds, ops)

    def resolve_predicate(self, name: str, arity: int, threshold: float = 0.55) -> str | None:
        """The library's predicate for ``name`` (a user's or the reference vocabulary's): the name itself,
        its rename, or the most similar name of the same arity (None below ``threshold``)."""
        return resolve_predicate(
            self.fusion.domain, self.renames["predicates"].get(name, name), arity, self.cfg.embedder, threshold
        )

    def resolve_problem(self, problem: Problem, threshold: float = 0.55) -> tuple[Problem, list[str]]:
        """``problem`` in the library's vocabulary (see ``resolve_problem``)."""
        return resolve_problem(problem, self.fusion.domain, self.renames, self.cfg.embedder, threshold)

    # ------------------------------------------------------------ retrieval

    def retrieve(
        self, problem: Problem, instruction: str | None = None, cfg: RetrievalConfig = RetrievalConfig()
    ) -> Retrieval:
        """Atomics for ``problem`` (already in the library's vocabulary, see ``resolve_problem``)."""
        names = [a.name for a in self.atomics]
        ground = {n: [g for o in self.unified_atomic(n).operators for g in _ground(o, problem.objects)] for n in names}
        text = self.instruction_similarity(instruction) if instruction else np.zeros(len(names))
        selected, reasons = [], {}
        for i in np.argsort(-text)[: cfg.text_top_k if instruction else 0]:
            if text[i] >= cfg.text_threshold:
                selected.append(names[i])
                reasons[names[i]] = f"instruction similarity {text[i]:.2f}"
        relevant = _relevant([g for n in names for g in ground[n]], problem.goal)

        def reach(sel):
            return relaxed_reachable([g for n in sel for g in ground[n]], problem.init)

        current = reach(selected)
        while not problem.goal <= current and len(selected) < cfg.max_domains:
            gains = [
                (len((reach(selected + [n]) - current) & relevant), text[k], n)
                for k, n in enumerate(names)
                if n not in selected
            ]
            if not gains:
                break
            gain, _, best = max(gains)
            if gain == 0:
                break  # no single atomic helps: the goal is unreachable with this library
            selected.append(best)
            reasons[best] = f"makes {gain} goal-relevant atom(s) reachable"
            current = reach(selected)
        return Retrieval(selected, reasons, problem.goal <= current)

    def instruction_similarity(self, instruction: str) -> np.ndarray:
        """(n_atomics,) similarity of the instruction to each atomic's description (or its operator names)."""
        descs = [
            a.description or " ".join(humanize(o.name) for o in self.domains[a.name].operators) for a in self.atomics
        ]
        return similarity(get_embedder(self.cfg.embedder), [instruction], descs)[0]

    def rank_by_instruction(self, instruction: str) -> list[str]:
        """Atomic names, most similar to the instruction first."""
        s = self.instruction_similarity(instruction)
        return [self.atomics[i].name for i in np.argsort(-s, kind="stable")]

    def meta_domain(self, selected: Sequence[str], name: str = "meta") -> Fusion:
        """Fuse the selected atomics (already unified: no further name merging) into one domain."""
        return fuse([self.unified_atomic(n) for n in selected], name, self.cfg, unify=False)

    def plan_task(
        self,
        problem: Problem,
        instruction: str | None = None,
        planner: str = "fast-downward",
        timeout_s: float = 60.0,
        fallback: bool = True,
    ) -> TaskPlan:
        """Resolve ``problem`` (any vocabulary) → retrieve → fuse the meta-domain → plan → skill names.

        Raises ``PDDLError`` when the goal cannot be expressed in the library's vocabulary, and
        what ``solve`` raises (``NoPlan``, ``PlanTimeout``, ``PlannerUnavailable``, ``PlanningError``).
        """
        resolved, notes = self.resolve_problem(problem)
        retrieval = self.retrieve(resolved, instruction)
        meta = self.meta_domain(retrieval.selected)
        in_meta, more = resolve_problem(resolved, meta.domain)
        plan = solve(meta.domain, in_meta, planner, timeout_s, fallback)
        skills = tuple(Atom(self.fusion.original(meta.original(s.predicate)), s.args) for s in plan.steps)
        return TaskPlan(plan, skills, retrieval, meta, notes + more)

    def union_domain(self, name: str = "union") -> Fusion:
        """The naive union of all atomics: identical names merged, nothing else unified."""
        return fuse(list(self.domains.values()), name, self.cfg, unify=False)
