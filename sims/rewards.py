"""Shaped-reward helpers shared by tasks (the DeepMind Control Suite's tolerance).

Written once for numpy arrays and torch tensors alike (``embody.arrays``): a differentiable task's reward runs
through the same code on the numpy step and on the gradient path (sims/diff_env.py)."""

from __future__ import annotations

import math

from embody.arrays import namespace


def tolerance(x, bounds=(0.0, 0.0), margin: float = 0.0, sigmoid: str = "gaussian", value_at_margin: float = 0.1):
    """1 inside ``bounds``, decaying with distance outside to ``value_at_margin`` at ``margin`` (numpy or torch)."""
    xp = namespace(x)
    lower, upper = bounds
    inside = (lower <= x) & (x <= upper)
    if margin == 0:
        return xp.where(inside, 1.0 + 0.0 * x, 0.0 * x)
    d = xp.where(x < lower, lower - x, x - upper) / margin
    if sigmoid == "gaussian":
        scale = math.sqrt(-2 * math.log(value_at_margin))
        out = xp.exp(-0.5 * (d * scale) ** 2)
    elif sigmoid == "quadratic":
        scale = math.sqrt(1 - value_at_margin)
        out = xp.where(xp.abs(d * scale) < 1, 1 - (d * scale) ** 2, 0.0)
    else:
        raise ValueError(f"unknown sigmoid {sigmoid!r}; valid: gaussian, quadratic")
    return xp.where(inside, 1.0, out)
