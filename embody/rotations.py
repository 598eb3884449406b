"""Batched quaternion helpers (w, x, y, z; Hamilton convention), numpy only."""

from __future__ import annotations

import numpy as np


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate world vectors into the frame of ``q``. q: (n, 4), v: (n, 3) or (3,) → (n, 3)."""
    w, u = q[:, :1], q[:, 1:]
    v = np.broadcast_to(v, u.shape)
    t = 2.0 * np.cross(u, v)
    return v - w * t + np.cross(u, t)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate body-frame vectors into the world. q: (n, 4), v: (n, 3) → (n, 3)."""
    w, u = q[:, :1], q[:, 1:]
    v = np.broadcast_to(v, u.shape)
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def projected_gravity(q: np.ndarray) -> np.ndarray:
    """The unit gravity direction seen in the frame of ``q`` (n, 4) → (n, 3)."""
    return quat_rotate_inverse(q, np.array([0.0, 0.0, -1.0]))


def yaw_quat(yaw: np.ndarray) -> np.ndarray:
    """Quaternions of rotations about world z. yaw: (n,) → (n, 4)."""
    h = 0.5 * np.asarray(yaw, dtype=np.float64)
    return np.stack([np.cos(h), np.zeros_like(h), np.zeros_like(h), np.sin(h)], axis=-1)
