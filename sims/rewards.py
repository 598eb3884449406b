"""Shaped-reward helpers shared by tasks (the DeepMind Control Suite's tolerance)."""

from __future__ import annotations

import numpy as np


def tolerance(
    x: np.ndarray, bounds=(0.0, 0.0), margin: float = 0.0, sigmoid: str = "gaussian", value_at_margin: float = 0.1
) -> np.ndarray:
    """1 inside ``bounds``, decaying with distance outside to ``value_at_margin`` at ``margin``."""
    lower, upper = bounds
    inside = (lower <= x) & (x <= upper)
    if margin == 0:
        return inside.astype(np.float64)
    d = np.where(x < lower, lower - x, x - upper) / margin
    if sigmoid == "gaussian":
        scale = np.sqrt(-2 * np.log(value_at_margin))
        out = np.exp(-0.5 * (d * scale) ** 2)
    elif sigmoid == "quadratic":
        scale = np.sqrt(1 - value_at_margin)
        out = np.where(np.abs(d * scale) < 1, 1 - (d * scale) ** 2, 0.0)
    else:
        raise ValueError(f"unknown sigmoid {sigmoid!r}; valid: gaussian, quadratic")
    return np.where(inside, 1.0, out)
