"""Held-out tabletop tasks: compositions that no single demonstration family covers.

Each task is a problem in the reference vocabulary (what a user writes) plus the instruction a
user would give. Templates combine the families' skills: a far block into the drawer needs
push + pick + drawer; a block from the closed drawer onto a tower needs drawer + stack; and so on.
Objects, arrangements and goals are drawn from a seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from embody.planners.pddl import Atom, Problem

from .demos import A, _table


@dataclass(frozen=True)
class Task:
    """A held-out planning task: an ``instruction`` in words, its ``problem`` and the ``template`` it came from."""

    name: str
    instruction: str
    problem: Problem
    template: str


def _objects(blocks, drawer=False, peg=False) -> dict[str, str]:
    objs = {b: "block" for b in blocks}
    if drawer:
        objs["d1"] = "drawer"
    if peg:
        objs.update({"p1": "peg", "h1": "hole", "h2": "hole"})
    return objs


def _peg_init() -> set[Atom]:
    return {A("peg-on-table", "p1"), A("hole-free", "h1"), A("hole-free", "h2")}


def _far_to_drawer(r: random.Random):
    a, b, c = r.sample(["b1", "b2", "b3"], 3)
    init = _table((a, b, c), far=(a,)) | {A("drawer-closed", "d1")}
    goal = {A("in-drawer", a, "d1"), A("drawer-closed", "d1")}
    return f"put the far block {a} in the drawer and close it", _objects((a, b, c), drawer=True), init, goal


def _drawer_to_tower(r: random.Random):
    a, b, c = r.sample(["b1", "b2", "b3"], 3)
    init = _table((b, c)) | {A("drawer-closed", "d1"), A("in-drawer", a, "d1"), A("reachable", a)}
    goal = {A("on", a, b), A("on", b, c)}
    return (
        f"take {a} out of the drawer and build a tower {a} on {b} on {c}",
        _objects((a, b, c), drawer=True),
        init,
        goal,
    )


def _far_on_block(r: random.Random):
    a, b = r.sample(["b1", "b2", "b3"], 2)
    init = _table(("b1", "b2", "b3"), far=(a,))
    return f"stack the far block {a} on {b}", _objects(("b1", "b2", "b3")), init, {A("on", a, b)}


def _peg_and_store(r: random.Random):
    a = r.choice(["b1", "b2"])
    h = r.choice(["h1", "h2"])
    init = _table(("b1", "b2")) | {A("drawer-closed", "d1")} | _peg_init()
    goal = {A("inserted", "p1", h), A("in-drawer", a, "d1")}
    return (
        f"insert the peg into {h} and put {a} in the drawer",
        _objects(("b1", "b2"), drawer=True, peg=True),
        init,
        goal,
    )


def _tower_to_drawer(r: random.Random):
    a, b, c = r.sample(["b1", "b2", "b3"], 3)
    init = {A("handempty"), A("ontable", c), A("on", b, c), A("on", a, b), A("clear", a), A("drawer-closed", "d1")} | {
        A("reachable", x) for x in (a, b, c)
    }
    goal = {A("in-drawer", c, "d1")}
    return f"put {c}, the bottom block of the tower, in the drawer", _objects((a, b, c), drawer=True), init, goal


def _far_peg_tower(r: random.Random):
    a, b = r.sample(["b1", "b2"], 2)
    h = r.choice(["h1", "h2"])
    init = _table(("b1", "b2"), far=(a, b)) | _peg_init()
    goal = {A("on", a, b), A("inserted", "p1", h)}
    return f"stack {a} on {b} and insert the peg into {h}", _objects(("b1", "b2"), peg=True), init, goal


def _swap_drawer(r: random.Random):
    a, b = r.sample(["b1", "b2"], 2)
    init = _table((b,), far=(b,)) | {A("drawer-closed", "d1"), A("in-drawer", a, "d1"), A("reachable", a)}
    goal = {A("in-drawer", b, "d1"), A("ontable", a), A("drawer-closed", "d1")}
    return (
        f"swap: take {a} out of the drawer onto the table, put the far block {b} in and close the drawer",
        _objects((a, b), drawer=True),
        init,
        goal,
    )


def _far_drawer_tower(r: random.Random):
    a, b, c = r.sample(["b1", "b2", "b3"], 3)
    init = _table((a, b, c), far=(a,)) | {A("drawer-closed", "d1")}
    goal = {A("in-drawer", a, "d1"), A("on", b, c)}
    return f"put the far block {a} in the drawer and stack {b} on {c}", _objects((a, b, c), drawer=True), init, goal


def _drawer_peg_tower(r: random.Random):
    a, b = r.sample(["b1", "b2"], 2)
    h = r.choice(["h1", "h2"])
    init = _table((b,)) | {A("drawer-closed", "d1"), A("in-drawer", a, "d1"), A("reachable", a)} | _peg_init()
    goal = {A("on", a, b), A("inserted", "p1", h)}
    return (
        f"take {a} from the drawer, stack it on {b} and insert the peg into {h}",
        _objects((a, b), drawer=True, peg=True),
        init,
        goal,
    )


def _far_store_peg(r: random.Random):
    a, b = r.sample(["b1", "b2"], 2)
    h = r.choice(["h1", "h2"])
    init = _table((a, b), far=(a,)) | {A("drawer-closed", "d1")} | _peg_init()
    goal = {A("in-drawer", a, "d1"), A("drawer-closed", "d1"), A("inserted", "p1", h)}
    return (
        f"put the far block {a} in the drawer, close it and insert the peg into {h}",
        _objects((a, b), drawer=True, peg=True),
        init,
        goal,
    )


TEMPLATES = {
    # Which demonstration families each needs (at least): see min_families in study.py.
    "far-to-drawer": _far_to_drawer,  # push + pick + drawer-store
    "drawer-to-tower": _drawer_to_tower,  # drawer-fetch + stack
    "far-on-block": _far_on_block,  # push + stack
    "peg-and-store": _peg_and_store,  # peg + drawer-store
    "tower-to-drawer": _tower_to_drawer,  # unstack + drawer-store
    "far-peg-tower": _far_peg_tower,  # push + stack + peg
    "swap-drawer": _swap_drawer,  # drawer-fetch + push (+ drawer-store)
    "far-drawer-tower": _far_drawer_tower,  # push + drawer + stack
    "drawer-peg-tower": _drawer_peg_tower,  # drawer-fetch + stack + peg
    "far-store-peg": _far_store_peg,  # push + drawer-store + peg
}


def held_out_tasks(n: int, seed: int = 0) -> list[Task]:
    """``n`` tasks cycling through the templates, objects and goals drawn with ``seed``."""
    r = random.Random(seed)
    names = list(TEMPLATES)
    out = []
    for i in range(n):
        template = names[i % len(names)]
        instruction, objects, init, goal = TEMPLATES[template](r)
        problem = Problem(f"task{i:02d}", "tabletop", objects, frozenset(init), frozenset(goal))
        out.append(Task(f"task{i:02d}-{template}", instruction, problem, template))
    return out
