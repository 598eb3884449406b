"""Speed and quality benchmarks against peers, run with ``embody bench [NAME]``.

Each benchmark is a module here with ``main(argv) -> int`` that measures embody and its peer
in the same run and prints their ratio; plugins add theirs (``PluginAPI.benchmark``).
"""

from __future__ import annotations

import importlib

BENCHMARKS = {
    "core": "embody.benchmarks.core",
    "datasets": "embody.benchmarks.datasets",
    "diff": "embody.benchmarks.diff",
    "driving": "embody.benchmarks.driving",
    "hardware": "embody.benchmarks.hardware",
    "gpu": "embody.benchmarks.gpu",
    "her": "embody.benchmarks.her",
    "learning": "embody.benchmarks.learning",
    "offline": "embody.benchmarks.offline",
    "planning": "embody.benchmarks.planning",
    "sac": "embody.benchmarks.sac",
    "scale": "embody.benchmarks.scale",
    "sims": "embody.benchmarks.sims",
    "tasks": "embody.benchmarks.tasks",
}


def best_seconds(fn, n: int, repeats: int = 3) -> float:
    """The fastest of ``repeats`` timings of ``n`` calls of ``fn`` [s per call]: the least disturbed run."""
    import time

    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / n


def save_results(out: str | None, result) -> None:
    """``OUT/results.json`` when ``--out`` was given (atomically: an interrupted run keeps the previous one)."""
    if out:
        import json
        from pathlib import Path

        from embody.files import write_atomic

        Path(out).mkdir(parents=True, exist_ok=True)
        write_atomic(Path(out, "results.json"), json.dumps(result, indent=2))


def run_benchmark(name: str | None, argv: list[str]) -> int:
    """Run benchmark ``name``'s ``main(argv)`` and return its exit code; None lists the benchmarks.
    Raises ``UnknownName`` for a name not in ``BENCHMARKS``."""
    from embody import plugins

    plugins.load()  # plugins add benchmarks too (PluginAPI.benchmark)
    if name is None:
        print("benchmarks:", ", ".join(sorted(BENCHMARKS)), "(run: embody bench NAME [--help])")
        return 0
    if name not in BENCHMARKS:
        from embody.registry import UnknownName

        raise UnknownName(f"unknown benchmark {name!r}; valid: {', '.join(sorted(BENCHMARKS))}")
    return importlib.import_module(BENCHMARKS[name]).main(argv)
