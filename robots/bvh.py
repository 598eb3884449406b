"""BVH motion capture files (Biovision hierarchy, the common mocap exchange format): read, write, forward kinematics.

A BVH file holds a skeleton (``HIERARCHY``: joints with an ``OFFSET`` from their parent and ``CHANNELS``, end
sites) and ``MOTION``: a frame count, a frame time and one row of channel values per frame. Rotation channels
are degrees, applied in the order listed (``Zrotation Xrotation Yrotation``: R = Rz·Rx·Ry); position channels
are in the file's length unit. A joint's world transform is its parent's · translate(offset + position
channels) · rotate(channels).

Malformed files raise :class:`MotionError` naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.files import write_atomic
from embody.robots.motion import MotionError

ROTATIONS = {"Xrotation": 0, "Yrotation": 1, "Zrotation": 2}
POSITIONS = {"Xposition": 0, "Yposition": 1, "Zposition": 2}


@dataclass
class BvhJoint:
    """One node of the skeleton: ``parent`` index (−1 for the root), ``offset`` (3,) from the parent, ``channels``
    (names, in file order; empty for an end site)."""

    name: str
    parent: int
    offset: np.ndarray
    channels: tuple[str, ...] = ()


@dataclass
class BvhMotion:
    """A skeleton and its frames: ``frames`` (T, C) channel values, C = the joints' channels in order."""

    joints: list[BvhJoint]
    frame_time: float
    frames: np.ndarray

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time

    def index(self, name: str) -> int:
        """The joint named ``name``; KeyError if none."""
        for i, j in enumerate(self.joints):
            if j.name == name:
                return i
        raise KeyError(name)

    def world(self) -> tuple[np.ndarray, np.ndarray]:
        """Every joint's world position (T, N, 3) and rotation (T, N, 3, 3) at every frame."""
        T, N = len(self.frames), len(self.joints)
        pos, rot = np.zeros((T, N, 3)), np.tile(np.eye(3), (T, N, 1, 1))
        col = 0
        for i, j in enumerate(self.joints):
            local_p, local_r = np.tile(j.offset, (T, 1)), np.tile(np.eye(3), (T, 1, 1))
            for c in j.channels:
                v = self.frames[:, col]
                col += 1
                if c in POSITIONS:
                    local_p[:, POSITIONS[c]] += v
                else:
                    local_r = local_r @ axis_rotation(ROTATIONS[c], np.radians(v))
            if j.parent < 0:
                pos[:, i], rot[:, i] = local_p, local_r
            else:
                parent_r = rot[:, j.parent]
                pos[:, i] = pos[:, j.parent] + np.einsum("tij,tj->ti", parent_r, local_p)
                rot[:, i] = parent_r @ local_r
        return pos, rot

    def save(self, path: str | Path) -> Path:
        """Write this motion as a BVH file (atomically)."""
        lines = ["HIERARCHY"]
        children = {i: [k for k, j in enumerate(self.joints) if j.parent == i] for i in range(len(self.joints))}

        def emit(i: int, d: int) -> None:
            j, pad = self.joints[i], "  " * d
            head = "ROOT" if j.parent < 0 else ("End Site" if not j.channels else "JOINT")
            lines.append(f"{pad}{head}" if head == "End Site" else f"{pad}{head} {j.name}")
            lines.append(pad + "{")
            lines.append(f"{pad}  OFFSET {' '.join(f'{x:.6f}' for x in j.offset)}")
            if j.channels:
                lines.append(f"{pad}  CHANNELS {len(j.channels)} {' '.join(j.channels)}")
            for k in children[i]:
                emit(k, d + 1)
            lines.append(pad + "}")

        emit(0, 0)
        lines += ["MOTION", f"Frames: {len(self.frames)}", f"Frame Time: {self.frame_time:.8f}"]
        lines += [" ".join(f"{x:.6f}" for x in row) for row in self.frames]
        return write_atomic(path, "\n".join(lines) + "\n")


def axis_rotation(axis: int, angle: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) by ``angle`` [rad] about the x, y or z axis (0, 1, 2)."""
    c, s = np.cos(angle), np.sin(angle)
    r = np.zeros(np.shape(angle) + (3, 3))
    a, b = (axis + 1) % 3, (axis + 2) % 3  # cyclic: Ry takes z to x
    r[..., axis, axis] = 1.0
    r[..., a, a], r[..., a, b], r[..., b, a], r[..., b, b] = c, -s, s, c
    return r


class _Tokens:
    """Whitespace tokens of a BVH file with their line numbers, for errors that say where."""

    def __init__(self, path: Path, text: str):
        self.path = path
        self.items = [(w, n) for n, line in enumerate(text.splitlines(), 1) for w in line.split()]
        self.pos = 0

    def error(self, problem: str) -> MotionError:
        line = self.items[min(self.pos, len(self.items) - 1)][1] if self.items else 1
        return MotionError(f"{self.path}: line {line}: {problem}")

    def next(self, what: str) -> str:
        if self.pos >= len(self.items):
            raise self.error(f"the file ends where {what} was expected")
        self.pos += 1
        return self.items[self.pos - 1][0]

    def expect(self, word: str) -> None:
        got = self.next(repr(word))
        if got != word:
            self.pos -= 1
            raise self.error(f"expected {word!r}, found {got!r}")

    def number(self, what: str) -> float:
        w = self.next(what)
        try:
            return float(w)
        except ValueError:
            self.pos -= 1
            raise self.error(f"expected a number ({what}), found {w!r}") from None


def load_bvh(path: str | Path) -> BvhMotion:
    """Read a BVH file; MotionError naming the file and line for anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise MotionError(f"{path}: BVH file is missing")
    try:
        tok = _Tokens(path, path.read_text())
    except UnicodeDecodeError:
        raise MotionError(f"{path}: not a text BVH file") from None
    tok.expect("HIERARCHY")
    tok.expect("ROOT")
    joints: list[BvhJoint] = []
    _read_joint(tok, joints, parent=-1)
    tok.expect("MOTION")
    tok.expect("Frames:")
    n = tok.number("the frame count")
    tok.expect("Frame")
    tok.expect("Time:")
    dt = tok.number("the frame time")
    if n != int(n) or n < 1 or not dt > 0:
        raise tok.error(f"needs at least one frame and a positive frame time (Frames: {n:g}, Frame Time: {dt:g})")
    width = sum(len(j.channels) for j in joints)
    values = [tok.number(f"channel value {k % width + 1} of frame {k // width + 1}") for k in range(int(n) * width)]
    if tok.pos != len(tok.items):
        raise tok.error(f"more values than {int(n)} frames × {width} channels")
    frames = np.array(values).reshape(int(n), width)
    if not np.isfinite(frames).all():
        raise MotionError(f"{path}: the motion has non-finite values")
    return BvhMotion(joints, dt, frames)


def _read_joint(tok: _Tokens, joints: list[BvhJoint], parent: int) -> None:
    """The joint whose name comes next (after ROOT/JOINT) and its subtree, appended to ``joints`` depth first."""
    name = tok.next("a joint name")
    tok.expect("{")
    tok.expect("OFFSET")
    offset = np.array([tok.number("an OFFSET coordinate") for _ in range(3)])
    tok.expect("CHANNELS")
    count = tok.number("the channel count")
    channels = tuple(tok.next("a channel name") for _ in range(int(count)))
    unknown = [c for c in channels if c not in ROTATIONS and c not in POSITIONS]
    if unknown:
        raise tok.error(f"joint {name!r} has unknown channels {unknown}")
    me = len(joints)
    joints.append(BvhJoint(name, parent, offset, channels))
    while True:
        word = tok.next("JOINT, End Site or '}'")
        if word == "}":
            return
        if word == "JOINT":
            _read_joint(tok, joints, me)
        elif word == "End":
            tok.expect("Site")
            tok.expect("{")
            tok.expect("OFFSET")
            end = np.array([tok.number("an OFFSET coordinate") for _ in range(3)])
            tok.expect("}")
            joints.append(BvhJoint(f"{name}_end", me, end))
        else:
            tok.pos -= 1
            raise tok.error(f"expected JOINT, End Site or '}}' in joint {name!r}, found {word!r}")
