"""``setup``'s two halves: check that an init of the reference domain can be built, then build it.

An init is realizable when every object has exactly one place (a block: held, on the table, on
one block, or in the drawer; a peg: held, standing, or in one hole), the derived facts agree
with those places (``clear``, ``handempty``, ``hole-free``, the drawer's state), and only
blocks on the table are out of reach. Objects then go to fixed slots (layout.py): far
blocks to the far slots of the first lanes, towers to the near slots of the remaining lanes,
blocks in the drawer to its slots, standing pegs to the peg slots; a held object hangs in the
gripper above the table.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import mujoco
import numpy as np

from embody.planners.pddl import Atom

from . import layout as L
from .facts import PREDICATES
from .motion import Z_SAFE, Arm, solve_ik
from .world import SceneError, World

LIMITS = {"block": 4, "drawer": 1, "peg": 2, "hole": 2}
HOLD_AT = (0.40, 0.05, Z_SAFE)  # grip point while holding an object at the start
HOME_AT = (0.38, 0.05, Z_SAFE + 0.05)  # grip point with an empty hand


def check_objects(objects: dict[str, str]) -> None:
    """Raise SceneError naming every unsupported type, malformed name, and type with more objects than fit."""
    problems = [
        f"{n}: type {t!r} is not supported (block, drawer, peg, hole)" for n, t in objects.items() if t not in LIMITS
    ]
    problems += [f"{n!r} is not a PDDL object name" for n in objects if not re.fullmatch(r"[A-Za-z][\w-]*", n)]
    counts = Counter(objects.values())
    problems += [
        f"{counts[t]} objects of type {t}, the scene holds at most {n}" for t, n in LIMITS.items() if counts[t] > n
    ]
    if problems:
        raise SceneError("unsupported objects: " + "; ".join(problems))


def check_init(objects: dict[str, str], init: frozenset[Atom]) -> None:
    """Raise SceneError naming every reason why ``init`` cannot be built."""
    check_objects(objects)
    problems = []
    for a in sorted(init):
        sig = PREDICATES.get(a.predicate)
        if sig is None:
            problems.append(f"{a}: unknown predicate {a.predicate!r}")
        elif len(sig) != len(a.args):
            problems.append(f"{a}: {a.predicate} takes {len(sig)} arguments")
        else:
            problems += [
                f"{a}: {x} is {'a ' + objects[x] if x in objects else 'not an object'}, expected a {t}"
                for x, t in zip(a.args, sig)
                if objects.get(x) != t
            ]
    if problems:
        raise SceneError("cannot set up this init: " + "; ".join(problems))
    problems = _place_problems(objects, init)
    if problems:
        raise SceneError("cannot set up this init: " + "; ".join(problems))


def _place_problems(objects: dict[str, str], init: frozenset[Atom]) -> list[str]:
    of = lambda kind: [n for n, t in objects.items() if t == kind]  # noqa: E731
    has = lambda *a: Atom(a[0], tuple(a[1:])) in init  # noqa: E731
    args = lambda pred: sorted(a.args for a in init if a.predicate == pred)  # noqa: E731
    blocks, pegs, holes, drawers = of("block"), of("peg"), of("hole"), of("drawer")
    problems = []
    below = {b1: b2 for b1, b2 in args("on")}
    above = Counter(b2 for _, b2 in args("on"))
    for b in blocks:
        places = [
            str(a) for a in init if a.args[:1] == (b,) and a.predicate in ("holding", "ontable", "on", "in-drawer")
        ]
        if len(places) != 1:
            problems.append(
                f"block {b} needs exactly one place (holding/ontable/on/in-drawer), has "
                + (", ".join(sorted(places)) or "none")
            )
        if above[b] > 1:
            problems.append(f"{above[b]} blocks are on {b}")
        wants_clear = not has("holding", b) and not any(x == b for x, _ in args("in-drawer")) and not above[b]
        if has("clear", b) != wants_clear:
            problems.append(
                f"(clear {b}) must be {'true' if wants_clear else 'false'}: clear means not held, "
                "not in the drawer and nothing on it"
            )
        if not has("reachable", b) and not has("ontable", b):
            problems.append(f"{b} is not reachable, but only a block on the table can be out of reach")
    for b in blocks:  # every tower must stand on the table
        seen, x = {b}, b
        while x in below:
            x = below[x]
            if x in seen:
                problems.append(f"the blocks on {b} form a cycle")
                break
            seen.add(x)
        else:
            if x != b and not has("ontable", x):
                problems.append(f"{b} stands on a tower whose bottom block {x} is not on the table")
    for p in pegs:
        places = [
            str(a) for a in init if a.args[:1] == (p,) and a.predicate in ("holding-peg", "peg-on-table", "inserted")
        ]
        if len(places) != 1:
            problems.append(
                f"peg {p} needs exactly one place (holding-peg/peg-on-table/inserted), has "
                + (", ".join(sorted(places)) or "none")
            )
    for h in holes:
        n = sum(1 for _, x in args("inserted") if x == h)
        if n > 1:
            problems.append(f"{n} pegs are inserted in {h}")
        if has("hole-free", h) == (n > 0):
            problems.append(f"(hole-free {h}) must be {'false' if n else 'true'}")
    held = args("holding") + args("holding-peg")
    if len(held) > 1:
        problems.append(f"the hand holds {len(held)} objects")
    if has("handempty") != (not held):
        problems.append(f"(handempty) must be {'false' if held else 'true'}")
    for d in drawers:
        if has("drawer-open", d) == has("drawer-closed", d):
            problems.append(f"drawer {d} must be either open or closed")
    return problems


# ---------------------------------------------------------------------------------- build


def realize(w: World, arm_of, init: frozenset[Atom]) -> Arm:
    """Put the objects of ``w`` where ``init`` says (already checked) and let them settle.
    ``arm_of(world)`` makes the Arm once the arm's pose is set; returns it."""
    args = lambda pred: sorted(a.args for a in init if a.predicate == pred)  # noqa: E731
    d = w.data
    if w.drawer:
        d.qpos[w.model.joint("drawer").qposadr[0]] = L.DRAWER_TRAVEL if Atom("drawer-open", (w.drawer,)) in init else 0
    _blocks(w, init, args)
    pegs_standing = [p for (p,) in args("peg-on-table")]
    for p, xy in zip(pegs_standing, L.PEG_SLOTS):
        w.set_pose(p, (*xy, L.PEG_LENGTH / 2))
    for p, h in args("inserted"):
        mouth = w.hole_pos[h]
        w.set_pose(p, (*mouth[:2], mouth[2] - L.HOLE_DEPTH + L.PEG_LENGTH / 2 + 0.001))
    held = next(iter(args("holding") + args("holding-peg")), (None,))[0]
    _arm_pose(w, held)
    mujoco.mj_forward(w.model, d)
    if held:
        w.grasp(held)
    arm = arm_of(w)
    arm.wait(0.3)
    return arm


def _blocks(w: World, init: frozenset[Atom], args) -> None:
    reach = {b for (b,) in args("reachable")}
    above = {b2: b1 for b1, b2 in args("on")}
    bases = [b for (b,) in args("ontable")]
    far = [b for b in bases if b not in reach]
    near = [b for b in bases if b in reach]
    slots = L.table_slots()
    lanes = iter(range(len(L.LANES)))
    for b in far + near:  # a far tower's bottom block in its lane's far slot
        i = next(lanes)
        x, y, z = slots[f"{'far' if b in far else 'near'}{i}"]
        while b:
            w.set_pose(b, (x, y, z), L.LANES[i])
            z += L.BLOCK + 0.0005
            b = above.get(b)
    origin = np.array([*L.DRAWER_POS, 0.0]) - (L.DRAWER_TRAVEL * (Atom("drawer-open", (w.drawer,)) in init), 0, 0)
    for (b, _), (sx, sy) in zip(args("in-drawer"), L.DRAWER_SLOTS):
        w.set_pose(b, origin + (sx, sy, L.DRAWER_FLOOR + L.BLOCK / 2 + 0.0005))


def _arm_pose(w: World, held: str | None) -> None:
    """Put the arm at its start pose; a held object between the closed fingers."""
    d = w.data
    at = np.array(HOLD_AT if held else HOME_AT)
    yaw = math.atan2(at[1], at[0])
    q, _ = solve_ik(at, yaw, np.array(L.C.DEFAULT_POSE))
    d.qpos[w.arm_adr], d.ctrl[:7] = q, q
    opening = L.FINGER_OPEN * 0.8
    if held:
        kind = w.objects[held]
        half = L.BLOCK / 2 if kind == "block" else L.PEG_RADIUS
        opening = half
        centre = at + (0, 0, L.GRIP_BELOW_BLOCK if kind == "block" else -L.GRIP_ABOVE_PEG)
        w.set_pose(held, centre, yaw)
    d.qpos[w.finger_adr] = opening
    d.ctrl[7:9] = opening - (L.SQUEEZE if held else 0)
