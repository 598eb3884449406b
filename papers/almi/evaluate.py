"""``embody almi eval``: whole-body runs on held-out motions while walking, per method, with bootstrap intervals.

Each run (an ``almi`` whole-body run: ALMI's composite, the single whole-body policy, or a baseline composed the
same way) plays clips that no stage trained on — the procedural families outside TRAIN_FAMILIES, or a user's
clip folder — at full amplitude, under velocity commands drawn from the task's ranges, pushes and randomization
as in training. Per episode: survival, velocity-tracking errors (each step's and of the gait-period mean, which the
report shows: the sway within a step is not a tracking error), the upper body's joint tracking error, motor
power and the intensity of the clips it played. Runs are grouped into methods by their parent folder's name
(``STUDY/METHOD/seedN``); each method's numbers are the mean over its seeds with a 95 % bootstrap interval over
seeds. Writes ``results.json``, ``report.md`` and ``survival_vs_intensity.png``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from embody.config import ConfigError, apply_overrides
from embody.files import write_study
from embody.policies.evaluate import evaluate
from embody.robots.motion import FAMILIES
from embody.runs import build_env, load_run, load_run_checkpoint
from embody.stats import bootstrap_ci

from .tasks import TRAIN_FAMILIES

HELD_OUT = tuple(f for f in FAMILIES if f not in TRAIN_FAMILIES)
COLUMNS = {  # metric: (report heading, format); velocity errors of the gait-period mean (the step's sway aside)
    "survival": ("survival", ".0%"),
    "lin_vel_error_gait": ("lin vel err (m/s)", ".3f"),
    "yaw_rate_error_gait": ("yaw rate err (rad/s)", ".3f"),
    "upper_tracking_error": ("upper joint err (rad)", ".3f"),
    "power": ("power (W)", ".0f"),
}


def load_whole_body_run(run: Path):
    """``run``'s TrainConfig, refused unless it trained the whole-body ``almi`` task."""
    cfg, _ = load_run(run)
    if cfg.task != "almi":
        raise ConfigError(f"{run}: an almi (whole-body) run is needed, this one trained {cfg.task}")
    return cfg


def evaluate_almi_run(run: Path, episodes: int, clips: Path | None = None, sim: str | None = None, seed: int = 1234):
    """Per-episode outcomes of one run on the held-out motions: {metric: [value per episode]}."""
    cfg = load_whole_body_run(run)
    motion = [f"env.motion.library={clips}"] if clips else [f"env.motion.families={json.dumps(list(HELD_OUT))}"]
    apply_overrides(cfg, texts=motion)
    env = build_env(cfg, n_envs=min(episodes, 16), sim=sim, seed=seed, evaluation=True)
    result = evaluate(env, load_run_checkpoint(run, expect=env).policy, episodes)
    env.close()
    out = {"survival": [float(not t) for t in result.terminated]}
    velocity = [f"{k}{gait}" for k in ("lin_vel_error", "yaw_rate_error") for gait in ("", "_gait")]
    out.update({k: result.metrics[k] for k in (*velocity, "upper_tracking_error", "power")})
    out["clip_intensity"] = result.metrics["clip_intensity"]
    return out


def evaluate_methods(runs: list[Path], episodes: int, clips: Path | None = None, sim: str | None = None) -> dict:
    """``summarize`` of ``runs``, each evaluated on the held-out motions."""
    return summarize({"run": str(run), **evaluate_almi_run(Path(run), episodes, clips, sim)} for run in runs)


def summarize(evaluated: Iterable[dict]) -> dict:
    """{method: {"runs": [...], "per_run": [...], metric: [mean, ci_low, ci_high]}} over runs' outcomes (each
    ``evaluate_almi_run``'s with its "run" path), grouped into methods by the run's parent folder."""
    methods: dict[str, dict] = {}
    for r in evaluated:
        m = methods.setdefault(Path(r["run"]).resolve().parent.name, {"runs": [], "per_run": []})
        m["runs"].append(r["run"])
        m["per_run"].append(r)
    for m in methods.values():
        for metric in COLUMNS:
            seed_means = [float(np.mean(r[metric])) for r in m["per_run"]]
            m[metric] = [float(np.mean(seed_means)), *bootstrap_ci(seed_means)]
        m["env_steps"] = [r.get("env_steps") for r in m["per_run"]]  # a study's runs; absent from older job files
    return methods


def write_report(methods: dict, out: Path, command: str) -> None:
    """results.json, report.md (a table, the exact command) and survival_vs_intensity.png into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    head = "| method | seeds | " + " | ".join(h for h, _ in COLUMNS.values()) + " | env steps (M) per seed |"
    lines = [head, "|---" * (len(COLUMNS) + 3) + "|"]
    for name, m in methods.items():
        cells = [f"{m[k][0]:{f}} [{m[k][1]:{f}}, {m[k][2]:{f}}]" for k, (_, f) in COLUMNS.items()]
        steps = ", ".join("?" if s is None else f"{s / 1e6:.1f}" for s in m["env_steps"])
        lines.append(f"| {name} | {len(m['runs'])} | " + " | ".join(cells) + f" | {steps} |")
    note = (
        "Mean over seeds [95 % bootstrap interval over seeds]; held-out motions at full amplitude while walking. "
        "Env steps: all the method's training (stages included) per seed; ? where the job file predates the count."
    )
    write_study(out, {"command": command, "methods": methods}, "\n".join([*lines, "", note, "", f"    {command}", ""]))
    _plot(methods, out / "survival_vs_intensity.png")


def _plot(methods: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, m in methods.items():
        x = np.concatenate([r["clip_intensity"] for r in m["per_run"]])
        y = np.concatenate([r["survival"] for r in m["per_run"]])
        edges = np.quantile(x, np.linspace(0, 1, min(6, len(x)) + 1))
        bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        keep = [b for b in range(len(edges) - 1) if (bins == b).any()]
        ax.plot([x[bins == b].mean() for b in keep], [y[bins == b].mean() for b in keep], "o-", label=name)
    ax.set_xlabel("clip intensity (mean upper-joint speed, rad/s)")
    ax.set_ylabel("survival")
    ax.set_ylim(-0.05, 1.05)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
