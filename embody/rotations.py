"""Batched quaternion helpers (w, x, y, z; Hamilton convention), numpy only."""

from __future__ import annotations

import numpy as np

from embody.arrays import namespace


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate world vectors into the frame of ``q``. q: (n, 4), v: (n, 3) or (3,) → (n, 3)."""
    return _rotate(q, v, -1.0)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate body-frame vectors into the world. q: (n, 4), v: (n, 3) → (n, 3)."""
    return _rotate(q, v, 1.0)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise a × b for (n, 3) arrays: np.cross's axis juggling costs more than the arithmetic at these sizes."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=1)


def _rotate(q: np.ndarray, v: np.ndarray, sign: float) -> np.ndarray:
    """v rotated by q (sign +1) or by its inverse (sign −1): v ± w·t + u × t with t = 2 u × v."""
    w, u = q[:, :1], q[:, 1:]
    v = np.broadcast_to(v, u.shape)
    t = 2.0 * _cross(u, v)
    return v + sign * w * t + _cross(u, t)


def projected_gravity(q: np.ndarray) -> np.ndarray:
    """The unit gravity direction seen in the frame of ``q`` (n, 4) → (n, 3)."""
    return quat_rotate_inverse(q, np.array([0.0, 0.0, -1.0]))


def yaw_quat(yaw: np.ndarray) -> np.ndarray:
    """Quaternions of rotations about world z. yaw: (n,) → (n, 4)."""
    h = 0.5 * np.asarray(yaw, dtype=np.float64)
    return np.stack([np.cos(h), np.zeros_like(h), np.zeros_like(h), np.sin(h)], axis=-1)


def quat_mul(a, b):
    """Hamilton product a ⊗ b; a, b: (n, 4) or (4,), broadcast → (n, 4) (or (4,)); numpy, or torch tensors (both)."""
    xp = namespace(a)
    if xp is np:
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    aw, ax, ay, az = (a[..., i] for i in range(4))
    bw, bx, by, bz = (b[..., i] for i in range(4))
    return xp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    """The inverse rotation of unit quaternions (..., 4)."""
    return np.asarray(q) * np.array([1.0, -1.0, -1.0, -1.0])


def axis_angle_quat(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Quaternions of rotations by ``angle`` (n,) about the fixed unit ``axis`` (3,) → (n, 4)."""
    h = 0.5 * np.asarray(angle, dtype=np.float64)[:, None]
    return np.concatenate([np.cos(h), np.sin(h) * np.asarray(axis)], axis=-1)


def quat_to_rpy(q: np.ndarray) -> np.ndarray:
    """(n, 4) w,x,y,z → (n, 3) roll, pitch, yaw [rad] (intrinsic z-y-x, the IMU convention)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    roll = np.arctan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = np.arcsin(np.clip(2 * (w * y - z * x), -1.0, 1.0))
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([roll, pitch, yaw], axis=1)
