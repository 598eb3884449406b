"""Where everything stands on the table, and the MJCF text of one scene.

Frame: the arm's base frame (link0 at the origin, x forward, y left, z up); the table top is
the plane z = 0, the arm stands on it. All lengths in m, angles in rad.

Top view (not to scale)::

        y ^   far slots   (r = FAR_RADIUS = 0.74)      .  .  .  .
          |   - - - - - - reach circle (r = REACH_RADIUS = 0.65) - - -
          |   near slots  (r = NEAR_RADIUS = 0.50)      o  o  o  o     one lane per ray at LANES
          |   spare slots (r = SPARE_RADIUS = 0.36)    s  s
        0 +-- arm            pegs |  |    board with holes [] []
          |                  drawer in its cabinet (slides out toward the arm, -x)
          +------------------------------------------------------------------> x

- Blocks (BLOCK = 4 cm cubes) stand in slots, faces square to their lane's ray. The far zone
  is the table beyond REACH_RADIUS from the base axis: a top-down grasp at table height
  needs the arm nearly stretched there, so ``pick-up`` refuses it (the fingertips can still
  get behind a block to drag it, and a block stacked on a far one is picked higher up).
  ``push`` drags a far block along its ray to NEAR_RADIUS, so a block that starts far keeps
  its lane, whose near slot stays free for it.
- The drawer (a box on a slide joint, with a hook handle on its front) runs in a fixed
  cabinet; its four block slots (2 x 2) lie inside the reach circle, open or closed.
- The peg board is one static body with square holes; pegs are round (a round peg in a square
  hole keeps the board to six boxes).

``scene_xml`` writes the arm of assets/peg_arm/peg_arm.xml with the peg removed and the
fingers made into an actuated parallel gripper, plus exactly the objects asked for.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from embody.robots.peg_arm import constants as C
from embody.robots.peg_arm.model import ARM_XML

# --- objects
BLOCK = 0.04  # cube edge
BLOCK_DENSITY = 600.0  # kg/m³, wood
PEG_RADIUS, PEG_LENGTH = 0.012, 0.08
PEG_DENSITY = C.PEG_DENSITY
COLORS = ((0.85, 0.25, 0.2), (0.2, 0.6, 0.3), (0.25, 0.4, 0.85), (0.9, 0.75, 0.15))

# --- zones and slots
REACH_RADIUS = 0.65  # a block is reachable iff its centre lies within this horizontal distance of the base axis
LANES = (0.35, 0.55, 0.75, 0.95)  # ray angles of the block lanes
NEAR_RADIUS, FAR_RADIUS, SPARE_RADIUS = 0.50, 0.74, 0.36
SPARE_ANGLES = (0.45, 0.80)
PEG_SLOTS = ((0.34, -0.08), (0.34, 0.0))

# --- drawer: frame at the front panel's outer face, floor level; slides along -x (toward the arm)
DRAWER_POS = (0.40, -0.28)  # closed
DRAWER_TRAVEL = 0.15  # fully open: the whole inside stands clear of the cabinet
DRAWER_IN = (0.01, 0.14, -0.11, 0.11)  # inner x0, x1, y0, y1 (drawer frame)
DRAWER_FLOOR = 0.011  # z of the floor's top
DRAWER_WALL_TOP = 0.065
DRAWER_SLOTS = ((0.045, -0.05), (0.045, 0.05), (0.105, -0.05), (0.105, 0.05))  # drawer frame
PULL_AT = (-0.035, 0.0, 0.03)  # closed fingertips between handle bar and panel, to pull (drawer frame)
PUSH_AT = (-0.08, 0.0, 0.03)  # closed fingertips in front of the handle bar, to push
CABINET_TOP = 0.08  # below the hand's palm when the fingertips are at the handle

# --- peg board: origin at the board's centre on the table
BOARD_POS = (0.56, -0.02)
BOARD_HALF = (0.06, 0.10)
BOARD_HEIGHT = 0.05
HOLE_DEPTH = 0.04
HOLE_HALF = PEG_RADIUS + 0.003  # square hole half side: 3 mm clearance across the flats
HOLE_OFFSETS = (-0.05, 0.05)  # board-local y of the holes

# --- gripper and grasps
FINGER_OPEN = 0.04  # per finger, the Franka Hand's stroke
GRIP_Z = 0.0584 + 0.054  # fingertip plane in the hand frame (finger origin + finger length)
GRIP_BELOW_BLOCK = 0.008  # the grip point (fingertip plane) sits this far below a held block's centre
GRIP_ABOVE_PEG = PEG_LENGTH / 2 - 0.025  # and this far above a held peg's centre: fingers on its top 2.5 cm
SQUEEZE = 0.004  # fingers are driven this far inside the object: ~4 N of grip force


def polar(r: float, angle: float, z: float) -> tuple[float, float, float]:
    """The point ``r`` m from the arm's base axis at ``angle`` (rad from +x), height ``z`` (m)."""
    return (r * math.cos(angle), r * math.sin(angle), z)


def table_slots() -> dict[str, tuple[float, float, float]]:
    """Block slots on the table: ``near<i>``/``far<i>`` per lane, then ``spare<j>``; centre heights."""
    z = BLOCK / 2
    slots = {f"near{i}": polar(NEAR_RADIUS, a, z) for i, a in enumerate(LANES)}
    slots |= {f"spare{j}": polar(SPARE_RADIUS, a, z) for j, a in enumerate(SPARE_ANGLES)}
    slots |= {f"far{i}": polar(FAR_RADIUS, a, z) for i, a in enumerate(LANES)}
    return slots


def hole_positions(n: int) -> list[np.ndarray]:
    """World positions of the mouths (board top, hole axis) of ``n`` holes."""
    offsets = HOLE_OFFSETS if n == 2 else (0.0,)
    return [np.array([BOARD_POS[0], BOARD_POS[1] + dy, BOARD_HEIGHT]) for dy in offsets[:n]]


# ------------------------------------------------------------------------------ MJCF text


def _num(*xs: float) -> str:
    return " ".join(f"{float(x):.6g}" for x in xs)


def _geom(parent, name, size, pos, cls="scene", kind="box", **attrs):
    return ET.SubElement(
        parent, "geom", {"name": name, "class": cls, "type": kind, "size": _num(*size), "pos": _num(*pos), **attrs}
    )


def _box_between(parent, name, lo, hi, **attrs):
    """A box geom spanning the corners ``lo`` .. ``hi``."""
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    return _geom(parent, name, (hi - lo) / 2, (hi + lo) / 2, **attrs)


def _gripper(root) -> None:
    """Replace peg_arm's rigidly held peg with a parallel gripper: finger slide joints and a grip site."""
    hand = root.find(".//body[@name='hand']")
    hand.remove(hand.find("body[@name='peg']"))
    for side in ("left_finger", "right_finger"):  # each finger's local +y points away from the other
        finger = hand.find(f"body[@name='{side}']")
        finger.set("pos", _num(0, 0, 0.0584))  # pads touch at q = 0
        finger.insert(
            1,
            ET.Element(
                "joint",
                {
                    "name": side,
                    "type": "slide",
                    "axis": "0 1 0",
                    "range": _num(0, FINGER_OPEN),
                    "damping": "2",
                    "armature": "0.1",
                },
            ),
        )
    ET.SubElement(
        hand, "site", {"name": "grip", "pos": _num(0, 0, GRIP_Z), "size": "0.005", "group": "4"}
    )  # unrendered
    for body in root.iter("body"):  # gravity compensation, as the Franka controller does
        if body.get("name") != C.BASE_BODY:
            body.set("gravcomp", "1")


def _drawer(world) -> None:
    cab = ET.SubElement(world, "body", {"name": "cabinet", "pos": _num(*DRAWER_POS, 0)})
    _box_between(cab, "cabinet_top", (0, -0.14, CABINET_TOP - 0.01), (0.19, 0.14, CABINET_TOP), material="wood")
    _box_between(cab, "cabinet_back", (0.18, -0.14, 0), (0.19, 0.14, CABINET_TOP - 0.01), material="wood")
    for s in (-1, 1):
        _box_between(
            cab, f"cabinet_side{s + 1}", (0, s * 0.13, 0), (0.18, s * 0.14, CABINET_TOP - 0.01), material="wood"
        )
    d = ET.SubElement(world, "body", {"name": "drawer", "pos": _num(*DRAWER_POS, 0)})
    ET.SubElement(
        d,
        "joint",
        {
            "name": "drawer",
            "type": "slide",
            "axis": "-1 0 0",
            "range": _num(0, DRAWER_TRAVEL),
            "damping": "20",
            "frictionloss": "1",
        },
    )
    x0, x1, y0, y1 = DRAWER_IN
    t = 0.01
    _box_between(d, "drawer_floor", (0, y0 - t, 0.001), (x1 + t, y1 + t, DRAWER_FLOOR), material="drawer")
    _box_between(d, "drawer_front", (0, y0 - t, 0.001), (x0, y1 + t, DRAWER_WALL_TOP + 0.003), material="drawer")
    _box_between(d, "drawer_back", (x1, y0 - t, 0.001), (x1 + t, y1 + t, DRAWER_WALL_TOP), material="drawer")
    _box_between(d, "drawer_left", (x0, y1, 0.001), (x1, y1 + t, DRAWER_WALL_TOP), material="drawer")
    _box_between(d, "drawer_right", (x0, y0 - t, 0.001), (x1, y0, DRAWER_WALL_TOP), material="drawer")
    # hook handle: a bar 6 cm in front of the panel, on two posts; the closed fingers fit between
    _box_between(d, "handle_bar", (-0.07, -0.06, 0.04), (-0.06, 0.06, 0.05), material="metal")
    for s in (-1, 1):
        _box_between(d, f"handle_post{s + 1}", (-0.06, s * 0.05, 0.04), (0, s * 0.06, 0.05), material="metal")


def _board(world, n_holes: int) -> None:
    board = ET.SubElement(world, "body", {"name": "board", "pos": _num(*BOARD_POS, 0)})
    hx, hy = BOARD_HALF
    h, bottom = HOLE_HALF, BOARD_HEIGHT - HOLE_DEPTH
    _box_between(board, "board_bottom", (-hx, -hy, 0), (hx, hy, bottom), material="board")
    _box_between(board, "board_front", (-hx, -hy, bottom), (-h, hy, BOARD_HEIGHT), material="board")
    _box_between(board, "board_rear", (h, -hy, bottom), (hx, hy, BOARD_HEIGHT), material="board")
    ys = [p[1] - BOARD_POS[1] for p in hole_positions(n_holes)]
    edges = [-hy] + [e for y in ys for e in (y - h, y + h)] + [hy]
    for i in range(0, len(edges), 2):  # the strips between the holes
        _box_between(
            board, f"board_mid{i // 2}", (-h, edges[i], bottom), (h, edges[i + 1], BOARD_HEIGHT), material="board"
        )


def scene_xml(
    blocks: list[str], pegs: list[str], drawer: bool, n_holes: int, framebuffer: tuple[int, int] = (640, 480)
) -> str:
    """MJCF text: the arm with a gripper on a table, plus the named blocks and pegs (bodies
    ``obj_<name>``, each with a free joint and an inactive weld ``grasp_<name>`` to the hand),
    the drawer in its cabinet if ``drawer``, and a board with ``n_holes`` holes if any.
    ``framebuffer``: the largest offscreen image (width, height) it can render."""
    root = ET.parse(ARM_XML).getroot()
    root.set("model", "tabletop")
    _gripper(root)
    ET.SubElement(root.find("default"), "default", {"class": "object"}).append(
        ET.Element("geom", {"contype": "3", "conaffinity": "3", "friction": "0.8 0.01 0.001"})
    )
    asset = root.find("asset")
    for name, rgba in (
        ("table", "0.72 0.62 0.5 1"),
        ("wood", "0.55 0.38 0.25 1"),
        ("drawer", "0.75 0.55 0.35 1"),
        ("metal", "0.6 0.6 0.65 1"),
    ):
        ET.SubElement(asset, "material", {"name": name, "rgba": rgba})
    vis = root.find("visual")
    ET.SubElement(vis, "quality", {"shadowsize": "0", "offsamples": "0"})  # fast offscreen rendering
    ET.SubElement(vis, "global", {"offwidth": str(framebuffer[0]), "offheight": str(framebuffer[1])})

    world = root.find("worldbody")
    _box_between(world, "table", (-0.3, -0.6, -0.04), (1.0, 0.8, 0), material="table")
    _geom(world, "floor", (3, 3, 0.05), (0, 0, -0.75), kind="plane", material="floor")
    if drawer:
        _drawer(world)
    if n_holes:
        _board(world, n_holes)
    for i, name in enumerate(blocks):
        body = ET.SubElement(world, "body", {"name": f"obj_{name}", "pos": _num(0, 1.5 + i, 0.5)})
        ET.SubElement(body, "freejoint", {"name": f"obj_{name}"})
        _geom(
            body,
            f"obj_{name}",
            (BLOCK / 2,) * 3,
            (0, 0, 0),
            cls="object",
            density=str(BLOCK_DENSITY),
            rgba=_num(*COLORS[i % len(COLORS)], 1),
        )
    for i, name in enumerate(pegs):
        body = ET.SubElement(world, "body", {"name": f"obj_{name}", "pos": _num(0, -1.5 - i, 0.5)})
        ET.SubElement(body, "freejoint", {"name": f"obj_{name}"})
        _geom(
            body,
            f"obj_{name}",
            (PEG_RADIUS, PEG_LENGTH / 2),
            (0, 0, 0),
            cls="object",
            kind="cylinder",
            density=str(PEG_DENSITY),
            material="peg",
        )

    act = ET.SubElement(root, "actuator")
    for name, lo, hi, kp, kd, tau in zip(C.JOINT_NAMES, C.Q_LOWER, C.Q_UPPER, C.KP, C.KD, C.TORQUE_LIMIT):
        ET.SubElement(
            act,
            "position",
            {
                "name": name,
                "joint": name,
                "kp": str(kp),
                "kv": str(kd),
                "ctrlrange": _num(lo, hi),
                "forcerange": _num(-tau, tau),
            },
        )
    for side in ("left_finger", "right_finger"):
        ET.SubElement(
            act,
            "position",
            {
                "name": side,
                "joint": side,
                "kp": "1000",
                "kv": "20",
                "ctrlrange": _num(0, FINGER_OPEN),
                "forcerange": "-20 20",
            },
        )
    eq = ET.SubElement(root, "equality")
    for name in blocks + pegs:
        ET.SubElement(eq, "weld", {"name": f"grasp_{name}", "body1": "hand", "body2": f"obj_{name}", "active": "false"})
    root.remove(root.find("keyframe"))  # its qpos no longer matches the model's joints
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
