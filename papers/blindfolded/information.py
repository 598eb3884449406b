"""Task information available to a demonstrator, in bits: I = H(task) - H(task | expert's knowledge).

Uniform priors only. Discrete: a task is one of ``n`` equally likely values and the expert's
knowledge leaves ``k`` of them possible, so I = log2 n - log2 k; when k varies from task to task
(a window clipped at the maze's border, say), I is the average over tasks. Continuous: a task
parameter uniform over a box, the expert knowing the sub-box it lies in: I = log2(vol box / vol sub-box).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def discrete_information(n_tasks: int, n_consistent: int | Iterable[int]) -> float:
    """Bits the expert knows about a task drawn uniformly from ``n_tasks`` values when its knowledge
    leaves ``n_consistent`` of them possible (one count, or one per task to average over)."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
    counts = [n_consistent] if isinstance(n_consistent, int) else list(n_consistent)
    if not counts:
        raise ValueError("no consistent-set sizes given")
    for k in counts:
        if not 1 <= k <= n_tasks:
            raise ValueError(f"a consistent set must hold 1..{n_tasks} tasks (the true one at least), got {k}")
    return math.log2(n_tasks) - sum(math.log2(k) for k in counts) / len(counts)


def average_discrete_information(pairs: Iterable[tuple[int, int]]) -> float:
    """The mean of ``discrete_information(n, k)`` over (n_tasks, n_consistent) pairs, one per task
    (for task families whose prior support varies, as the free cells of different mazes do)."""
    values = [discrete_information(n, k) for n, k in pairs]
    if not values:
        raise ValueError("no tasks given")
    return sum(values) / len(values)


def box_information(box: Sequence[float], known: Sequence[float]) -> float:
    """Bits known about a parameter uniform over a box with side lengths ``box`` when the expert knows
    the sub-box with side lengths ``known`` (same dimensions) that contains it: log2 of the volume ratio.
    A side of ``known`` equal to its ``box`` side means that coordinate is unknown (0 bits)."""
    if len(box) != len(known) or not box:
        raise ValueError(
            f"box and known sub-box need the same (non-zero) number of sides, got {len(box)} and {len(known)}"
        )
    bits = 0.0
    for b, k in zip(box, known):
        if not (b > 0 and 0 < k <= b):
            raise ValueError(f"sides must satisfy 0 < known <= box, got known {k} for box {b}")
        bits += math.log2(b / k)
    return bits
