"""The scripted skills: one per operator of the reference domain, same names, same arguments.

Each skill checks its preconditions on the physical state (facts.py), moves the arm through
IK waypoints (motion.py: above the target at the transit height, down, act, back up) and
checks its outcome physically. A failure returns ``SkillResult(False, why)``; nothing raises.
Every skill ends with the hand at the transit height.

Grasps close the fingers on the object, check that both fingers touch it, then weld it to
the hand (world.py). Blocks are grasped with the fingers square to their faces, pegs by their
top 2.5 cm. ``push`` is not a grasp: the slightly open fingertips go down behind a far block
and drag it along its ray toward the base into the reach zone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from embody.robots.peg_arm.kinematics import DOWN, rot_z

from . import facts as F
from . import layout as L
from .motion import Z_SAFE, Arm
from .world import World, yaw_of

OPEN_BLOCK = L.BLOCK / 2 + 0.012  # finger opening (from the midplane) around a block
OPEN_PEG = L.PEG_RADIUS + 0.018
APPROACH, SLOW = 0.04, 0.08  # the last APPROACH m down to a grasp or a placement go at SLOW m/s
DROP = 0.004  # release placed objects this high above their rest
FREE_RADIUS = 0.075  # a table slot is free if no other object's centre is this close
PALM_HALF = (0.03, 0.1)  # the hand's palm box, half extents across and along the closing axis
PALM_ABOVE = 0.054  # the palm's underside above the fingertips (finger length)
PALM_GAP = 0.01  # wanted horizontal gap between the palm and any object reaching up to it


@dataclass(frozen=True)
class SkillResult:
    """``ok``: the skill did physically what its operator promises; ``message``: what happened or why not."""

    ok: bool
    message: str


def _ok(message: str) -> SkillResult:
    return SkillResult(True, message)


def _fail(message: str) -> SkillResult:
    return SkillResult(False, message)


def square(yaw: float) -> float:
    """A cube's heading reduced to [-45°, 45°) (its faces repeat every 90°)."""
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


def bearing(p) -> float:
    """Heading (rad) of point ``p`` seen from the arm's base axis."""
    return math.atan2(p[1], p[0])


def nearest_yaw(base: float, step: float, prefer: float) -> float:
    """Of the headings ``base + k * step``, the one closest to ``prefer``."""
    return base + round((prefer - base) / step) * step


def palm_gap(w: World, grip, yaw: float, skip: tuple[str, ...]) -> float:
    """Smallest horizontal gap (m) between the palm, with the fingertips at ``grip`` and heading
    ``yaw``, and any object that reaches up to the palm's height (a tower beside the target)."""
    c, s = math.cos(yaw), math.sin(yaw)
    gap = math.inf
    for o in w.blocks + w.pegs:
        p, block = w.pos(o), w.objects[o] == "block"
        top = p[2] + (L.BLOCK / 2 if block else L.PEG_LENGTH / 2)
        if o in skip or top < grip[2] + PALM_ABOVE - 0.005:
            continue
        dx, dy = p[0] - grip[0], p[1] - grip[1]
        across, along = abs(dx * c + dy * s), abs(dx * s - dy * c)  # hand x axis (c, s), closing axis (s, -c)
        gap = min(
            gap,
            math.hypot(max(across - PALM_HALF[0], 0), max(along - PALM_HALF[1], 0))
            - (L.BLOCK / math.sqrt(2) if block else L.PEG_RADIUS),
        )
    return gap


def best_yaw(w: World, grip, base: float, step: float, prefer: float, skip: tuple[str, ...]) -> float:
    """Of the headings ``base + k * step`` within about 90° of ``prefer`` (the wrist's comfortable
    range), one whose palm clears the neighbours, the closest to ``prefer`` among those."""
    n = nearest_yaw(base, step, prefer)
    options = [y for y in (n, n - step, n + step) if abs(y - prefer) <= math.pi / 2 + 0.1]
    return max(options, key=lambda y: (palm_gap(w, grip, y, skip) > PALM_GAP, -abs(y - prefer)))


# ------------------------------------------------------------------------ shared motions


def _grasp(w: World, arm: Arm, name: str, grip, yaw: float, opening: float, half: float) -> str | None:
    """Open, go down to ``grip`` from above, close on ``name``, weld it and lift it."""
    arm.fingers(opening, 0.2)
    grip = np.asarray(grip, float)
    error = arm.goto(grip + (0, 0, APPROACH), yaw) or arm.move(grip, speed=SLOW)
    if error:
        return error
    arm.fingers(half - L.SQUEEZE, 0.3)
    if not (w.touching("left_finger", name) and w.touching("right_finger", name)):
        arm.fingers(opening, 0.2)
        arm.move((*arm.pos[:2], Z_SAFE))
        return f"{name} is not between the fingers (they closed to {2 * w.fingers().mean() * 1e3:.0f} mm)"
    w.grasp(name)
    error = arm.move((*arm.pos[:2], Z_SAFE))
    if error:
        return error
    if w.pos(name)[2] < grip[2] + 0.5 * (Z_SAFE - grip[2]):
        return f"{name} did not come up with the hand"
    return None


def _place(w: World, arm: Arm, name: str, centre, yaw: float, opening: float) -> str | None:
    """Carry the held ``name`` so that its centre comes to rest at ``centre`` with the hand at
    heading ``yaw``; release it and go back up. Uses where the object actually sits in the hand."""
    d = w.data
    site = w.model.site("grip").id
    in_hand = d.site_xmat[site].reshape(3, 3).T @ (w.pos(name) - d.site_xpos[site])
    grip = np.asarray(centre, float) - (rot_z(np.array(yaw)) @ DOWN) @ in_hand + (0, 0, DROP)
    error = arm.goto(grip + (0, 0, APPROACH), yaw) or arm.move(grip, speed=SLOW)
    if error:
        return error
    w.release()
    arm.fingers(opening, 0.3)
    return arm.move((*arm.pos[:2], Z_SAFE))


def _hand_yaw_for(w: World, name: str, centre, object_yaw: float, step: float, prefer: float | None = None) -> float:
    """A hand heading that puts the held block ``name`` at ``object_yaw`` (mod ``step``) at ``centre``."""
    offset = square(yaw_of(w.rot(name)) - yaw_of(w.data.site_xmat[w.model.site("grip").id].reshape(3, 3)))
    grip = np.asarray(centre) - (0, 0, L.GRIP_BELOW_BLOCK)
    return best_yaw(w, grip, object_yaw - offset, step, bearing(centre) if prefer is None else prefer, (name,))


def _others_near(w: World, point, skip: str, radius: float = FREE_RADIUS) -> list[str]:
    return [o for o in w.blocks + w.pegs if o != skip and math.dist(w.pos(o)[:2], point[:2]) < radius]


def free_table_slot(w: World, skip: str) -> tuple[np.ndarray, float] | None:
    """A free table slot in reach (centre, heading), leaving the lanes of far blocks open for
    push; slots where the palm would clear the neighbours come first."""
    far = [bearing(w.pos(b)) for b in w.blocks if b != skip and not F.reachable(w, b)]
    slots = L.table_slots()
    names = [f"near{i}" for i, a in enumerate(L.LANES) if all(abs(a - f) > 0.1 for f in far)]
    free = [
        np.array(slots[n])
        for n in names + [f"spare{j}" for j in range(len(L.SPARE_ANGLES))]
        if not _others_near(w, np.array(slots[n]), skip)
    ]
    clear = [p for p in free if any(palm_gap(w, p, bearing(p) + k * math.pi / 2, (skip,)) > PALM_GAP for k in (0, 1))]
    return next(((p, bearing(p)) for p in clear + free), None)


def _holding(w: World, name: str) -> SkillResult | None:
    return None if w.held() == name else _fail(f"the hand does not hold {name} (holds {w.held() or 'nothing'})")


def _empty(w: World) -> SkillResult | None:
    return None if w.held() is None else _fail(f"the hand is not empty (holds {w.held()})")


# ---------------------------------------------------------------------------------- blocks


def pick_up(w: World, arm: Arm, b: str) -> SkillResult:
    """``pick-up b``: grasp a clear, reachable block from the table."""
    if (r := _empty(w)) or not F.on_table(w, b) or not F.is_clear(w, b):
        return r or _fail(f"{b} is not a clear block on the table")
    if not F.reachable(w, b):
        return _fail(f"{b} is out of reach ({F.radius(w.pos(b)):.2f} m > {L.REACH_RADIUS} m from the base)")
    return _pick_block(w, arm, b)


def _pick_block(w: World, arm: Arm, b: str, step: float = math.pi / 2, prefer: float | None = None) -> SkillResult:
    grip = w.pos(b) - (0, 0, L.GRIP_BELOW_BLOCK)
    yaw = best_yaw(w, grip, square(yaw_of(w.rot(b))), step, bearing(grip) if prefer is None else prefer, (b,))
    error = _grasp(w, arm, b, grip, yaw, OPEN_BLOCK, L.BLOCK / 2)
    return _fail(error) if error else _ok(f"picked {b}")


def put_down(w: World, arm: Arm, b: str) -> SkillResult:
    """``put-down b``: place the held block on a free table slot within reach."""
    if r := _holding(w, b):
        return r
    slot = free_table_slot(w, b)
    if slot is None:
        return _fail("no free place on the table within reach")
    centre, heading = slot
    error = _place(w, arm, b, centre, _hand_yaw_for(w, b, centre, heading, math.pi / 2), OPEN_BLOCK)
    if error or not F.on_table(w, b):
        return _fail(error or f"{b} did not come to rest on the table")
    return _ok(f"put {b} down at ({centre[0]:.2f}, {centre[1]:.2f})")


def stack(w: World, arm: Arm, b1: str, b2: str) -> SkillResult:
    """``stack b1 b2``: place the held ``b1`` on ``b2``, a clear block on the table or on a tower."""
    if r := _holding(w, b1):
        return r
    if b1 == b2 or not F.is_clear(w, b2) or not (F.on_table(w, b2) or any(F.on_block(w, b2, o) for o in w.blocks)):
        return _fail(f"{b2} is not a clear block resting on the table or a tower")
    centre = w.pos(b2) + (0, 0, L.BLOCK)
    error = _place(w, arm, b1, centre, _hand_yaw_for(w, b1, centre, yaw_of(w.rot(b2)), math.pi / 2), OPEN_BLOCK)
    if error or not F.on_block(w, b1, b2):
        return _fail(error or f"{b1} did not land on {b2}")
    return _ok(f"stacked {b1} on {b2}")


def unstack(w: World, arm: Arm, b1: str, b2: str) -> SkillResult:
    """``unstack b1 b2``: grasp the clear ``b1`` off ``b2``."""
    if (r := _empty(w)) or not F.on_block(w, b1, b2) or not F.is_clear(w, b1):
        return r or _fail(f"{b1} is not a clear block on {b2}")
    return _pick_block(w, arm, b1)


def push(w: World, arm: Arm, b: str) -> SkillResult:
    """Drag a far block along its ray from the base until its centre is NEAR_RADIUS away."""
    if (r := _empty(w)) or not F.on_table(w, b) or not F.is_clear(w, b):
        return r or _fail(f"{b} is not a clear block on the table")
    p = w.pos(b)
    if F.reachable(w, b):
        return _ok(f"{b} is already within reach")
    a, r0 = bearing(p), F.radius(p)
    target = np.array(L.polar(L.NEAR_RADIUS, a, 0))
    blocking = {o for s in np.linspace(0, 1, 6) for o in _others_near(w, target + s * (p - target), b, 0.06)}
    if blocking:
        return _fail(f"the way in for {b} is blocked by {', '.join(sorted(blocking))}")
    behind = L.BLOCK / 2 + 0.01 + 0.008  # block half, finger half-thickness, gap
    arm.fingers(0.012, 0.2)  # the two fingertips then meet the block's back face near its edges
    error = (
        arm.goto(L.polar(r0 + behind, a, 0.015), a)
        or arm.move(L.polar(L.NEAR_RADIUS + behind - 0.008, a, 0.015), speed=0.15, polar=True)
        or arm.move(L.polar(L.NEAR_RADIUS + behind + 0.005, a, 0.02), polar=True)
        or arm.move((*arm.pos[:2], Z_SAFE))
    )
    if error or not F.reachable(w, b) or not F.on_table(w, b):
        return _fail(error or f"{b} ended {F.radius(w.pos(b)):.2f} m from the base, not on the table within reach")
    return _ok(f"pushed {b} into reach")


# ---------------------------------------------------------------------------------- drawer


def open_drawer(w: World, arm: Arm, d: str) -> SkillResult:
    """Hook the closed fingers behind the handle bar and pull the drawer out to its stop."""
    if r := _empty(w):
        return r
    if F.drawer_open(w):
        return _ok(f"{d} is already open")
    arm.fingers(0.0, 0.2)
    start = w.drawer_origin() + L.PULL_AT
    pull = L.DRAWER_TRAVEL - w.drawer_q() + 0.015 + 0.003  # gap to the bar, then 3 mm into the stop
    error = (
        arm.goto(start, 0.0)
        or arm.move(start - (pull, 0, 0), speed=0.12)
        or arm.move(start - (pull - 0.01, 0, 0))
        or arm.move((*arm.pos[:2], Z_SAFE))
    )
    if error or not F.drawer_open(w):
        return _fail(error or f"{d} opened only {w.drawer_q() * 100:.1f} cm")
    return _ok(f"opened {d}")


def close_drawer(w: World, arm: Arm, d: str) -> SkillResult:
    """Push the handle bar from the front until the drawer is in."""
    if r := _empty(w):
        return r
    if F.drawer_closed(w):
        return _ok(f"{d} is already closed")
    arm.fingers(0.0, 0.2)
    start = w.drawer_origin() + L.PUSH_AT - (0.01, 0, 0)
    push_by = w.drawer_q() + 0.01 + 0.003
    error = (
        arm.goto(start, 0.0)
        or arm.move(start + (push_by, 0, 0), speed=0.12)
        or arm.move(start + (push_by - 0.01, 0, 0))
        or arm.move((*arm.pos[:2], Z_SAFE))
    )
    if error or not F.drawer_closed(w):
        return _fail(error or f"{d} is still {w.drawer_q() * 100:.1f} cm open")
    return _ok(f"closed {d}")


def put_in_drawer(w: World, arm: Arm, b: str, d: str) -> SkillResult:
    """``put-in-drawer b d``: place the held block in a free slot of the open drawer."""
    if r := _holding(w, b):
        return r
    if not F.drawer_open(w):
        return _fail(f"{d} is not open")
    origin = w.drawer_origin()
    slots = [origin + (x, y, L.DRAWER_FLOOR + L.BLOCK / 2) for x, y in L.DRAWER_SLOTS]
    free = [s for s in slots if not _others_near(w, s, b, 0.03)]
    if not free:
        return _fail(f"{d} is full")
    # fingers along y (yaw 0 or pi): the drawer's slots are packed tighter along x
    error = _place(w, arm, b, free[0], _hand_yaw_for(w, b, free[0], 0.0, math.pi, prefer=0.0), OPEN_BLOCK)
    if error or not w.in_drawer(b):
        return _fail(error or f"{b} did not land in {d}")
    return _ok(f"put {b} in {d}")


def take_from_drawer(w: World, arm: Arm, b: str, d: str) -> SkillResult:
    """``take-from-drawer b d``: grasp block ``b`` out of the open drawer."""
    if (r := _empty(w)) or not w.in_drawer(b):
        return r or _fail(f"{b} is not in {d}")
    if not F.drawer_open(w):
        return _fail(f"{d} is not open")
    return _pick_block(w, arm, b, math.pi, prefer=0.0)  # fingers along y, as in put-in-drawer


# ---------------------------------------------------------------------------------- pegs


def pick_peg(w: World, arm: Arm, p: str) -> SkillResult:
    """``pick-peg p``: grasp a peg standing on the table by its top."""
    if (r := _empty(w)) or not F.peg_standing(w, p):
        return r or _fail(f"{p} is not standing on the table")
    at = w.pos(p)
    error = _grasp(w, arm, p, at + (0, 0, L.GRIP_ABOVE_PEG), bearing(at), OPEN_PEG, L.PEG_RADIUS)
    return _fail(error) if error else _ok(f"picked {p}")


def insert_peg(w: World, arm: Arm, p: str, h: str) -> SkillResult:
    """``insert-peg p h``: lower the held peg into the free hole ``h`` until it rests on the bottom."""
    if r := _holding(w, p):
        return r
    if any(F.peg_in_hole(w, o, h, 0.005) for o in w.pegs if o != p):
        return _fail(f"{h} is taken")
    mouth = w.hole_pos[h]
    rest = mouth + (0, 0, L.PEG_LENGTH / 2 - L.HOLE_DEPTH)  # the peg's centre on the hole's bottom
    error = _place(w, arm, p, rest, arm.yaw, OPEN_PEG)
    if error or not F.peg_in_hole(w, p, h, L.HOLE_DEPTH / 2):
        return _fail(error or f"{p} did not go into {h} (bottom {F.peg_bottom(w, p) * 1e3:.0f} mm above the table)")
    return _ok(f"inserted {p} into {h}")


# The skill table: operator name → (skill, argument types).
SKILLS: dict[str, tuple[Callable[..., SkillResult], tuple[str, ...]]] = {
    "pick-up": (pick_up, ("block",)),
    "put-down": (put_down, ("block",)),
    "stack": (stack, ("block", "block")),
    "unstack": (unstack, ("block", "block")),
    "push": (push, ("block",)),
    "open-drawer": (open_drawer, ("drawer",)),
    "close-drawer": (close_drawer, ("drawer",)),
    "put-in-drawer": (put_in_drawer, ("block", "drawer")),
    "take-from-drawer": (take_from_drawer, ("block", "drawer")),
    "pick-peg": (pick_peg, ("peg",)),
    "insert-peg": (insert_peg, ("peg", "hole")),
}
