"""A dependency-free progress line for long commands: done/total, rate, ETA and live metrics."""

from __future__ import annotations

import sys
import time


class Progress:
    """``update(done, **metrics)`` redraws one line on a TTY and prints every ``every`` s otherwise."""

    def __init__(
        self,
        total: float,
        label: str = "",
        unit: str = "steps",
        stream=None,
        every: float = 10.0,
        max_time_s: float = 0.0,
    ):
        self.total, self.label, self.unit = total, label, unit
        self.max_time_s = max_time_s  # a wall-clock budget that may end the work first (0: none)
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = 0.2 if self.tty else every
        self.start = time.perf_counter()
        self._last = -1e9
        self.done = 0.0
        self.first: float | None = None  # the first update's count: a resumed run's rate excludes earlier work

    def line(self, **metrics) -> str:
        """The progress line: bar, fraction, done/total, rate, elapsed < ETA, then ``metrics``."""
        elapsed = time.perf_counter() - self.start
        rate = (self.done - (self.first or 0.0)) / elapsed if elapsed > 0 else 0.0
        eta = max(self.total - self.done, 0.0) / rate if rate > 0 else float("inf")  # vector steps overshoot
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        if self.max_time_s and self.max_time_s - elapsed < eta:  # the time budget ends it first
            eta, frac = max(self.max_time_s - elapsed, 0.0), min(elapsed / self.max_time_s, 1.0)
        bar = "#" * int(20 * frac) + "-" * (20 - int(20 * frac))
        extra = " ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
        return (
            f"{self.label} [{bar}] {frac:5.1%} {self.done:,.0f}/{self.total:,.0f} {self.unit} "
            f"| {rate:,.0f} {self.unit}/s | {_fmt(elapsed)} < {_fmt(eta)} | {extra}"
        )

    def update(self, done: float, force: bool = False, **metrics) -> None:
        """Record ``done`` and redraw, at most every ``every`` s unless ``force``; ``metrics`` are shown
        as ``key value``."""
        self.done = done
        if self.first is None:
            self.first = done
        now = time.perf_counter()
        if force or now - self._last >= self.every:
            self._last = now
            end = "\r" if self.tty else "\n"
            self.stream.write(self.line(**metrics) + end)
            self.stream.flush()

    def close(self, **metrics) -> None:
        """Draw the final line with ``metrics`` (and end it on a TTY)."""
        self.update(self.done, force=True, **metrics)
        if self.tty:
            self.stream.write("\n")


def _fmt(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
