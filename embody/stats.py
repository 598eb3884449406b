"""Small statistics shared by the studies."""

from __future__ import annotations

import numpy as np


def bootstrap_ci(values, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean of ``values`` (n resamples, fixed seed); the
    mean twice for a single value, nan twice for none."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        m = float(v.mean()) if len(v) else float("nan")
        return m, m
    means = v[np.random.default_rng(seed).integers(0, len(v), (n, len(v)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
