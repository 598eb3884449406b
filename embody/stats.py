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


def add_means(entry: dict, rows: list[dict], metrics) -> dict:
    """``entry`` with each metric's mean over the rows where it is finite and its 95 % interval (``<metric>_ci``);
    a metric finite in no row is left out."""
    for m in metrics:
        values = [r[m] for r in rows if r.get(m) is not None and np.isfinite(r[m])]
        if values:
            entry[m], entry[f"{m}_ci"] = float(np.mean(values)), bootstrap_ci(values)
    return entry


def ci_cell(entry: dict, key: str, spec: str = ".2f") -> str:
    """ "mean [lo, hi]" of ``key`` in an entry ``add_means`` filled, or "—" without it (a report's table cell)."""
    if key not in entry:
        return "—"
    lo, hi = entry[f"{key}_ci"]
    return f"{entry[key]:{spec}} [{lo:{spec}}, {hi:{spec}}]"
