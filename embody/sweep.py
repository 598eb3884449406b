"""``embody sweep TASK --set-grid key=v1,v2 ... --seeds N``: a grid of training runs on Ray Tune, resumable.

Every grid point × seed is one Tune trial that trains an ordinary run directory, ``OUT/runs/<point>-seed<s>``
(``embody eval``/``video``/``sim2sim`` accept it), and reports its evaluation and a thinned learning curve. At the
end ``OUT/sweep.md`` (a table: mean ± std over seeds per grid point), ``OUT/sweep.json`` and ``OUT/sweep.png`` (the
learning curves, one colour per point) are written from the reports, so they need no shared filesystem. Tune keeps
its experiment state in ``OUT/tune``: rerunning the same command after an interruption (the driver killed, the
machine rebooted) keeps the finished trials and reruns the others, each resuming its run from its last checkpoint
when one is there. ``OUT/spec.json`` pins the sweep; a rerun with other settings is refused, naming them.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from embody.config import ConfigError, parse_override
from embody.files import write_atomic
from embody.jobs import differences

METRICS = ("return_mean", "success_rate", "survival_rate", "lin_vel_error", "yaw_rate_error")  # if a task reports them


@dataclass
class SweepSpec:
    """What a sweep is: the task, the grid (key -> values), the seeds and the settings every trial shares."""

    task: str
    grid: dict[str, list]
    seeds: list[int]
    sets: list[str] = field(default_factory=list)  # --set key=value for every trial
    flags: dict[str, Any] = field(default_factory=dict)  # train's flags: steps, n_envs, sim
    cpus_per_trial: float = 1.0

    @property
    def trials(self) -> int:
        return len(self.points()) * len(self.seeds)

    def points(self) -> list[dict]:
        """Every combination of the grid's values, in the order given: [{key: value, ...}, ...]."""
        points = [{}]
        for key, values in self.grid.items():
            points = [{**p, key: v} for p in points for v in values]
        return points


def parse_grid(texts: list[str]) -> dict[str, list]:
    """``["ppo.lr=1e-3,3e-4", "env.x=[1,2],[3,4]"]`` → {"ppo.lr": [0.001, 0.0003], "env.x": [[1, 2], [3, 4]]}: values
    split on commas outside brackets, each read as YAML like ``--set``."""
    grid: dict[str, list] = {}
    for text in texts:
        key, sep, raw = text.partition("=")
        if not sep or not key or not raw:
            raise ConfigError(f"--set-grid {text!r} is not of the form key=value1,value2")
        grid[key.strip()] = [parse_override(f"{key}={v}")[1] for v in _split(raw)]
    if not grid:
        raise ConfigError("a sweep needs at least one --set-grid key=value1,value2")
    return grid


def _split(raw: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(raw):
        depth += (ch in "[{") - (ch in "]}")
        if ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, raw[start:]]]


def point_name(point: dict) -> str:
    """A filesystem-safe name for a grid point: "ppo.lr=0.001-n_envs=64"."""
    return "-".join(re.sub(r"[^A-Za-z0-9._=+-]+", "_", f"{k}={v}") for k, v in point.items())


def check_spec(out: Path, spec: SweepSpec) -> None:
    """Write ``OUT/spec.json``, or refuse when it holds another sweep (naming what differs)."""
    path = out / "spec.json"
    mine = json.loads(json.dumps(asdict(spec)))
    if path.exists():
        if keys := differences(json.loads(path.read_text()), mine):
            raise ConfigError(
                f"{out} holds another sweep ({', '.join(keys)} differ); use another --out or the same settings"
            )
        return
    write_atomic(path, json.dumps(mine, indent=1))


def trial(config: dict) -> None:
    """One Tune trial: train ``config["point"]`` with ``config["seed"]`` into its run directory (resuming it when a
    checkpoint is there) and report the evaluation and a thinned learning curve."""
    from ray import tune

    from embody.runs import load_run
    from embody.train import resolve_config, train

    spec, point, seed = SweepSpec(**config["spec"]), config["point"], config["seed"]
    run = Path(config["out"]) / "runs" / f"{point_name(point)}-seed{seed}"
    resume = (run / "checkpoint").is_dir()
    if resume:
        cfg, _ = load_run(run)
    else:
        cfg = resolve_config(spec.task, overrides=_overrides(spec, point), seed=seed, **spec.flags)
        cfg.video = False
    summary = train(cfg, run, resume=resume)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    step = max(1, len(rows) // 50)
    curve = [[r["env_steps"], r["episode_return"]] for r in rows[::step]]
    tune.report({**{k: summary[k] for k in METRICS if k in summary}, "curve": json.dumps(curve), "run": str(run)})


def _overrides(spec: SweepSpec, point: dict) -> list[str]:
    return [*spec.sets, *(f"{k}={json.dumps(v)}" for k, v in point.items())]


def run_sweep(spec: SweepSpec, out: Path, address: str | None = None) -> list[dict]:
    """Run (or resume) the sweep into ``out``; one row per trial: point, seed, metrics, curve, run. Writes the table,
    JSON and plot."""
    from embody.extras import require
    from embody.scale import connect
    from embody.train import resolve_config

    for point in spec.points():  # a bad key or value fails here, before Ray starts
        resolve_config(spec.task, overrides=_overrides(spec, point), **spec.flags)
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    check_spec(out, spec)
    connect(address, 1, spec.cpus_per_trial)
    tune = require("ray.tune", "scale")
    trainable = tune.with_resources(trial, {"cpu": spec.cpus_per_trial})
    state = out / "tune"
    if tune.Tuner.can_restore(str(state)):
        done = sum((run / "eval.json").exists() for run in (out / "runs").glob("*"))
        print(f"resuming the sweep in {out}: {done} of {spec.trials} runs evaluated", file=sys.stderr)
        tuner = tune.Tuner.restore(str(state), trainable, resume_errored=True)
    else:
        space = {
            "spec": asdict(spec),
            "out": str(out),
            "point": tune.grid_search(spec.points()),
            "seed": tune.grid_search(spec.seeds),
        }
        run_config = tune.RunConfig(name="tune", storage_path=str(out), verbose=0, callbacks=[_progress(spec)])
        tuner = tune.Tuner(trainable, param_space=space, run_config=run_config)
    grid = tuner.fit()
    if errors := [r.error for r in grid if r.error is not None]:
        raise RuntimeError(f"{len(errors)} sweep trial(s) failed; the first: {errors[0]}")
    rows = [_row(r) for r in grid]
    write_report(out, spec, rows)
    return rows


def _row(result) -> dict:
    m = result.metrics
    return {
        "point": result.config["point"],
        "seed": result.config["seed"],
        "metrics": {k: m[k] for k in METRICS if k in m},
        "curve": json.loads(m["curve"]),
        "run": m["run"],
    }


def _progress(spec: SweepSpec):
    """A Tune callback: a progress bar over finished trials (Tune's own status tables are off)."""
    from ray import tune

    from embody.progress import Progress

    bar = Progress(spec.trials, f"sweep {spec.task}", unit="trials")

    class OnTrialComplete(tune.Callback):
        done = 0

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.done += 1
            bar.update(self.done, last=point_name(trial.config["point"]))
            if self.done == spec.trials:
                bar.close()

    return OnTrialComplete()


def summarize(rows: list[dict]) -> list[dict]:
    """Per grid point (in the order first seen): mean and std over seeds of every reported metric, and n."""
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(point_name(r["point"]), []).append(r)
    table = []
    for name, group in by_point.items():
        stats = {"point": name, "n": len(group)}
        for key in METRICS:
            values = [g["metrics"][key] for g in group if key in g["metrics"]]
            if values:
                mean = sum(values) / len(values)
                std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
                stats[key] = (mean, std)
        table.append(stats)
    return table


def write_report(out: Path, spec: SweepSpec, rows: list[dict]) -> None:
    """``sweep.json`` (every trial), ``sweep.md`` (the table) and ``sweep.png`` (learning curves per point)."""
    table = summarize(rows)
    keys = [k for k in METRICS if any(k in t for t in table)]
    lines = [
        f"# Sweep of {spec.task}: {len(rows)} runs (seeds {', '.join(map(str, spec.seeds))})",
        "",
        "| point | seeds | " + " | ".join(keys) + " |",
        "|---|---|" + "---|" * len(keys),
    ]
    for t in table:
        cells = [f"{t[k][0]:.3g} ± {t[k][1]:.2g}" if k in t else "—" for k in keys]
        lines.append(f"| {t['point']} | {t['n']} | " + " | ".join(cells) + " |")
    write_atomic(out / "sweep.md", "\n".join(lines) + "\n")
    write_atomic(out / "sweep.json", json.dumps({"spec": asdict(spec), "table": table, "trials": rows}, indent=1))
    _plot(out / "sweep.png", spec, rows)


def _plot(path: Path, spec: SweepSpec, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colours = {}
    for r in rows:
        name = point_name(r["point"])
        colour = colours.setdefault(name, f"C{len(colours) % 10}")
        steps, returns = zip(*r["curve"]) if r["curve"] else ((), ())
        ax.plot(steps, returns, color=colour, alpha=0.8, label=name if r["seed"] == spec.seeds[0] else None)
    ax.set(xlabel="env steps", ylabel="episode return (training)", title=f"sweep of {spec.task}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
