"""Code written once for numpy arrays and torch tensors alike: a differentiable task's observation, reward and
kinematics run through the same lines on the numpy step and on the gradient path (sims/diff_env.py)."""

from __future__ import annotations

import sys

import numpy as np


def namespace(x):
    """The array module of ``x``: torch for a tensor, else numpy (their shared calls: exp, abs, where, clip, cos, ...)."""
    torch = sys.modules.get("torch")  # a tensor exists only if torch is imported
    return torch if torch is not None and isinstance(x, torch.Tensor) else np


def like(value, x):
    """``value`` (an array) in ``x``'s kind: a tensor of x's dtype and device when ``x`` is one."""
    xp = namespace(x)
    return value if xp is np else xp.as_tensor(value, dtype=x.dtype, device=x.device)


def cross(a, b):
    """Cross products over the last axis (3), broadcast: numpy or torch."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return namespace(a).stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def mat_to_quat(R):
    """Rotation matrices (..., 3, 3) → unit quaternions (..., 4) w, x, y, z, as MuJoCo's ``mju_mat2Quat`` picks
    them (the branch of the largest component, so the sign matches its frame sensors): numpy or torch."""
    xp = namespace(R)
    r = [[R[..., i, j] for j in range(3)] for i in range(3)]
    t = r[0][0] + r[1][1] + r[2][2]
    sqrt = lambda v: xp.sqrt(xp.clip(v, 1e-12, None))  # noqa: E731 (the branch not taken may be negative)
    w = 0.5 * sqrt(1 + t)
    qw = xp.stack([w, (r[2][1] - r[1][2]) / (4 * w), (r[0][2] - r[2][0]) / (4 * w), (r[1][0] - r[0][1]) / (4 * w)], -1)
    x = 0.5 * sqrt(1 + r[0][0] - r[1][1] - r[2][2])
    qx = xp.stack([(r[2][1] - r[1][2]) / (4 * x), x, (r[0][1] + r[1][0]) / (4 * x), (r[0][2] + r[2][0]) / (4 * x)], -1)
    y = 0.5 * sqrt(1 - r[0][0] + r[1][1] - r[2][2])
    qy = xp.stack([(r[0][2] - r[2][0]) / (4 * y), (r[0][1] + r[1][0]) / (4 * y), y, (r[1][2] + r[2][1]) / (4 * y)], -1)
    z = 0.5 * sqrt(1 - r[0][0] - r[1][1] + r[2][2])
    qz = xp.stack([(r[1][0] - r[0][1]) / (4 * z), (r[0][2] + r[2][0]) / (4 * z), (r[1][2] + r[2][1]) / (4 * z), z], -1)
    q = xp.where(
        (t > 0)[..., None],
        qw,
        xp.where(
            ((r[0][0] > r[1][1]) & (r[0][0] > r[2][2]))[..., None], qx, xp.where((r[1][1] > r[2][2])[..., None], qy, qz)
        ),
    )
    return q / xp.sqrt((q * q).sum(-1))[..., None]
