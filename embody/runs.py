"""Run directories: the one owner of their layout, for every trainer (``embody train``, ``embody
distill``, a method's students). Written and read only through this module.

    RUN/config.yaml          the TrainConfig that rebuilds the run's env (``build_env``)
    RUN/<name>.yaml          a trainer's own settings, e.g. distill.yaml (``start_run(out, cfg, distill=...)``)
    RUN/metrics.jsonl        one JSON object per iteration (metrics.csv: the same as CSV)
    RUN/learning_curve.png   episode return vs. env steps and wall-clock time
    RUN/checkpoint/          the policy (safetensors + JSON, see embody.policies.checkpoint)
    RUN/eval.json            deterministic evaluation of the final policy
    RUN/eval.mp4             one evaluation episode

Writing: ``start_run`` (config files), ``save_run_checkpoint`` (the policy, again as it trains),
``write_eval``; ``write_policy_run`` does config + checkpoint at once for a policy trained elsewhere.
Reading: ``load_run`` (config, checkpoint folder), ``load_run_checkpoint`` (the policy, verified
against an env or task), ``evaluate_run``, ``record_video``.
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import yaml

from embody.config import ConfigError, apply_overrides, from_dict, load_yaml, to_dict
from embody.files import write_atomic
from embody.policies.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from embody.policies.evaluate import evaluate
from embody.policies.networks import INITS, PRECISIONS
from embody.sims.gymnasium_env import PREFIX
from embody.sims.task import Task
from embody.sims.tasks import TASKS
from embody.sims.vec_env import VecEnv, make_env
from embody.video import VIDEO_SIZE, VideoWriter, draw_overlay, overlay_lines

if TYPE_CHECKING:  # embody.train imports this module: TrainConfig is read lazily in load_run
    from embody.train import TrainConfig

CONFIG, CHECKPOINT, EVAL = "config.yaml", "checkpoint", "eval.json"


# -- the env and spec a run's config describes --------------------------------------------------
def build_env(
    cfg: TrainConfig,
    n_envs: int | None = None,
    sim: str | None = None,
    seed: int | None = None,
    evaluation: bool = False,
) -> VecEnv:
    """The run's env; ``evaluation``: without staggered resets, so every episode may run its full length, and with
    the task's curricula at their final level. A ``gym:ID`` task is a Gymnasium environment (``cfg.env``: its
    ``gym.make`` keyword arguments). ``cfg.pixels``: frame-stacked images of ``cfg.pixel_source`` as the observation."""
    if cfg.pixels and cfg.pixel_precision not in PRECISIONS:  # refused before any run folder is made
        raise ConfigError(f"pixel_precision: {cfg.pixel_precision!r} is not one of {', '.join(PRECISIONS)}")
    if cfg.sac.init not in INITS:
        raise ConfigError(f"sac.init: {cfg.sac.init!r} is not one of {', '.join(INITS)}")
    env = _build_env(cfg, n_envs, sim, seed, evaluation)
    if cfg.pixels:
        from embody.sims.pixels import make_pixel_env

        return make_pixel_env(env, cfg.pixel_source, cfg.pixels, cfg.frames)
    return env


def _build_env(cfg, n_envs, sim, seed, evaluation):
    if cfg.task.startswith(PREFIX):
        from embody.sims.gymnasium_env import GymnasiumEnv

        env = GymnasiumEnv(
            cfg.task.removeprefix(PREFIX), n_envs or cfg.n_envs, cfg.seed if seed is None else seed, cfg.env
        )
        env.task.training = not evaluation
        return env
    task_cls = TASKS.get(cfg.task)
    task_cfg = from_dict(task_cls.config_class, cfg.env, "env")
    env = make_env(
        cfg.task,
        sim or cfg.sim,
        n_envs or cfg.n_envs,
        cfg.seed if seed is None else seed,
        staggered=cfg.staggered_resets and not evaluation,
        config=task_cfg,
    )
    env.task.training = not evaluation
    return env


def policy_spec(env: VecEnv | Task) -> dict:
    """What a checkpoint must match to be used on ``env`` (or on a bare task, as the deploy loop has)."""
    task = env if isinstance(env, Task) else env.task
    return {
        "task": task.name,
        "robot": task.robot.name if task.robot else None,
        "joints": list(task.robot.joint_names) if task.robot else [],
        "obs_size": task.observation_size,
        "privileged_size": task.privileged_size,
        "action_size": task.action_size,
    }


# -- writing ------------------------------------------------------------------------------------
def start_run(out: str | Path, cfg: TrainConfig, **configs: Any) -> Path:
    """Create run directory ``out`` with RUN/config.yaml and RUN/<name>.yaml for each of ``configs``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, obj in {"config": cfg, **configs}.items():
        write_atomic(out / f"{name}.yaml", yaml.safe_dump(to_dict(obj), sort_keys=False))
    return out


def save_run_checkpoint(
    run: str | Path,
    policy: torch.nn.Module,
    spec: dict,
    meta: dict | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    folder: str = CHECKPOINT,
) -> Path:
    """RUN/checkpoint/ or another ``folder`` of the run (atomic: a crash leaves the previous checkpoint)."""
    return save_checkpoint(Path(run) / folder, policy, spec, meta, optimizer)


def write_policy_run(
    out: str | Path, cfg: TrainConfig, policy: torch.nn.Module, meta: dict | None = None, spec: dict | None = None
) -> Path:
    """A run directory for a policy trained elsewhere (config + checkpoint), so that ``embody eval``,
    ``embody video`` and ``embody deploy`` accept it; ``spec`` defaults to that of ``cfg``'s env."""
    if spec is None:  # first: a bad config leaves no run directory behind
        env = build_env(cfg, n_envs=1, evaluation=True)
        spec = policy_spec(env)
        env.close()
    out = start_run(out, cfg)
    save_run_checkpoint(out, policy, spec, meta)
    return out


def write_eval(run: str | Path, summary: dict) -> Path:
    """Write ``summary`` to the run's ``eval.json`` (atomically); returns its path."""
    return write_atomic(Path(run) / EVAL, json.dumps(summary, indent=2))


# -- reading ------------------------------------------------------------------------------------
def load_run(run: str | Path) -> tuple[TrainConfig, Path]:
    """(the run's TrainConfig, its checkpoint folder)."""
    from embody.train import TrainConfig

    run = Path(run)
    if not (run / CONFIG).is_file():
        raise FileNotFoundError(f"{run} is not a training run: {CONFIG} is missing")
    return from_dict(TrainConfig, load_yaml(run / CONFIG), str(run / CONFIG)), run / CHECKPOINT


def load_run_checkpoint(
    run: str | Path, expect: VecEnv | Task | None = None, device: str = "cpu", checkpoint: str = CHECKPOINT
) -> Checkpoint:
    """The run's checkpoint (policy, spec, meta, optimizer state), or the snapshot folder ``checkpoint``
    (``checkpoint_600s``); ``expect`` (an env or task) refuses a policy trained for another observation/action
    spec."""
    return load_checkpoint(
        Path(run) / checkpoint, expect_spec=None if expect is None else policy_spec(expect), device=device
    )


def evaluate_run(
    run: Path,
    episodes: int = 10,
    sim: str | None = None,
    n_envs: int = 16,
    seed: int = 12345,
    overrides: list[str] = (),
    checkpoint: str = CHECKPOINT,
    deterministic: bool = True,
) -> dict:
    """Evaluation of a run's checkpoint (or its snapshot folder ``checkpoint``) with its mean action, or with
    sampled actions unless ``deterministic``; ``overrides`` (``key=value``) adjust its config, e.g.
    ``env.randomization.enabled=false`` or a sensor source another simulator offers."""
    cfg, _ = load_run(run)
    apply_overrides(cfg, texts=overrides)
    env = build_env(cfg, n_envs=min(n_envs, episodes), sim=sim, seed=seed, evaluation=True)
    ckpt = load_run_checkpoint(run, expect=env, checkpoint=checkpoint)
    reward_model = run / "reward_model"  # a run on a learned reward (embody.train_sac)
    segment = cfg.preference.segment if reward_model.is_dir() else 0
    start = time.perf_counter()
    result = evaluate(env, ckpt.policy, episodes, deterministic=deterministic, segment=segment)
    summary = {
        "task": cfg.task,
        "sim": sim or cfg.sim,
        "actions": "mean" if deterministic else "sampled",
        **result.summary(env.task.max_episode_return),
        "eval_wall_s": time.perf_counter() - start,
        "env_steps_trained": ckpt.meta.get("env_steps"),
    }
    if env.task.terminations_are_falls:
        summary["survival_rate"] = 1.0 - summary["terminated_fraction"]
    if segment:
        summary.update(learned_reward_ranking(reward_model, result.segments, policy_spec(env)))
    env.close()
    return summary


def learned_reward_ranking(reward_model: Path, segments: dict, spec: dict) -> dict:
    """How the learned reward ranks held-out segments (the evaluation's: ``obs`` (k, L, o), ``actions`` (k, L, a),
    ``rewards`` (k, L)) against the env's: ``reward_spearman`` of their sums, over ``reward_segments`` of them."""
    from embody.policies.preference import spearman

    model = load_checkpoint(reward_model, expect_spec=spec).policy
    obs, actions, rewards = (segments[k] for k in ("obs", "actions", "rewards"))
    k = len(rewards)
    flat = (x.reshape(-1, x.shape[-1]).astype(np.float32) for x in (obs, actions))
    learned = model.reward(*flat).reshape(k, -1)
    rho = spearman(learned.sum(1), rewards.sum(1)) if k > 1 else float("nan")
    return {"reward_spearman": rho, "reward_segments": k}


def record_video(
    run: Path,
    path: Path,
    sim: str | None = None,
    seed: int = 12345,
    size: tuple[int, int] = VIDEO_SIZE,
    overlay: bool = False,
) -> Path:
    """One deterministic episode of the run's policy, rendered at ``size`` (width, height) to ``path`` (mp4);
    ``overlay``: the command and the step's reward terms written on each frame."""
    cfg, _ = load_run(run)
    if "render_width" in cfg.env.get("sim", {}):  # every task on a robot simulator (not, e.g., the driving ones)
        apply_overrides(cfg, texts=[f"env.sim.render_width={size[0]}", f"env.sim.render_height={size[1]}"])
    env = build_env(cfg, n_envs=1, sim=sim, seed=seed, evaluation=True)
    ckpt = load_run_checkpoint(run, expect=env)
    result = evaluate(env, ckpt.policy, episodes=1, render=True)
    with VideoWriter(path, fps=1.0 / env.dt) as video:
        for frame, info in zip(result.frames, result.frame_info):
            video.write(draw_overlay(frame, overlay_lines(info)) if overlay else frame)
    env.close()
    return path


# -- metrics ------------------------------------------------------------------------------------
class MetricsLog:
    """Append-only metrics: JSONL as the record, CSV for spreadsheets."""

    def __init__(self, run: Path):
        self.jsonl, self.csv = run / "metrics.jsonl", run / "metrics.csv"

    def append(self, row: dict) -> None:
        """Append ``row`` to ``metrics.jsonl`` and ``metrics.csv`` (non-finite floats become null / empty)."""
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(clean) + "\n")
        new = not self.csv.exists()
        with open(self.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(clean))
            if new:
                w.writeheader()
            w.writerow(clean)

    def rows(self) -> list[dict]:
        """Every row of ``metrics.jsonl`` so far (none if it does not exist)."""
        if not self.jsonl.exists():
            return []
        return [json.loads(line) for line in self.jsonl.read_text().splitlines() if line.strip()]


def plot_learning_curve(run: Path, rows: list[dict], max_return: float | None = None) -> Path:
    """Plot training ``episode_return`` against env steps and wall-clock time (rows from ``MetricsLog``),
    with ``max_return`` and 70 % of it as reference lines; writes ``learning_curve.png`` in ``run``
    and returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("episode_return") is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, key, label in ((axes[0], "env_steps", "env steps"), (axes[1], "time_s", "wall-clock [s]")):
        ax.plot([r[key] for r in rows], [r["episode_return"] for r in rows], lw=1.5)
        if max_return:
            ax.axhline(max_return, color="gray", ls="--", lw=1, label="max return")
            ax.axhline(0.7 * max_return, color="gray", ls=":", lw=1, label="70% of max")
            ax.legend(loc="lower right")
        ax.set_xlabel(label)
        ax.set_ylabel("episode return (training, last 100)")
        ax.grid(alpha=0.3)
    fig.suptitle(run.name)
    fig.tight_layout()
    out = run / "learning_curve.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    plot_reward_terms(run, rows)
    return out


def plot_reward_terms(run: Path, rows: list[dict]) -> Path | None:
    """Each logged reward term (``reward/<term>``: its mean per step, weight included) against env steps, one subplot
    per term, in ``reward_terms.png``; None for a task without named terms."""
    import matplotlib.pyplot as plt

    terms = sorted({k for r in rows for k in r if k.startswith("reward/")})
    if not terms:
        return None
    cols = min(4, len(terms))
    nrows = -(-len(terms) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3 * cols, 2 * nrows), sharex=True, squeeze=False)
    for ax in axes.flat[len(terms) :]:
        ax.set_visible(False)
    for ax, term in zip(axes.flat, terms):
        pts = [(r["env_steps"], r[term]) for r in rows if r.get(term) is not None]
        ax.plot(*zip(*pts), lw=1)
        ax.set_title(term.removeprefix("reward/"), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.supxlabel("env steps", fontsize=8)
    fig.suptitle(f"{run.name}: reward terms (mean per step, weighted)")
    fig.tight_layout()
    out = run / "reward_terms.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
