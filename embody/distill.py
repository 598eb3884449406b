"""``embody distill``: a privileged scripted expert distilled into a proprioceptive recurrent
student with DAgger (policies/distill.py), written as a run directory.

    RUN/config.yaml       the TrainConfig of the student's env (task, sim, task config), so that
                          ``embody eval RUN`` / ``embody video RUN`` work as for a trained run
    RUN/distill.yaml      the DistillConfig (scale, DAgger and BC settings, student network)
    RUN/metrics.jsonl     one row per DAgger iteration (metrics.csv: the same)
    RUN/checkpoint/       the student (RecurrentActorCritic)
    RUN/eval.json         success rate, returns and peak contact force of the student and of the
                          expert on the same evaluation episodes, and their ratio
    RUN/eval.mp4          one student episode (paper scale)

Experts are registered per task in ``EXPERTS``: a factory (task config, name) → Policy over
cat(observation, privileged observation).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embody.config import ConfigError, to_dict
from embody.policies.bc import BCConfig
from embody.policies.distill import DAggerConfig, distill
from embody.policies.evaluate import evaluate
from embody.policies.recurrent import RecurrentActorCritic, RecurrentConfig
from embody.progress import Progress
from embody.runs import MetricsLog, build_env, policy_spec, record_video, save_run_checkpoint, start_run, write_eval
from embody.sims.tasks import TASKS
from embody.train import TrainConfig


def _peg_expert(config, name: str):
    from embody.sims.tasks.peg_insert import ScriptedExpert

    return ScriptedExpert(config, approach=name)


# task -> (factory(task config, expert name), default teacher, default reference expert)
EXPERTS: dict[str, tuple[Callable[[Any, str], Any], str, str]] = {"peg-insert": (_peg_expert, "contact", "hole")}

SCALES = {  # what --scale picks; everything stays overridable with --set
    "tiny": {
        "n_envs": 16,
        "dagger.iterations": 4,
        "dagger.steps_per_iteration": 150,
        "dagger.bc.epochs": 4,
        "eval_episodes": 32,
        "video": False,
    },
    "paper": {
        "n_envs": 64,
        "dagger.iterations": 12,
        "dagger.steps_per_iteration": 150,
        "dagger.bc.epochs": 8,
        "eval_episodes": 200,
        "video": True,
    },
}


@dataclass
class DistillConfig:
    """The teacher → student distillation run (``embody distill``): task, simulator, scale, teacher
    and reference experts, the recurrent student and the DAgger settings."""

    task: str = "peg-insert"
    sim: str = "mujoco"
    scale: str = "tiny"
    n_envs: int = 16
    seed: int = 0
    teacher: str = ""  # the expert that labels (default: the task's distillation teacher)
    reference: str = ""  # the expert the student is compared with in eval.json (default: the task's)
    eval_episodes: int = 32
    video: bool = False
    torch_threads: int = 1
    env: dict[str, Any] = field(default_factory=dict)  # the task's config
    student: RecurrentConfig = field(
        default_factory=lambda: RecurrentConfig(rnn_hidden=64, actor_hidden=[64], critic_hidden=[32])
    )
    dagger: DAggerConfig = field(
        default_factory=lambda: DAggerConfig(
            iterations=4,
            steps_per_iteration=150,
            beta_decay=0.5,
            bc=BCConfig(epochs=4, batch_size=512, lr=2e-3, seq_len=32, burn_in=8),
        )
    )


def resolve_distill_config(task: str, scale: str = "tiny", overrides: list[str] = (), **flags) -> DistillConfig:
    """Defaults < the scale's settings < flags < ``--set`` overrides."""
    from embody.config import apply_override, apply_overrides

    if task not in EXPERTS:
        raise ConfigError(f"no scripted expert for task {task!r}; tasks with one: {sorted(EXPERTS)}")
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; valid: {sorted(SCALES)}")
    cfg = DistillConfig(task=task, scale=scale, env=to_dict(TASKS.get(task).config_class()))
    _, teacher, reference = EXPERTS[task]
    cfg.teacher, cfg.reference = teacher, reference
    for key, value in SCALES[scale].items():
        apply_override(cfg, key, value)
    return apply_overrides(cfg, flags, overrides)


def train_config(cfg: DistillConfig) -> TrainConfig:
    """The TrainConfig that rebuilds the student's env (what ``embody eval RUN`` reads)."""
    return TrainConfig(
        task=cfg.task,
        sim=cfg.sim,
        n_envs=cfg.n_envs,
        steps=0,
        seed=cfg.seed,
        eval_episodes=cfg.eval_episodes,
        video=cfg.video,
        env=dict(cfg.env),
    )


def evaluate_policy(env, policy, episodes: int, privileged: bool) -> dict:
    """Deterministic episodes → summary with success and, when the task tracks it, peak force."""
    stats = getattr(env.task, "take_episode_stats", None)
    if stats:
        stats()
    start = time.perf_counter()
    summary = evaluate(env, policy, episodes, privileged=privileged).summary(env.task.max_episode_return)
    summary["eval_wall_s"] = time.perf_counter() - start
    if stats:
        peaks = stats()["peak_force"]
        if peaks:
            summary["peak_force_mean"], summary["peak_force_max"] = float(np.mean(peaks)), float(np.max(peaks))
    return summary


def run_distill(cfg: DistillConfig, out: Path) -> dict:
    """DAgger from the task's scripted expert into a recurrent student; writes run directory ``out``."""
    factory, _, _ = EXPERTS[cfg.task]
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.torch_threads)
    tcfg = train_config(cfg)
    env = build_env(tcfg)  # first: a bad config leaves no run directory behind
    start_run(out, tcfg, distill=cfg)
    task_cfg = env.task.config
    teacher = factory(task_cfg, cfg.teacher)
    student = RecurrentActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.student)
    log = MetricsLog(out)
    progress = Progress(len(cfg.dagger.schedule()), label=f"distill {cfg.task}", unit="iterations")
    start = time.perf_counter()

    def on_iteration(m: dict) -> None:
        m["time_s"] = time.perf_counter() - start
        m["env_steps"] = m["iteration"] * cfg.dagger.steps_per_iteration * cfg.n_envs
        log.append(m)
        progress.update(m["iteration"], mse=m["action_mse"])

    history = distill(
        env, teacher, student, replace(cfg.dagger, seed=cfg.seed), teacher_obs="privileged", progress_cb=on_iteration
    )
    progress.close()
    meta = {
        "env_steps": history[-1]["env_steps"] if history else 0,
        "iteration": len(history),
        "time_s": time.perf_counter() - start,
        "config": to_dict(tcfg),
        "distill": to_dict(cfg),
    }
    save_run_checkpoint(out, student, policy_spec(env), meta)
    env.close()

    eval_env = build_env(tcfg, n_envs=min(16, cfg.eval_episodes), seed=12345, evaluation=True)
    result = {
        "task": cfg.task,
        "sim": cfg.sim,
        "distill_time_s": meta["time_s"],
        "student": evaluate_policy(eval_env, student, cfg.eval_episodes, privileged=False),
    }
    for role, name in (("teacher", cfg.teacher), ("expert", cfg.reference)):
        if role == "teacher" and name == cfg.reference:
            continue
        result[role] = {
            "expert": name,
            **evaluate_policy(eval_env, factory(task_cfg, name), cfg.eval_episodes, privileged=True),
        }
    eval_env.close()
    if "teacher" not in result:
        result["teacher"] = result["expert"]
    expert_rate = result["expert"].get("success_rate", 0.0)
    result["student_over_expert"] = result["student"].get("success_rate", 0.0) / expert_rate if expert_rate else None
    write_eval(out, result)
    if cfg.video:
        record_video(out, out / "eval.mp4")
    return result
