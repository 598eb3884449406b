"""Scripted actors: (t, x, y, heading, speed) waypoints in the road frame, and the CSV that holds them.

An actors file is CSV with a header naming at least the columns ``actor,t,x,y,heading,speed``
(any order; other columns are ignored): one row per waypoint, t in seconds since the episode
start, x/y in m, heading in rad (counter-clockwise), speed in m/s, all in the road frame. Rows of
one actor must have strictly increasing t (actors may interleave). Backends replay an actor
kinematically: it appears at its first waypoint time, moves along the waypoints (linear
interpolation; heading unwrapped) and keeps its last heading and speed after the last one.

Bad files raise ActorsFileError naming the file and the row (the header is row 1).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import DrivingError

COLUMNS = ("actor", "t", "x", "y", "heading", "speed")


class ActorsFileError(DrivingError):
    """A malformed actors CSV; the message names the file and the row."""


@dataclass
class Trajectory:
    """Waypoints of one actor, each (k,): t [s], x, y [m], heading [rad], speed [m/s]; t strictly increasing."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    heading: np.ndarray
    speed: np.ndarray

    def __post_init__(self) -> None:
        for name in ("t", "x", "y", "heading", "speed"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64).reshape(-1))
        k = len(self.t)
        if k == 0 or any(len(getattr(self, n)) != k for n in ("x", "y", "heading", "speed")):
            raise DrivingError("a trajectory needs at least one waypoint and equal-length t, x, y, heading, speed")
        if k > 1 and np.any(np.diff(self.t) <= 0):
            raise DrivingError("trajectory times must increase strictly")
        self._unwrapped = np.unwrap(self.heading)

    @classmethod
    def from_states(cls, t, states) -> Trajectory:
        """From times (k,) and rows (k, 4) of x, y, heading, speed (e.g. a policy's predicted waypoints)."""
        states = np.asarray(states, dtype=np.float64).reshape(-1, 4)
        return cls(t, states[:, 0], states[:, 1], states[:, 2], states[:, 3])

    @property
    def start(self) -> float:
        return float(self.t[0])

    @property
    def end(self) -> float:
        return float(self.t[-1])

    def at(self, t: float) -> tuple[float, float, float, float]:
        """(x, y, heading, speed) at time ``t``: interpolated inside, the first waypoint before the
        start, constant heading and speed after the end."""
        if t <= self.t[0]:
            return float(self.x[0]), float(self.y[0]), float(self.heading[0]), float(self.speed[0])
        if t >= self.t[-1]:
            dt, h, v = t - self.t[-1], float(self.heading[-1]), float(self.speed[-1])
            return float(self.x[-1] + v * dt * math.cos(h)), float(self.y[-1] + v * dt * math.sin(h)), h, v
        h = float(np.interp(t, self.t, self._unwrapped))
        h = (h + math.pi) % (2 * math.pi) - math.pi
        return (
            float(np.interp(t, self.t, self.x)),
            float(np.interp(t, self.t, self.y)),
            h,
            float(np.interp(t, self.t, self.speed)),
        )

    def states(self) -> np.ndarray:
        """(k, 4) waypoints x, y, heading, speed."""
        return np.stack([self.x, self.y, self.heading, self.speed], axis=1)


def load_actors_csv(path: str | Path) -> dict[str, Trajectory]:
    """Read an actors file into {actor name: Trajectory}, in order of first appearance."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ActorsFileError(f"{path}: actors file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ActorsFileError(f"{path}: cannot read the actors file: {e}") from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise ActorsFileError(f"{path} row 1: the file is empty; expected the header {','.join(COLUMNS)}")
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ActorsFileError(
            f"{path} row 1: missing column(s) {', '.join(missing)}; "
            f"expected the header {','.join(COLUMNS)} (got {','.join(header)})"
        )
    col = {c: header.index(c) for c in COLUMNS}
    rows: dict[str, list[tuple[float, ...]]] = {}
    last: dict[str, tuple[float, int]] = {}
    for row_no, row in enumerate(reader, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < len(header):
            raise ActorsFileError(f"{path} row {row_no}: {len(row)} values for {len(header)} columns")
        name = row[col["actor"]].strip()
        if not name:
            raise ActorsFileError(f"{path} row {row_no}: the actor name is empty")
        values = []
        for c in COLUMNS[1:]:
            cell = row[col[c]].strip()
            try:
                v = float(cell)
            except ValueError:
                raise ActorsFileError(f"{path} row {row_no}: column {c}: {cell!r} is not a number") from None
            if math.isnan(v):
                raise ActorsFileError(f"{path} row {row_no}: column {c} is NaN")
            if math.isinf(v):
                raise ActorsFileError(f"{path} row {row_no}: column {c} is infinite")
            values.append(v)
        t = values[0]
        if name in last and t <= last[name][0]:
            prev_t, prev_row = last[name]
            what = "goes backwards" if t < prev_t else "repeats"
            raise ActorsFileError(
                f"{path} row {row_no}: time {what} for actor {name!r} (t={t:g} after t={prev_t:g} on row {prev_row})"
            )
        last[name] = (t, row_no)
        rows.setdefault(name, []).append(tuple(values))
    if not rows:
        raise ActorsFileError(f"{path} row 2: no waypoints after the header")
    out = {}
    for name, waypoints in rows.items():
        a = np.array(waypoints)
        out[name] = Trajectory(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4])
    return out


def save_actors_csv(path: str | Path, actors: dict[str, Trajectory]) -> Path:
    """Write ``actors`` as an actors file (the inverse of load_actors_csv)."""
    path = Path(path)
    lines = [",".join(COLUMNS)]
    for name, tr in actors.items():
        for i in range(len(tr.t)):
            values = (tr.t[i], tr.x[i], tr.y[i], tr.heading[i], tr.speed[i])
            lines.append(",".join([name, *(repr(float(v)) for v in values)]))
    path.write_text("\n".join(lines) + "\n")
    return path
