"""The symbolic abstraction: which facts of the reference domain (assets/planning/tabletop.pddl)
hold in the physical state of a World. Closed world: every atom not returned is false.

Every fact is read from geometry, joint positions and the grasp weld, never from which skills ran:

- ``holding ?b`` / ``holding-peg ?p``: that object's grasp weld is active; ``handempty``: none is.
- ``ontable ?b``: not held, not in the drawer, resting flat on the table (centre BLOCK/2 above it).
- ``on ?b1 ?b2``: not held, centre one block height (±ON_TOL) above b2's and within ON_XY of it.
- ``clear ?b``: not held, not in the drawer, and no block on it. (The domain's put-in-drawer
  leaves ``clear`` deleted, so a block in the drawer is not clear.)
- ``reachable ?b``: unless the block rests on the table beyond REACH_RADIUS of the arm's base
  axis (the far zone, where a top-down grasp at table height is out of reach). As in the
  domain, where only ``push`` adds it and nothing deletes it, a block held, stacked or in the
  drawer is reachable; stacking onto a far block happens higher up, within the arm's reach.
- ``in-drawer ?b ?d``: not held, centre inside the drawer box (moves with the drawer).
- ``drawer-open`` / ``drawer-closed``: slide at least OPEN_FRACTION of its travel / at most
  CLOSED_TOL; neither in between.
- ``peg-on-table ?p``: not held, standing upright on the table (axis within 15° of vertical).
- ``inserted ?p ?h``: not held, the peg's axis inside the hole and its bottom below half the
  hole's depth; ``hole-free ?h``: no peg (held or not) reaches below the hole's mouth.
"""

from __future__ import annotations

import math

import numpy as np

from embody.planners.pddl import Atom

from . import layout as L
from .world import World

# The reference domain's predicates: name → argument types (checked against the PDDL by the tests).
PREDICATES: dict[str, tuple[str, ...]] = {
    "handempty": (),
    "holding": ("block",),
    "ontable": ("block",),
    "on": ("block", "block"),
    "clear": ("block",),
    "reachable": ("block",),
    "drawer-open": ("drawer",),
    "drawer-closed": ("drawer",),
    "in-drawer": ("block", "drawer"),
    "holding-peg": ("peg",),
    "peg-on-table": ("peg",),
    "hole-free": ("hole",),
    "inserted": ("peg", "hole"),
}
ON_TOL, ON_XY, REST_TOL = 0.01, 0.03, 0.008  # m
OPEN_FRACTION, CLOSED_TOL = 0.85, 0.015
UPRIGHT = math.cos(math.radians(15))


def radius(p: np.ndarray) -> float:
    """Horizontal distance from the arm's base axis."""
    return float(math.hypot(p[0], p[1]))


def on_block(w: World, top: str, below: str) -> bool:
    """``on top below``: not held, one block height (±ON_TOL) above and within ON_XY of ``below``."""
    d = w.pos(top) - w.pos(below)
    return top != w.held() and abs(d[2] - L.BLOCK) < ON_TOL and math.hypot(d[0], d[1]) < ON_XY


def on_table(w: World, b: str) -> bool:
    """``ontable``: not held, not in the drawer, its centre BLOCK/2 (±REST_TOL) above the table."""
    return b != w.held() and not w.in_drawer(b) and abs(w.pos(b)[2] - L.BLOCK / 2) < REST_TOL


def is_clear(w: World, b: str) -> bool:
    """``clear``: not held, not in the drawer, no block on it."""
    return b != w.held() and not w.in_drawer(b) and not any(on_block(w, o, b) for o in w.blocks if o != b)


def reachable(w: World, b: str) -> bool:
    """``reachable``: within REACH_RADIUS of the arm's base axis, or not resting on the table."""
    return radius(w.pos(b)) <= L.REACH_RADIUS or not on_table(w, b)


def peg_bottom(w: World, p: str) -> float:
    """Height (m) of the peg's lowest point above the table top (z = 0)."""
    axis = w.rot(p)[:, 2]
    return float(w.pos(p)[2] - L.PEG_LENGTH / 2 * abs(axis[2]))


def peg_standing(w: World, p: str) -> bool:
    """Upright with its bottom on the table top (a peg in a hole stands HOLE_DEPTH lower than
    the board's top, which is well above the table)."""
    return p != w.held() and abs(w.rot(p)[2, 2]) > UPRIGHT and abs(peg_bottom(w, p)) < REST_TOL / 2


def peg_in_hole(w: World, p: str, h: str, depth: float) -> bool:
    """The peg's axis passes inside hole ``h`` and its bottom lies ``depth`` below the mouth."""
    mouth = w.hole_pos[h]
    dx, dy = (w.pos(p) - mouth)[:2]
    inside = max(abs(dx), abs(dy)) < L.HOLE_HALF + 0.002  # square hole, axis-aligned
    return inside and peg_bottom(w, p) < mouth[2] - depth


def drawer_open(w: World) -> bool:
    """``drawer-open``: the slide out by at least OPEN_FRACTION of its travel."""
    return w.drawer_q() >= OPEN_FRACTION * L.DRAWER_TRAVEL


def drawer_closed(w: World) -> bool:
    """``drawer-closed``: the slide out by at most CLOSED_TOL (m)."""
    return w.drawer_q() <= CLOSED_TOL


def observe(w: World) -> frozenset[Atom]:
    """The grounded facts that hold in ``w`` now."""
    held = w.held()
    facts = {Atom("handempty")} if held is None else set()
    for b in w.blocks:
        if b == held:
            facts.add(Atom("holding", (b,)))
        if on_table(w, b):
            facts.add(Atom("ontable", (b,)))
        if is_clear(w, b):
            facts.add(Atom("clear", (b,)))
        if reachable(w, b):
            facts.add(Atom("reachable", (b,)))
        if w.drawer and b != held and w.in_drawer(b):
            facts.add(Atom("in-drawer", (b, w.drawer)))
        facts |= {Atom("on", (b, o)) for o in w.blocks if o != b and on_block(w, b, o)}
    if w.drawer:
        if drawer_open(w):
            facts.add(Atom("drawer-open", (w.drawer,)))
        if drawer_closed(w):
            facts.add(Atom("drawer-closed", (w.drawer,)))
    for p in w.pegs:
        if p == held:
            facts.add(Atom("holding-peg", (p,)))
        elif peg_standing(w, p):
            facts.add(Atom("peg-on-table", (p,)))
        facts |= {Atom("inserted", (p, h)) for h in w.holes if p != held and peg_in_hole(w, p, h, L.HOLE_DEPTH / 2)}
    for h in w.holes:
        if not any(peg_in_hole(w, p, h, 0.005) for p in w.pegs):
            facts.add(Atom("hole-free", (h,)))
    return frozenset(facts)
