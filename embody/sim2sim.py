"""``embody sim2sim RUN``: evaluate one policy on several simulators and compare.

The gate before any hardware run: the same task code, the same checkpoint, each installed
simulator; returns and task metrics side by side, relative to the simulator the policy was
trained on. Writes RUN/sim2sim/{report.json, report.md, returns.png}.
"""

from __future__ import annotations

import json
from pathlib import Path

from embody.files import write_atomic
from embody.runs import evaluate_run, load_run
from embody.sims.base import UnsupportedTask


def compare(run: Path, sims: list[str], episodes: int = 10, overrides: list[str] = ()) -> list[dict]:
    """One row per simulator; a simulator that cannot serve the task gets a row saying why."""
    cfg, _ = load_run(run)
    rows = []
    for sim in sims:
        try:
            rows.append(evaluate_run(run, episodes=episodes, sim=sim, overrides=overrides))
        except UnsupportedTask as e:
            rows.append({"task": cfg.task, "sim": sim, "unsupported": str(e)})
    done = [r for r in rows if "unsupported" not in r]
    base = next((r for r in done if r["sim"] == cfg.sim), done[0] if done else None)
    for r in rows:
        r["trained_on"] = cfg.sim
        if base is not None and "unsupported" not in r:
            r["return_vs_trained_sim"] = r["return_mean"] / base["return_mean"] if base["return_mean"] else None
    return rows


def write_report(rows: list[dict], out: Path) -> None:
    """Write ``report.json`` (the rows), ``report.md`` (a table) and, when any simulator ran, ``returns.png``
    into ``out`` (created if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "report.json", json.dumps(rows, indent=2))
    lines = [
        "| sim | episodes | return (mean ± std) | of max | vs. trained sim | length | terminated | success "
        "| survival | lin vel err | yaw rate err | supervisor fault |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    opt = lambda r, k, f: format(r[k], f) if k in r else "—"  # noqa: E731
    for r in rows:
        if "unsupported" in r:
            lines.append(f"| {r['sim']} | unsupported: {r['unsupported']} |||||||||||")
            continue
        frac = f"{r['return_fraction_of_max']:.1%}" if "return_fraction_of_max" in r else "—"
        rel = f"{r['return_vs_trained_sim']:.2f}×" if r["return_vs_trained_sim"] is not None else "—"
        lines.append(
            f"| {r['sim']}{' (trained)' if r['sim'] == r['trained_on'] else ''} | {r['episodes']} | "
            f"{r['return_mean']:.1f} ± {r['return_std']:.1f} | {frac} | {rel} | "
            f"{r['length_mean']:.0f} | {r['terminated_fraction']:.0%} | "
            f"{opt(r, 'success_rate', '.0%')} | {opt(r, 'survival_rate', '.0%')} | "
            f"{opt(r, 'lin_vel_error', '.3f')} | {opt(r, 'yaw_rate_error', '.3f')} | "
            f"{opt(r, 'supervisor_fault', '.0%')} |"
        )
    write_atomic(out / "report.md", "\n".join(lines) + "\n")
    if any("unsupported" not in r for r in rows):
        _plot(rows, out / "returns.png")


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if "unsupported" not in r]
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 3))
    ax.bar(
        [r["sim"] for r in rows],
        [r["return_mean"] for r in rows],
        yerr=[r["return_std"] for r in rows],
        color=["tab:blue" if r["sim"] == r["trained_on"] else "tab:gray" for r in rows],
        capsize=4,
    )
    if rows and rows[0].get("max_return"):
        ax.axhline(rows[0]["max_return"], color="k", ls="--", lw=1, label="max return")
        ax.legend()
    ax.set_ylabel("evaluation return")
    ax.set_title(f"{rows[0]['task']}: sim-to-sim")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
