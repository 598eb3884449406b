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
