"""Demonstrations in the tabletop scene, annotated in different vocabularies: the atomic domains' sources.

UniDomain extracts atomic domains from videos with a vision-language model, so the same fact is
named differently from one video to the next. Here each *family* of demonstrations (one kind of
short task) is executed by the scene's scripted skills and its facts are reported by the scene's
symbolic abstraction, then renamed with the family's *annotator vocabulary* (``VOCABS``): a
deterministic stand-in for a VLM's naming, so that fusion has real synonyms to unify and the
study knows the true correspondence. Action names stay the skills' names (the robot knows which
skill it ran).

``SymbolicScene`` applies the reference domain instead of physics (same interface as
``TabletopScene``): for unit tests and for users without MuJoCo.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from embody.assets import asset_path
from embody.planners.learn import Step, Trace
from embody.planners.pddl import Atom, Domain, read_domain
from embody.planners.tabletop.scene import SkillResult

REFERENCE = asset_path("planning/tabletop.pddl")

# Annotator vocabularies: reference name -> the name this annotator uses (types and predicates).
VOCABS: dict[str, dict[str, str]] = {
    "ref": {},
    "grasp": {
        "block": "cube",
        "holding": "grasped",
        "ontable": "on-table",
        "clear": "clear-top",
        "handempty": "hand-empty",
        "on": "stacked-on",
    },
    "reach": {"reachable": "within-reach", "handempty": "gripper-empty", "holding": "in-hand"},
    "store": {
        "drawer-open": "is-open",
        "drawer-closed": "is-closed",
        "in-drawer": "stored-in",
        "handempty": "empty-hand",
        "holding": "holds",
    },
    "peg": {
        "holding-peg": "peg-held",
        "peg-on-table": "peg-upright",
        "hole-free": "hole-empty",
        "inserted": "inserted-into",
        "handempty": "hand-free",
    },
}

Demo = tuple[dict[str, str], frozenset[Atom], list[tuple[str, ...]]]  # objects, init, actions


def A(*s: str) -> Atom:
    """An atom from its predicate and arguments: ``A("on", "a", "b")``."""
    return Atom(s[0], tuple(s[1:]))


def _table(blocks, far=()) -> set[Atom]:
    return (
        {A("handempty")}
        | {A(p, b) for b in blocks for p in ("ontable", "clear")}
        | {A("reachable", b) for b in blocks if b not in far}
    )


def _stack_demo(rng: random.Random, i: int) -> Demo:
    a, b, c = rng.sample(["b1", "b2", "b3"], 3)
    acts = [
        ("pick-up", a),
        ("stack", a, b),
        ("pick-up", c),
        ("stack", c, a),
        ("unstack", c, a),
        ("put-down", c),
        ("unstack", a, b),
        ("put-down", a),
    ]
    return {x: "block" for x in (a, b, c)}, frozenset(_table((a, b, c))), acts


def _tower_demo(rng: random.Random, i: int) -> Demo:
    a, b, c = rng.sample(["b1", "b2", "b3"], 3)
    acts = [("pick-up", b), ("stack", b, c), ("pick-up", a), ("stack", a, b)]
    return {x: "block" for x in (a, b, c)}, frozenset(_table((a, b, c))), acts


def _push_demo(rng: random.Random, i: int) -> Demo:
    a, b = rng.sample(["b1", "b2"], 2)
    acts = [("push", a), ("pick-up", a), ("put-down", a)]
    return {a: "block", b: "block"}, frozenset(_table((a, b), far=(a,))), acts


def _store_demo(rng: random.Random, i: int) -> Demo:
    a, b = rng.sample(["b1", "b2"], 2)
    objs = {a: "block", b: "block", "d1": "drawer"}
    acts = [("open-drawer", "d1"), ("pick-up", a), ("put-in-drawer", a, "d1"), ("close-drawer", "d1")]
    return objs, frozenset(_table((a, b)) | {A("drawer-closed", "d1")}), acts


def _fetch_demo(rng: random.Random, i: int) -> Demo:
    a, b = rng.sample(["b1", "b2"], 2)
    objs = {a: "block", b: "block", "d1": "drawer"}
    init = _table((b,)) | {A("drawer-closed", "d1"), A("in-drawer", a, "d1"), A("reachable", a)}
    # Take the block out onto the table, or (every other demonstration) look at it and put it back.
    end = [("put-down", a)] if i % 2 == 0 else [("put-in-drawer", a, "d1")]
    acts = [("open-drawer", "d1"), ("take-from-drawer", a, "d1"), *end, ("close-drawer", "d1")]
    return objs, frozenset(init), acts


def _peg_demo(rng: random.Random, i: int) -> Demo:
    h = rng.choice(["h1", "h2"])
    objs = {"p1": "peg", "h1": "hole", "h2": "hole"}
    init = {A("handempty"), A("peg-on-table", "p1"), A("hole-free", "h1"), A("hole-free", "h2")}
    return objs, frozenset(init), [("pick-peg", "p1"), ("insert-peg", "p1", h)]


@dataclass(frozen=True)
class Family:
    """A family of demonstrations in one vocabulary; ``make`` records demonstration ``i`` with ``rng``."""

    name: str
    vocab: str
    description: str  # what a person would say the demonstrations show (used for retrieval)
    make: Callable[[random.Random, int], Demo]  # (rng, demonstration index)


FAMILIES = (
    Family("stack-blocks", "ref", "stack blocks into a tower and take the tower apart", _stack_demo),
    Family("build-tower", "grasp", "pick up cubes and build a tower", _tower_demo),
    Family("push-reach", "reach", "push a far block within reach, then pick it up and put it down", _push_demo),
    Family("drawer-store", "store", "open the drawer, put a block inside and close it", _store_demo),
    Family(
        "drawer-fetch",
        "ref",
        "open the drawer, take a block out (onto the table, or back in) and close it",
        _fetch_demo,
    ),
    Family("peg-insert", "peg", "pick up the peg and insert it into a hole", _peg_demo),
)


class SymbolicScene:
    """The scene's interface with the reference domain as its physics (no MuJoCo)."""

    def __init__(self, domain: Domain | None = None):
        self.domain = domain or read_domain(REFERENCE)
        self._objects: dict[str, str] = {}
        self._facts: frozenset[Atom] = frozenset()

    def setup(self, objects: dict[str, str], init: frozenset[Atom]) -> None:
        self._objects, self._facts = dict(objects), frozenset(init)

    def objects(self) -> dict[str, str]:
        return dict(self._objects)

    def facts(self) -> frozenset[Atom]:
        return self._facts

    def run(self, action: str, args: tuple[str, ...]):
        """Apply the reference operator ``action`` to ``args``; fails, leaving the facts as they are, if a precondition
        does not hold."""
        op = self.domain.operator(action)
        b = {v: a for (v, _), a in zip(op.params, args)}

        def g(s):
            return frozenset(Atom(x.predicate, tuple(b[y] for y in x.args)) for x in s)

        if not g(op.preconditions) <= self._facts:
            return SkillResult(False, f"{action}{args}: preconditions do not hold")
        self._facts = (self._facts - g(op.delete)) | g(op.add)
        return SkillResult(True, "")


def rename(atoms: frozenset[Atom], vocab: dict[str, str]) -> frozenset[Atom]:
    """``atoms`` with their predicates renamed by ``vocab`` (unlisted ones kept)."""
    return frozenset(Atom(vocab.get(a.predicate, a.predicate), a.args) for a in atoms)


def _missed(facts: frozenset[Atom], noise: float, rng: random.Random) -> frozenset[Atom]:
    """Perception noise: with probability ``noise`` one fact of the state goes undetected."""
    if facts and rng.random() < noise:
        return facts - {rng.choice(sorted(facts))}
    return facts


def record_family(family: Family, n: int, scene, seed: int = 0, noise: float = 0.0) -> tuple[list[Trace], list[str]]:
    """``n`` demonstrations of ``family`` executed in ``scene``, as traces in the family's vocabulary.

    ``noise``: the probability that a recorded state misses one of its facts (a detection
    failure of the annotating model). A demonstration whose skill fails is cut at the failure
    (its earlier steps are kept) and reported.
    """
    rng = random.Random(f"{family.name}-{seed}")
    noise_rng = random.Random(f"{family.name}-{seed}-noise")
    vocab = VOCABS[family.vocab]
    traces, failures = [], []
    for i in range(n):
        objects, init, actions = family.make(rng, i)
        scene.setup(objects, init)
        steps = []
        for act in actions:
            before = scene.facts()
            result = scene.run(act[0], tuple(act[1:]))
            if not result.ok:
                failures.append(f"{family.name} demo {i}: {act[0]}{act[1:]} failed: {result.message}")
                break
            before, after = (rename(_missed(x, noise, noise_rng), vocab) for x in (before, scene.facts()))
            steps.append(Step(act[0], tuple(act[1:]), before, after))
        traces.append(Trace(f"{family.name}-{i}", {o: vocab.get(t, t) for o, t in objects.items()}, steps))
    return traces, failures
