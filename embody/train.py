"""``embody train``: PPO on a registered task, writing a run directory (see embody.runs)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embody.config import ConfigError, apply_override, apply_overrides, from_dict, load_yaml, save_yaml, to_dict
from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
from embody.policies.checkpoint import load_checkpoint, save_checkpoint
from embody.policies.evaluate import evaluate
from embody.policies.ppo import PPO, PPOConfig
from embody.progress import Progress
from embody.runs import MetricsLog, plot_learning_curve
from embody.sims.task import Task
from embody.sims.tasks import TASKS
from embody.sims.vec_env import VecEnv, make_env
from embody.video import VideoWriter


@dataclass
class TrainConfig:
    task: str = "cartpole-swingup"
    sim: str = "mujoco"
    n_envs: int = 256
    steps: int = 2_000_000
    seed: int = 0
    device: str = "cpu"
    torch_threads: int = 1  # small networks: one thread leaves the cores to the simulator
    staggered_resets: bool = False
    max_time_s: float = 0.0  # stop training after this wall-clock time (0: no limit)
    checkpoint_every: int = 50  # iterations
    eval_episodes: int = 10
    video: bool = True
    env: dict[str, Any] = field(default_factory=dict)  # the task's config (TaskConfig subclass)
    policy: ActorCriticConfig = field(default_factory=ActorCriticConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)


def resolve_config(task: str, file: str | None = None, overrides: list[str] = (), **flags) -> TrainConfig:
    """Defaults < the task's train_defaults < config file < CLI flags < --set overrides."""
    task_cls = TASKS.get(task)
    cfg = TrainConfig(task=task, env=to_dict(task_cls.config_class()))
    for key, value in getattr(task_cls, "train_defaults", {}).items():
        apply_override(cfg, key, value)
    if file:
        cfg = from_dict(TrainConfig, _deep_merge(to_dict(cfg), load_yaml(file)), str(file))
    return apply_overrides(cfg, flags, overrides)


def _deep_merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for k, v in update.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def build_env(cfg: TrainConfig, n_envs: int | None = None, sim: str | None = None, seed: int | None = None,
              evaluation: bool = False) -> VecEnv:
    """The run's env; ``evaluation``: without staggered resets, so every episode may run its full length."""
    task_cls = TASKS.get(cfg.task)
    task_cfg = from_dict(task_cls.config_class, cfg.env, "env")
    return make_env(cfg.task, sim or cfg.sim, n_envs or cfg.n_envs, cfg.seed if seed is None else seed,
                    staggered=cfg.staggered_resets and not evaluation, config=task_cfg)


def policy_spec(env: VecEnv | Task) -> dict:
    """What a checkpoint must match to be used on ``env`` (or on a bare task, as the deploy loop has)."""
    task = env.task if isinstance(env, VecEnv) else env
    return {"task": task.name, "robot": task.robot.name, "joints": list(task.robot.joint_names),
            "obs_size": task.observation_size, "privileged_size": task.privileged_size,
            "action_size": task.action_size}


def train(cfg: TrainConfig, out: Path, resume: bool = False) -> dict:
    """Train, checkpoint, evaluate and record a video into run directory ``out``."""
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but PyTorch sees no CUDA GPU; use --device cpu")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.set_num_threads(cfg.torch_threads)
    env = build_env(cfg)  # first: a bad config leaves no run directory behind
    out.mkdir(parents=True, exist_ok=True)
    save_yaml(cfg, out / "config.yaml")
    spec = policy_spec(env)
    if resume:
        ckpt = load_checkpoint(out / "checkpoint", expect_spec=spec, device=cfg.device)
        policy = ckpt.policy
    else:
        policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    ppo = PPO(env, policy, cfg.ppo, cfg.device)
    if resume:
        if ckpt.optimizer_state:
            ppo.optimizer.load_state_dict(ckpt.optimizer_state)
        ppo.env_steps, ppo.iteration = ckpt.meta["env_steps"], ckpt.meta["iteration"]
        ppo.set_lr(ckpt.meta.get("lr", cfg.ppo.lr))
    log = MetricsLog(out)
    time_offset = ckpt.meta.get("time_s", 0.0) if resume else 0.0
    progress = Progress(cfg.steps, label=f"train {cfg.task}", max_time_s=max(cfg.max_time_s - time_offset, 0.0))
    progress.update(ppo.env_steps, force=True)

    def save(m: dict) -> None:
        meta = {"env_steps": ppo.env_steps, "iteration": ppo.iteration, "lr": ppo.lr,
                "time_s": m.get("time_s", time_offset), "config": to_dict(cfg)}
        save_checkpoint(out / "checkpoint", policy, spec, meta, ppo.optimizer)

    last: dict = {}

    def on_iteration(m: dict) -> bool:
        m["time_s"] += time_offset
        last.update(m)
        log.append(m)
        progress.update(m["env_steps"], ret=m["episode_return"], lr=m["lr"])
        if m["iteration"] % cfg.checkpoint_every == 0:
            save(m)
        return cfg.max_time_s > 0 and m["time_s"] >= cfg.max_time_s

    ppo.learn(cfg.steps, on_iteration)
    progress.close(ret=last.get("episode_return", float("nan")))
    save(last)
    rows = log.rows()
    plot_learning_curve(out, rows, env.task.max_episode_return)
    env.close()
    return finish_run(out, cfg)


def finish_run(out: Path, cfg: TrainConfig) -> dict:
    """Evaluate the run's checkpoint (eval.json) and record one episode (eval.mp4)."""
    summary = evaluate_run(out, episodes=cfg.eval_episodes)
    (out / "eval.json").write_text(json.dumps(summary, indent=2))
    if cfg.video:
        record_video(out, out / "eval.mp4")
    return summary


def load_run(run: Path) -> tuple[TrainConfig, Path]:
    run = Path(run)
    if not (run / "config.yaml").is_file():
        raise FileNotFoundError(f"{run} is not a training run: config.yaml is missing")
    raw = load_yaml(run / "config.yaml")
    return from_dict(TrainConfig, raw, str(run / "config.yaml")), run / "checkpoint"


def evaluate_run(run: Path, episodes: int = 10, sim: str | None = None, n_envs: int = 16, seed: int = 12345,
                 overrides: list[str] = ()) -> dict:
    """Deterministic evaluation of a run's checkpoint; ``overrides`` (``key=value``) adjust its config,
    e.g. ``env.randomization.enabled=false`` or a sensor source another simulator offers."""
    cfg, ckpt_dir = load_run(run)
    apply_overrides(cfg, texts=overrides)
    env = build_env(cfg, n_envs=min(n_envs, episodes), sim=sim, seed=seed, evaluation=True)
    ckpt = load_checkpoint(ckpt_dir, expect_spec=policy_spec(env))
    start = time.perf_counter()
    result = evaluate(env, ckpt.policy, episodes)
    summary = {"task": cfg.task, "sim": sim or cfg.sim, **result.summary(env.task.max_episode_return),
               "eval_wall_s": time.perf_counter() - start, "env_steps_trained": ckpt.meta.get("env_steps")}
    env.close()
    return summary


def record_video(run: Path, path: Path, sim: str | None = None, seed: int = 12345) -> Path:
    cfg, ckpt_dir = load_run(run)
    env = build_env(cfg, n_envs=1, sim=sim, seed=seed, evaluation=True)
    ckpt = load_checkpoint(ckpt_dir, expect_spec=policy_spec(env))
    result = evaluate(env, ckpt.policy, episodes=1, render=True)
    with VideoWriter(path, fps=1.0 / env.sim.dt) as video:
        for frame in result.frames:
            video.write(frame)
    env.close()
    return path
