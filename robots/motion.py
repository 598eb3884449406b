"""Motion clips: joint trajectories a policy learns to track (e.g. ALMI's upper-body tracking).

A :class:`MotionClip` is ``T`` frames at a fixed ``fps`` of joint positions [rad] for named
joints, optionally with the floating base's position [m] and orientation (quaternion w,x,y,z).

File format (``.safetensors``, one clip per file, never pickle):

* tensors: ``joint_pos`` (T, J) float64; optionally ``root_pos`` (T, 3) and ``root_quat`` (T, 4).
* safetensors metadata (str -> str):
  ``format = "embody.motion"``, ``format_version = "1"``, ``fps`` (a float, > 0),
  ``joint_names`` (a JSON list of J names, the columns of ``joint_pos``), ``label`` and (optional) ``family``.

``save`` writes a temporary file and renames it into place, so a crash never leaves a partial
clip; ``load`` refuses a missing, damaged, foreign, too new or inconsistent file with one
:class:`MotionError` naming it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody import exits
from embody.robots.spec import RobotSpec

FORMAT = "embody.motion"
FORMAT_VERSION = 1
_TENSORS = ("joint_pos", "root_pos", "root_quat")


class MotionError(ValueError):
    """A motion clip is missing, damaged, foreign, too new, inconsistent or does not fit a robot."""

    exit_code = exits.INPUT


@dataclass(eq=False)
class MotionClip:
    """``joint_pos`` (T, J) [rad] for ``joint_names`` at ``fps``; root_pos (T, 3), root_quat (T, 4 w,x,y,z)."""

    joint_names: tuple[str, ...]
    fps: float
    joint_pos: np.ndarray
    root_pos: np.ndarray | None = None
    root_quat: np.ndarray | None = None
    label: str = ""
    family: str = ""  # the kind of motion ("boxing"); held-out evaluation holds out whole families

    def __post_init__(self) -> None:
        self.joint_names = tuple(self.joint_names)
        self.fps = float(self.fps)
        self.joint_pos = np.asarray(self.joint_pos, dtype=np.float64)
        for name in ("root_pos", "root_quat"):
            if getattr(self, name) is not None:
                setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        problem = self._problem()
        if problem:
            raise MotionError(problem)

    def _problem(self) -> str | None:
        q, J = self.joint_pos, len(self.joint_names)
        if not (math.isfinite(self.fps) and self.fps > 0):
            return f"fps must be finite and > 0, got {self.fps}"
        if len(set(self.joint_names)) != J:
            return f"joint_names has duplicates: {self.joint_names}"
        if q.ndim != 2 or q.shape[1] != J or q.shape[0] < 1:
            return f"joint_pos has shape {q.shape}, expected (T >= 1, {J}) for {J} joint names"
        for name, width in (("root_pos", 3), ("root_quat", 4)):
            a = getattr(self, name)
            if a is not None and a.shape != (q.shape[0], width):
                return f"{name} has shape {a.shape}, expected ({q.shape[0]}, {width}) to match joint_pos"
        for name in _TENSORS:
            a = getattr(self, name)
            if a is not None and not np.isfinite(a).all():
                return f"{name} has non-finite values (NaN or inf)"
        return None

    @property
    def n_frames(self) -> int:
        """T, the number of frames."""
        return self.joint_pos.shape[0]

    @property
    def duration(self) -> float:
        """Seconds from the first frame to the last: (T - 1) / fps."""
        return (self.n_frames - 1) / self.fps

    def _segment(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Segment index i (n,) and fraction in [0, 1] (n,) of times t (n,), clamped to the clip."""
        u = np.clip(np.asarray(t, dtype=np.float64) * self.fps, 0.0, self.n_frames - 1)
        i = np.minimum(np.floor(u).astype(np.int64), max(self.n_frames - 2, 0))
        return i, u - i

    def sample(self, t: np.ndarray) -> np.ndarray:
        """Joint positions (n, J) at times t (n,) [s]: linear interpolation, clamped at the ends."""
        if self.n_frames == 1:
            return np.broadcast_to(self.joint_pos[0], np.shape(t) + (self.joint_pos.shape[1],)).copy()
        i, f = self._segment(t)
        return self.joint_pos[i] * (1.0 - f[..., None]) + self.joint_pos[i + 1] * f[..., None]

    def velocity(self, t: np.ndarray) -> np.ndarray:
        """Joint velocities (n, J) [rad/s] at t (n,): the interpolant's slope, 0 outside the clip."""
        t = np.asarray(t, dtype=np.float64)
        if self.n_frames == 1:
            return np.zeros(t.shape + (self.joint_pos.shape[1],))
        i, _ = self._segment(t)
        v = (self.joint_pos[i + 1] - self.joint_pos[i]) * self.fps
        inside = (t >= 0.0) & (t <= self.duration)
        return np.where(inside[..., None], v, 0.0)

    def to_robot(self, spec: RobotSpec, fill: np.ndarray | None = None) -> MotionClip:
        """This clip with columns in ``spec``'s motor order (T, spec.n_joints); absent joints take ``fill``."""
        unknown = [n for n in self.joint_names if n not in spec.joint_names]
        if unknown:
            raise MotionError(f"motion {self.label!r} has joints robot {spec.name!r} lacks: {unknown}")
        fill = spec.default_pose if fill is None else np.asarray(fill, dtype=np.float64)
        q = np.tile(fill, (self.n_frames, 1))
        q[:, [spec.joint_names.index(n) for n in self.joint_names]] = self.joint_pos
        return MotionClip(spec.joint_names, self.fps, q, self.root_pos, self.root_quat, self.label, self.family)

    def save(self, path: str | Path) -> Path:
        """Write this clip to ``path`` (.safetensors) atomically."""
        from safetensors.numpy import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {n: np.ascontiguousarray(getattr(self, n)) for n in _TENSORS if getattr(self, n) is not None}
        meta = {
            "format": FORMAT,
            "format_version": str(FORMAT_VERSION),
            "fps": repr(self.fps),
            "joint_names": json.dumps(list(self.joint_names)),
            "label": self.label,
            "family": self.family,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            save_file(tensors, tmp, metadata=meta)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return path


def _read(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise MotionError(f"{path} is not a readable safetensors file (truncated or foreign?): {e}") from None


def _fields(meta: dict[str, str], tensors: dict[str, np.ndarray]) -> dict:
    """MotionClip keyword arguments from a file's metadata and tensors; MotionError if they are not a clip."""
    if meta.get("format") != FORMAT:
        raise MotionError(f"not an embody motion clip (format {meta.get('format')!r})")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise MotionError(
            f"motion format version {meta.get('format_version')!r} is not supported "
            f"(this embody reads version {FORMAT_VERSION}; upgrade embody)"
        )
    if "joint_pos" not in tensors:
        raise MotionError("has no joint_pos tensor")
    try:
        names = json.loads(meta["joint_names"])
        fps = float(meta["fps"])
    except (KeyError, ValueError) as e:
        raise MotionError(f"bad or missing metadata joint_names/fps: {e}") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise MotionError(f"metadata joint_names is not a list of names: {meta['joint_names']!r}")
    return dict(
        joint_names=tuple(names),
        fps=fps,
        label=meta.get("label", ""),
        family=meta.get("family", ""),
        **{n: tensors.get(n) for n in _TENSORS},
    )


def load(path: str | Path) -> MotionClip:
    """Read and validate one clip written by :meth:`MotionClip.save`."""
    path = Path(path)
    if not path.is_file():
        raise MotionError(f"{path}: motion file is missing")
    try:
        return MotionClip(**_fields(*_read(path)))
    except MotionError as e:
        msg = str(e)
        raise MotionError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None


def load_library(folder: str | Path) -> list[MotionClip]:
    """Every ``*.safetensors`` clip in ``folder``, sorted by file name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MotionError(f"{folder}: motion library folder is missing")
    return [load(p) for p in sorted(folder.glob("*.safetensors"))]


# --- procedural upper-body library (H1-2 joint names) -------------------------------------------

AMPLITUDES = (0.3, 0.6, 0.9)  # fraction of each motion's full amplitude
FREQUENCIES = (0.5, 1.0, 1.5)  # Hz
DURATION, FPS, RAMP, MARGIN = 5.0, 50.0, 0.5, 0.05  # s, Hz, s, rad

# A motion: (time (T,), amplitude, frequency, phase, side sign) -> {joint suffix or name: offset (T,)}
Offsets = Callable[[np.ndarray, float, float, float, float], dict[str, np.ndarray]]


def _wave(t, a, f, ph, s):
    return {
        "shoulder_pitch": -1.2 * a + 0 * t,
        "shoulder_roll": s * 0.8 * a + 0 * t,
        "elbow_pitch": 0.8 * a + 0.6 * a * np.sin(2 * np.pi * f * t + ph),
    }


def _reach(t, a, f, ph, s):
    out = 0.5 * (1.0 - np.cos(2 * np.pi * f * t))  # 0 -> 1 (the target) -> 0, f times a second
    return {"shoulder_pitch": -1.5 * a * out, "shoulder_roll": s * 0.2 * a * out, "elbow_pitch": 0.3 * a * out}


def _swing(t, a, f, ph, s):
    w = 0.6 * a * np.sin(2 * np.pi * f * t + ph)
    return {
        "left_shoulder_pitch_joint": w,
        "right_shoulder_pitch_joint": -w,
        "left_elbow_pitch_joint": 0.3 * a + 0 * t,
        "right_elbow_pitch_joint": 0.3 * a + 0 * t,
    }


def _twist(t, a, f, ph, s):
    return {"torso_joint": 0.8 * a * np.sin(2 * np.pi * f * t + ph)}


# H1-2 arm conventions: negative shoulder pitch raises the arm forward; at elbow pitch 0 the forearm is at a right
# angle to the upper arm, positive straightens it, negative folds it up.
def _both(fn):
    """A one-arm motion on both arms (the right one half a period later)."""
    return lambda t, a, f, ph, s: {
        f"{side}_{k}_joint": v
        for side, sign, shift in (("left", 1.0, 0.0), ("right", -1.0, np.pi))
        for k, v in fn(t, a, f, ph + shift, sign).items()
    }


def _punch(t, a, f, ph, s):
    hit = np.clip(np.sin(2 * np.pi * f * t + ph), 0.0, None) ** 2  # guard (0) -> full extension (1) -> guard
    return {
        "shoulder_pitch": -0.3 - 0.9 * a * hit,
        "shoulder_roll": s * 0.1 + 0 * t,
        "elbow_pitch": -0.6 + 1.5 * a * hit,
    }


def _overhead(t, a, f, ph, s):
    up = 0.5 * (1.0 - np.cos(2 * np.pi * f * t))
    return {"shoulder_pitch": -2.6 * a * up, "shoulder_roll": s * 0.15 * a * up, "elbow_pitch": 1.2 * a * up}


def _carry(t, a, f, ph, s):
    bob = 0.15 * a * np.sin(2 * np.pi * f * t + ph)
    return {"shoulder_pitch": -0.4 * a + bob, "shoulder_roll": -s * 0.15 * a + 0 * t, "elbow_pitch": -0.3 * a - bob}


def _point(t, a, f, ph, s):
    aim = np.tanh(4.0 * np.sin(2 * np.pi * 0.5 * f * t + ph))  # holds one direction, then swings to the other
    return {"shoulder_pitch": -1.4 * a + 0 * t, "shoulder_yaw": 0.6 * a * aim, "elbow_pitch": 1.4 * a + 0 * t}


# family, label, offsets, arm side (None: the offsets name their joints), speed (× FREQUENCIES: large motions are slower)
MOTIONS: tuple[tuple[str, str, Offsets, str | None, float], ...] = (
    ("wave", "wave left", _wave, "left", 1.0),
    ("wave", "wave right", _wave, "right", 1.0),
    ("reach", "reach left", _reach, "left", 1.0),
    ("reach", "reach right", _reach, "right", 1.0),
    ("arm swing", "arm swing", _swing, None, 1.0),
    ("waist twist", "waist twist", _twist, None, 1.0),
    ("boxing", "boxing", _both(_punch), None, 1.0),
    ("overhead reach", "overhead reach", _both(_overhead), None, 0.5),
    ("wave both", "wave both arms", _both(_wave), None, 1.0),
    ("carry", "carry", _both(_carry), None, 1.0),
    ("point", "point left", _point, "left", 1.0),
    ("point", "point right", _point, "right", 1.0),
)
FAMILIES = tuple(dict.fromkeys(m[0] for m in MOTIONS))
DEFAULT_FAMILIES = ("wave", "reach", "arm swing", "waist twist")  # what h1_2-stand plays unless told otherwise


def _envelope(t: np.ndarray) -> np.ndarray:
    """Cosine ramp (T,): 0 at both ends, 1 from RAMP seconds in to RAMP seconds before the end."""
    edge = np.clip(np.minimum(t, t[-1] - t) / RAMP, 0.0, 1.0)
    return 0.5 * (1.0 - np.cos(np.pi * edge))


def _clip(
    spec: RobotSpec, names: tuple[str, ...], offsets: dict[str, np.ndarray], t: np.ndarray, side: str | None, label: str
) -> MotionClip:
    """Default pose plus enveloped offsets (T, J), clipped to the joint ranges less MARGIN."""
    idx = [spec.joint_names.index(n) for n in names]
    q0, lo, hi = spec.default_pose[idx], spec.lower[idx] + MARGIN, spec.upper[idx] - MARGIN
    q = np.tile(q0, (len(t), 1))
    env = _envelope(t)
    for key, off in offsets.items():
        name = f"{side}_{key}_joint" if side else key
        if name not in names:
            raise MotionError(f"robot {spec.name!r} has no upper-body joint {name!r} for motion {label!r}")
        q[:, names.index(name)] += env * off
    return MotionClip(names, FPS, np.clip(q, lo, hi), label=label)


def generate_library(spec: RobotSpec, seed: int = 0, families: tuple[str, ...] = DEFAULT_FAMILIES) -> list[MotionClip]:
    """Upper-body clips of the given FAMILIES (waves, reaches, arm swings, waist twists by default; boxing,
    overhead reaches, two-arm waves, carrying, pointing) at graded amplitude and speed.

    Each is DURATION s at FPS over the ``upper_body`` joints in motor order, starts and ends at
    the default pose, stays MARGIN inside the joint ranges and within the velocity limits.
    ``seed`` draws the phases of the oscillations.
    """
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise MotionError(f"unknown motion families {unknown}; valid: {', '.join(FAMILIES)}")
    rng = np.random.default_rng(seed)
    names = tuple(spec.joint_names[i] for i in spec.group("upper_body"))
    t = np.arange(round(DURATION * FPS) + 1) / FPS
    clips = []
    for family, label, fn, side, speed in MOTIONS:
        if family not in families:
            continue
        for a in AMPLITUDES:
            for f in np.multiply(FREQUENCIES, speed):
                s = 1.0 if side == "left" else -1.0
                offsets = fn(t, a, f, float(rng.uniform(0, 2 * np.pi)), s)
                clip = _clip(spec, names, offsets, t, side, f"{label}, amplitude {a}, {f} Hz")
                clip.family = family
                clips.append(clip)
    limit = spec.velocity_limit[spec.group("upper_body")]
    for c in clips:
        if (np.abs(np.diff(c.joint_pos, axis=0)) * c.fps > limit).any():
            raise MotionError(f"generated motion {c.label!r} exceeds the velocity limits")  # a bug here
    return clips


__all__ = [
    "MotionClip",
    "MotionError",
    "load",
    "load_library",
    "generate_library",
    "FAMILIES",
    "DEFAULT_FAMILIES",
    "FORMAT",
    "FORMAT_VERSION",
]
