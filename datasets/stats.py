"""Feature statistics as lerobot's ``compute_stats.py`` writes them: min, max, mean, std, count.

Numeric features: over the frame axis of (T, *shape) data, scalars keeping a (1,) shape.
Videos: per channel over every (downsampled) frame, (3, 1, 1) in [0, 1]; count = frames.
Episodes merge with the parallel-variance formula (``aggregate_feature_stats``).
"""

from __future__ import annotations

import numpy as np

STATS = ("min", "max", "mean", "std", "count")


def array_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """Stats over the frame axis of (T, ...) data; scalars keep a (1,) shape as lerobot does."""
    if x.dtype == bool:
        x = x.astype(np.int64)
    keep = x.ndim == 1
    xf = x.astype(np.float64)
    return {
        "min": np.min(x, axis=0, keepdims=keep),
        "max": np.max(x, axis=0, keepdims=keep),
        "mean": np.mean(xf, axis=0, keepdims=keep),
        "std": np.std(xf, axis=0, keepdims=keep),
        "count": np.array([len(x)]),
    }


class ImageStats:
    """Per-channel running min/max/mean/std of (H, W, 3) uint8 frames -> lerobot's (3, 1, 1) in [0, 1].

    Kept as a per-channel histogram of the 256 values: one ``bincount`` per channel and frame
    (~20x faster than float64 sums of the pixels). Sums of integers are exact in float64 in any
    order, so the result is the same, bit for bit, as summing the pixels as floats.
    """

    def __init__(self):
        self.n = 0
        self.hist = np.zeros((3, 256), dtype=np.int64)

    def add(self, frame: np.ndarray) -> None:
        """Add one (H, W, 3) uint8 frame, downsampled as LeRobot does when a side is 300 px or more."""
        if frame.dtype != np.uint8:
            raise ValueError(f"expected a uint8 frame, got {frame.dtype}")
        h, w = frame.shape[:2]
        if max(h, w) >= 300:  # lerobot's auto_downsample_height_width
            step = int((w if w > h else h) / 150)
            frame = frame[::step, ::step]
        channels = frame.reshape(-1, 3).T
        for c in range(3):
            self.hist[c] += np.bincount(channels[c], minlength=256)
        self.n += 1

    @property
    def pixels(self) -> int:
        return int(self.hist[0].sum())

    def result(self) -> dict[str, np.ndarray]:
        """``min``, ``max``, ``mean``, ``std`` as (3, 1, 1) in [0, 1], and ``count`` (frames)."""
        values = np.arange(256, dtype=np.float64)
        counts = self.hist.astype(np.float64)
        seen = self.hist > 0
        lo = np.where(seen.any(1), seen.argmax(1), 255).astype(np.float64)
        hi = np.where(seen.any(1), 255 - seen[:, ::-1].argmax(1), 0).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = counts @ values / self.pixels
            std = np.sqrt(np.maximum(counts @ (values * values) / self.pixels - mean**2, 0.0))
        c = lambda v: (v / 255.0).reshape(3, 1, 1)  # noqa: E731
        return {"min": c(lo), "max": c(hi), "mean": c(mean), "std": c(std), "count": np.array([self.n])}


def aggregate(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """lerobot's ``aggregate_feature_stats`` for two stat sets (count-weighted mean, pooled variance)."""
    na, nb = float(a["count"][0]), float(b["count"][0])
    n = na + nb
    mean = (a["mean"] * na + b["mean"] * nb) / n
    var = ((a["std"] ** 2 + (a["mean"] - mean) ** 2) * na + (b["std"] ** 2 + (b["mean"] - mean) ** 2) * nb) / n
    return {
        "min": np.minimum(a["min"], b["min"]),
        "max": np.maximum(a["max"], b["max"]),
        "mean": mean,
        "std": np.sqrt(var),
        "count": np.array([int(n)]),
    }


def to_json(stats: dict) -> dict:
    """feature -> stat -> array, as nested lists (stats.json, the episodes table's stats columns)."""
    return {k: {s: np.asarray(v).tolist() for s, v in d.items()} for k, d in stats.items()}


def from_json(obj: dict) -> dict:
    """Stats JSON ``{feature: {statistic: list}}`` to the same dict of numpy arrays."""
    return {k: {s: np.asarray(v) for s, v in d.items()} for k, d in obj.items()}
