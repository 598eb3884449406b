"""The D.VA study's results.json, report.md and plots (return vs wall-clock and vs env steps; actor gradient norms)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from embody.files import write_study
from embody.stats import add_means, ci_cell

METRICS = ("return", "env_steps", "steps_per_s", "grad_norm_mean", "grad_norm_std", "peak_rss_mb", "train_s")


def summarize(rows: list[dict]) -> list[dict]:
    """Per (task, arm): each metric's mean and 95 % interval over seeds, the skipped updates summed."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["task"], r["arm"])].append(r)
    out = []
    for (task, arm), members in sorted(groups.items()):
        e = add_means({"task": task, "arm": arm, "n": len(members)}, members, METRICS)
        e["skipped_updates"] = sum(r["skipped_updates"] or 0 for r in members)
        out.append(e)
    return out


def claims(table: list[dict]) -> list[str]:
    """The paper's three claims, as measured: D.VA against its baselines' final return, D.VA's gradient norm with
    the detach against without (the raster pair), and against SHAC from state."""
    lines = []
    by = {(e["task"], e["arm"]): e for e in table}
    for task in sorted({e["task"] for e in table}):
        dva = by.get((task, "dva"))
        if dva is None or "return" not in dva:
            continue
        others = {arm: e["return"] for (t, arm), e in by.items() if t == task and arm != "dva" and "return" in e}
        beaten = [a for a, r in others.items() if dva["return"] > r]
        lines.append(
            f"{task}: D.VA's final return {dva['return']:.1f} at equal wall-clock; higher than "
            f"{', '.join(beaten) or 'no other arm'}"
            + (f"; lower than {', '.join(a for a in others if a not in beaten)}" if len(beaten) < len(others) else "")
        )
        detached, through = by.get((task, "dva-raster")), by.get((task, "dva-raster-through"))
        if detached and through and "grad_norm_mean" in detached and "grad_norm_mean" in through:
            lines.append(
                f"{task}, rasterized images: actor gradient norm {detached['grad_norm_mean']:.3g} "
                f"(sd {detached['grad_norm_std']:.3g}) with the detach, {through['grad_norm_mean']:.3g} "
                f"(sd {through['grad_norm_std']:.3g}) through the rendering; return {detached['return']:.1f} vs "
                f"{through['return']:.1f}"
            )
    return lines


def markdown(r: dict) -> str:
    cfg = r["config"]
    lines = [
        "# D.VA study",
        "",
        f"`{r['command']}` — simulator {cfg['sim']}; tasks {', '.join(cfg['tasks'])}; seeds {cfg['seeds']}; "
        f"{cfg['budget_s']:.0f} s of training per run (wall-clock, 2 cores shared by the simulator and torch); "
        f"{cfg['pixels']}² images, {cfg['frames']} frames; {cfg['envs']} envs (SAC {cfg['sac_envs']}). Means with "
        "95 % bootstrap intervals over seeds. `return`: deterministic evaluation of the final policy "
        f"({cfg['eval_episodes']} episodes). `grad norm`: the actor's gradient norm before clipping, mean and "
        "standard deviation over a run's updates (SHAC arms). `dagger` starts its clock at its expert's "
        "(`shac-state`'s) training time. Peak memory: the run's process.",
        "",
        "| task | arm | return | env steps | steps/s | grad norm | grad norm sd | skipped | peak MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in r["table"]:
        lines.append(
            f"| {e['task']} | {e['arm']} | {ci_cell(e, 'return', '.1f')} | {e.get('env_steps', 0):,.0f} | "
            f"{e.get('steps_per_s', 0):,.0f} | {ci_cell(e, 'grad_norm_mean', '.3g')} | "
            f"{ci_cell(e, 'grad_norm_std', '.3g')} | {e['skipped_updates']} | {e.get('peak_rss_mb', 0):,.0f} |"
        )
    lines += ["", "## The paper's claims, as measured", "", *(f"- {c}" for c in r["claims"]), ""]
    lines += ["![return vs wall-clock and env steps](return_curves.png)", ""]
    return "\n".join(lines)


def _mean_curve(curves: list[list[dict]], key: str, grid: np.ndarray) -> np.ndarray:
    """Each seed's episode return interpolated onto ``grid`` of ``key`` (nan outside its range), averaged."""
    ys = []
    for c in curves:
        pts = [(p[key], p["episode_return"]) for p in c if p.get("episode_return") is not None]
        pts = [(x, y) for x, y in pts if np.isfinite(y)]
        if len(pts) < 2:
            continue
        x, y = np.array(pts).T
        ys.append(np.where((grid >= x[0]) & (grid <= x[-1]), np.interp(grid, x, y), np.nan))
    return np.nanmean(ys, axis=0) if ys else np.full_like(grid, np.nan)


def plot(rows: list[dict], path: Path) -> None:
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in rows})
    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 3.6 * len(tasks)), squeeze=False)
    for row_axes, task in zip(axes, tasks):
        for ax, key, label in zip(row_axes, ("time_s", "env_steps"), ("wall-clock (s)", "env steps")):
            for arm in sorted({r["arm"] for r in rows if r["task"] == task}):
                curves = [r["curve"] for r in rows if r["task"] == task and r["arm"] == arm]
                top = max((p[key] for c in curves for p in c if p.get(key) is not None), default=0)
                grid = np.linspace(0, top, 100)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # a grid point no seed reaches
                    ax.plot(grid, _mean_curve(curves, key, grid), label=arm)
            ax.set(title=task, xlabel=label, ylabel="training episode return")
        row_axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(rows: list[dict], config: dict, out: Path, command: str, log=print) -> dict:
    """results.json, report.md and return_curves.png in ``out``; returns the results."""
    table = summarize(rows)
    result = {"command": command, "config": config, "rows": rows, "table": table, "claims": claims(table)}
    out.mkdir(parents=True, exist_ok=True)
    write_study(out, result, markdown(result))
    plot(rows, out / "return_curves.png")
    log(f"dva study: {out / 'report.md'}")
    return result
