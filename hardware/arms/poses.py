"""Pose conversions between the vendors' formats and embody's (quaternions w, x, y, z).

UR reports poses as [x, y, z, rx, ry, rz]: position [m] and a rotation vector (axis × angle
[rad]). libfranka reports homogeneous transforms as 16 numbers in column-major order.
"""

from __future__ import annotations

import numpy as np

_SMALL = 1e-8  # rad: below this the rotation vector's direction is numerically meaningless


def axis_angle_to_quat(rotvec: np.ndarray) -> np.ndarray:
    """Rotation vector(s) (..., 3) [rad] → unit quaternion(s) (..., 4) w,x,y,z with w ≥ 0."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    # sin(θ/2)/θ, with its Taylor series near 0 so that tiny rotations stay exact
    scale = np.where(angle > _SMALL, np.sin(0.5 * angle) / np.maximum(angle, _SMALL), 0.5 - angle**2 / 48.0)
    q = np.concatenate([np.cos(0.5 * angle), scale * v], axis=-1)
    return _positive_w(q)


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """Quaternion(s) (..., 4) w,x,y,z (any norm > 0) → rotation vector(s) (..., 3), angle in [0, π]."""
    q = _positive_w(np.asarray(quat, dtype=np.float64))
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, u = q[..., :1], q[..., 1:]
    s = np.linalg.norm(u, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, w)  # stable for small and near-π angles alike
    scale = np.where(s > _SMALL, angle / np.maximum(s, _SMALL), 2.0 / np.maximum(w, _SMALL))
    return scale * u


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) → unit quaternion (4,) w,x,y,z with w ≥ 0 (Shepperd's method:
    divides by the largest of the four candidates, so it is accurate for every rotation)."""
    R = np.asarray(R, dtype=np.float64)
    t = np.trace(R)
    cands = np.array([t, R[0, 0], R[1, 1], R[2, 2]])
    k = int(np.argmax(cands))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + t)
        q = [w, (R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w)]
    else:
        i, j, m = k - 1, k % 3, (k + 1) % 3
        x = np.zeros(3)
        x[i] = 0.5 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[m, m])
        x[j] = (R[j, i] + R[i, j]) / (4 * x[i])
        x[m] = (R[m, i] + R[i, m]) / (4 * x[i])
        q = [(R[m, j] - R[j, m]) / (4 * x[i]), *x]
    q = np.asarray(q)
    return _positive_w(q / np.linalg.norm(q))


def quat_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Quaternion (4,) w,x,y,z (any norm > 0) → rotation matrix (3, 3)."""
    w, x, y, z = np.asarray(quat, dtype=np.float64) / np.linalg.norm(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def column_major_to_pose(T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A homogeneous transform as 16 numbers, column-major (libfranka's O_T_EE) → position (3,) [m]
    and quaternion (4,) w,x,y,z."""
    M = np.asarray(T, dtype=np.float64).reshape(4, 4).T  # reshape reads rows; the data are columns
    return M[:3, 3].copy(), matrix_to_quat(M[:3, :3])


def pose_to_column_major(pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """Position (3,) and quaternion (4,) w,x,y,z → 16 numbers, column-major (libfranka's order)."""
    M = np.eye(4)
    M[:3, :3], M[:3, 3] = quat_to_matrix(quat), pos
    return M.T.reshape(16)


def _positive_w(q: np.ndarray) -> np.ndarray:
    """q and −q are the same rotation; pick w ≥ 0 so that equal rotations compare equal."""
    return np.where(q[..., :1] < 0, -q, q)


__all__ = [
    "axis_angle_to_quat",
    "column_major_to_pose",
    "matrix_to_quat",
    "pose_to_column_major",
    "quat_to_axis_angle",
    "quat_to_matrix",
]
