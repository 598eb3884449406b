"""``embody train``: PPO (or SAC, ``algo: sac``; SHAC, ``algo: shac``) on a registered task, writing a run directory (see embody.runs)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from embody.config import (
    ConfigError,
    Count,
    NonNeg,
    PosFloat,
    PosInt,
    Seed,
    apply_override,
    apply_overrides,
    check,
    from_dict,
    load_yaml,
    to_dict,
)
from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
from embody.policies.ppo import PPO, PPOConfig
from embody.policies.preference import PreferenceConfig
from embody.policies.sac import SACConfig
from embody.policies.shac import SHACConfig
from embody.progress import Progress
from embody.runs import (  # noqa: F401  (build_env .. record_video: re-exported, their home was here)
    CHECKPOINT,
    MetricsLog,
    build_env,
    evaluate_run,
    load_run,
    load_run_checkpoint,
    plot_learning_curve,
    policy_spec,
    record_video,
    save_run_checkpoint,
    start_run,
    write_eval,
)
from embody.sims.gymnasium_env import PREFIX
from embody.sims.tasks import TASKS

ALGOS = ("ppo", "sac", "shac")


@dataclass
class TrainConfig:
    """A training run's config, saved as the run's ``config.yaml``: task and simulator, scale, budget, network,
    the algorithm and its settings (``ppo`` with ``policy``, ``sac``, or ``shac``)."""

    task: str = "cartpole-swingup"
    algo: str = "ppo"  # ppo | sac | shac (through a differentiable simulator)
    sim: str = "mujoco"
    n_envs: PosInt = 256
    steps: Count = 2_000_000
    seed: Seed = 0
    device: str = "cpu"
    torch_threads: PosInt = 1  # small networks: one thread leaves the cores to the simulator
    update_threads: Count = 0  # torch threads for the PPO update, while the simulator idles (0: every core)
    staggered_resets: bool = False
    max_time_s: NonNeg = 0.0  # stop training after this wall-clock time (0: no limit)
    checkpoint_every: PosInt = 50  # iterations (SAC: metrics rows)
    checkpoint_minutes: NonNeg = 5.0  # also save once this much training time passed since the last save (0: off)
    snapshots_s: list[float] = field(default_factory=list)  # also keep checkpoint_<T>s/ once training passes T s
    eval_episodes: Count = 10  # the final evaluation's episodes (0: no evaluation, no eval.json)
    video: bool = True
    init_from: str | None = None  # a run directory whose policy starts this run (fine-tuning; same spec)
    pixels: Count = 0  # > 0: the actor observes rendered images of this size, the last ``frames`` stacked
    frames: PosInt = 3
    pixel_source: str = "render"  # where the images come from (embody.sims.pixels.PIXEL_SOURCES)
    pixel_precision: str = "float32"  # the pixel encoder's convolutions: float32 | bfloat16 (~2× on bf16 CPUs)
    workers: Count = 0  # > 0: PPO/SAC rollouts on this many Ray workers sharing n_envs (embody.scale); 0: here
    ray_address: str | None = None  # HOST:PORT of a Ray head; None: a Ray instance on this machine
    worker_cpus: PosFloat = 1.0  # CPUs each worker reserves on the cluster
    env: dict[str, Any] = field(default_factory=dict)  # the task's config (TaskConfig subclass)
    policy: ActorCriticConfig = field(default_factory=ActorCriticConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    sac: SACConfig = field(default_factory=SACConfig)
    shac: SHACConfig = field(default_factory=SHACConfig)
    preference: PreferenceConfig = field(default_factory=PreferenceConfig)  # SAC on a learned reward (PEBBLE)


def resolve_config(task: str, file: str | None = None, overrides: list[str] = (), **flags) -> TrainConfig:
    """Defaults < the task's train_defaults < config file < CLI flags < --set overrides. A ``gym:ID`` task has no
    defaults of its own; ``env`` holds its ``gym.make`` keyword arguments."""
    if task.startswith(PREFIX):
        cfg = TrainConfig(task=task, n_envs=16)
    else:
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


def train(cfg: TrainConfig, out: Path, resume: bool = False, teacher=None) -> dict:
    """Train, checkpoint, evaluate and record a video into run directory ``out``; ``teacher`` (a
    ``policies.preference.Teacher``) answers a SAC run's preference queries instead of ``preference.teacher``."""
    check(cfg)  # a config built in code; --set and files were checked as they were read
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but PyTorch sees no CUDA GPU; use --device cpu")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.set_num_threads(cfg.torch_threads)
    if cfg.algo not in ALGOS:
        raise ConfigError(f"unknown algo {cfg.algo!r}; valid: {', '.join(ALGOS)}")
    if (teacher or cfg.preference.teacher != "none") and (cfg.algo != "sac" or cfg.pixels or cfg.sac.her != "none"):
        raise ConfigError("preference: a learned reward trains with --algo sac on state observations, without HER")
    if cfg.workers and cfg.algo == "shac":
        raise ConfigError("--workers: SHAC differentiates through one simulator; workers collect for ppo and sac")
    if cfg.algo == "sac":
        from embody.train_sac import train_sac

        return train_sac(cfg, out, resume, teacher)
    if cfg.algo == "shac":
        from embody.train_shac import train_shac

        return train_shac(cfg, out, resume)
    # first: a bad config (or init_from) leaves no run directory behind; with workers the envs live there
    env = build_env(cfg, n_envs=1 if cfg.workers else None)
    init = load_run_checkpoint(cfg.init_from, expect=env, device=cfg.device) if cfg.init_from and not resume else None
    if cfg.workers:  # an unreachable cluster, or one too small, before anything is written
        from embody.scale import connect

        connect(cfg.ray_address, cfg.workers, cfg.worker_cpus)
    start_run(out, cfg)
    spec = policy_spec(env)
    if resume:
        ckpt = load_run_checkpoint(out, expect=env, device=cfg.device)
        policy = ckpt.policy
    elif init is not None:
        policy = init.policy
    else:
        net = cfg.policy
        if cfg.pixels:
            net = replace(net, pixels=list(env.pixel_shape), pixel_precision=cfg.pixel_precision)
        policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, net)
    threads = cfg.update_threads or os.cpu_count() or 1
    workers = None
    if cfg.workers:
        from embody.scale import RolloutWorkers

        workers = RolloutWorkers(cfg, policy.init_kwargs(), cfg.workers, cfg.ray_address, cfg.worker_cpus)
    ppo = PPO(env, policy, cfg.ppo, cfg.device, update_threads=threads, mirror=env.task.mirror(), workers=workers)
    if resume:
        if ckpt.optimizer_state:
            ppo.optimizer.load_state_dict(ckpt.optimizer_state)
        ppo.env_steps, ppo.iteration = ckpt.meta["env_steps"], ckpt.meta["iteration"]
        ppo.set_lr(ckpt.meta.get("lr", cfg.ppo.lr))
        env.task.restore_curriculum(ckpt.meta.get("curriculum", {}))
    log = MetricsLog(out)
    time_offset = ckpt.meta.get("time_s", 0.0) if resume else 0.0
    progress = Progress(cfg.steps, label=f"train {cfg.task}", max_time_s=max(cfg.max_time_s - time_offset, 0.0))
    progress.update(ppo.env_steps, force=True)

    def save(m: dict, folder: str = CHECKPOINT) -> None:
        meta = {
            "env_steps": ppo.env_steps,
            "iteration": ppo.iteration,
            "lr": ppo.lr,
            "time_s": m.get("time_s", time_offset),
            "config": to_dict(cfg),
            "curriculum": env.task.curriculum_state() if workers is None else {},  # workers' tasks live there
        }
        save_run_checkpoint(out, policy, spec, meta, ppo.optimizer, folder)

    last: dict = {}
    snapshots = sorted(t for t in cfg.snapshots_s if t > time_offset)
    due = CheckpointClock(cfg, time_offset)

    def on_iteration(m: dict) -> bool:
        m["time_s"] += time_offset
        levels = ppo.rollout.curriculum if ppo.rollout else env.task.curriculum_levels()
        m.update({f"curriculum/{k}": v for k, v in levels.items()})
        last.update(m)
        log.append(m)
        progress.update(m["env_steps"], ret=m["episode_return"], lr=m["lr"])
        if due(m["time_s"]):
            save(m)
        while snapshots and m["time_s"] >= snapshots[0]:
            save(m, snapshot_name(snapshots.pop(0)))
        return cfg.max_time_s > 0 and m["time_s"] >= cfg.max_time_s

    try:
        ppo.learn(cfg.steps, on_iteration)
    except (Exception, KeyboardInterrupt):
        if last:  # a worker or the learner raised, or Ctrl-C: keep what was learned
            save(last)
        raise
    finally:
        if workers is not None:
            workers.close()
    progress.close(ret=last.get("episode_return", float("nan")))
    save(last)
    rows = log.rows()
    plot_learning_curve(out, rows, env.task.max_episode_return)
    env.close()
    return finish_run(out, cfg, workers)


class CheckpointClock:
    """Says when a training loop saves: at every ``checkpoint_every``-th report of this call, and once
    ``checkpoint_minutes`` of training time passed since the last save, so that a killed run loses at most that
    much however long its reports are apart (a SAC row is 5,000 env steps; 50 of them outlast many runs)."""

    def __init__(self, cfg: TrainConfig, time_s: float):
        self.every, self.period_s = cfg.checkpoint_every, 60.0 * cfg.checkpoint_minutes
        self.reports, self.saved_s = 0, time_s

    def __call__(self, time_s: float) -> bool:
        self.reports += 1
        late = self.period_s > 0 and time_s - self.saved_s >= self.period_s
        if self.reports % self.every == 0 or late:
            self.saved_s = time_s
            return True
        return False


def snapshot_name(seconds: float) -> str:
    """The run's folder for the snapshot taken once training passed ``seconds``: ``checkpoint_600s``."""
    return f"{CHECKPOINT}_{seconds:g}s"


def finish_run(out: Path, cfg: TrainConfig, workers=None) -> dict:
    """Evaluate the run's checkpoint (eval.json; not with ``eval_episodes`` 0) and record one episode (eval.mp4);
    the summary lists the rollout ``workers`` lost on the way (``lost_workers``), if any."""
    summary = {"eval_episodes": 0}
    if cfg.eval_episodes:
        summary = evaluate_run(out, episodes=cfg.eval_episodes)
        write_eval(out, summary)
    if cfg.video:
        record_video(out, out / "eval.mp4")
    if workers is not None and workers.lost:
        summary["lost_workers"] = workers.lost
    return summary
