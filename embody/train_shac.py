"""``embody train TASK --algo shac``: SHAC (``embody.policies.shac``) through the differentiable simulator
(sims/diff_env.py) into the same run directory as PPO. The network comes from ``shac`` (``policy`` is PPO's); the
checkpoint holds the ActorCritic and the one Adam of both groups; on resume the target critic restarts from the
critic. With ``pixels`` the actor sees the rendered frames and the critic the state (D.VA)."""

from __future__ import annotations

from pathlib import Path

from embody.config import to_dict
from embody.policies.actor_critic import ActorCritic
from embody.policies.shac import SHAC
from embody.progress import Progress
from embody.runs import (
    MetricsLog,
    build_env,
    load_run_checkpoint,
    plot_learning_curve,
    policy_spec,
    save_run_checkpoint,
    start_run,
)
from embody.sims.diff_env import DiffEnv
from embody.sims.pixels import DifferentiableFrames


def train_shac(cfg, out: Path, resume: bool = False) -> dict:
    """Train, checkpoint, evaluate and record a video into ``out``."""
    from embody.train import CheckpointClock, finish_run

    env = build_env(cfg)
    denv = DiffEnv(env)  # before the run directory: an undifferentiable task or simulator leaves none behind
    frames = DifferentiableFrames(env) if cfg.shac.render_gradient else None  # so is a source without gradients
    start_run(out, cfg)
    spec = policy_spec(env)
    ckpt = load_run_checkpoint(out, expect=env, device=cfg.device) if resume else None
    pixels = list(env.pixel_shape) if cfg.pixels else None
    policy = (
        ckpt.policy
        if ckpt
        else cfg.shac.policy(
            env.observation_size, env.action_size, pixels, denv.state_observation_size, cfg.pixel_precision
        )
    )
    if not isinstance(policy, ActorCritic):
        raise ValueError(f"{out}: its checkpoint holds a {type(policy).__name__}, not an ActorCritic (algo shac)")
    shac = SHAC(denv, policy, cfg.shac, cfg.device, frames)
    time_offset = 0.0
    if ckpt:
        shac.optimizer.load_state_dict(ckpt.optimizer_state)
        shac.env_steps, shac.iteration, time_offset = (ckpt.meta[k] for k in ("env_steps", "iteration", "time_s"))
    log = MetricsLog(out)
    progress = Progress(cfg.steps, label=f"train {cfg.task} (shac)", max_time_s=max(cfg.max_time_s - time_offset, 0))
    progress.update(shac.env_steps, force=True)
    last: dict = {}
    due = CheckpointClock(cfg, time_offset)

    def save(time_s: float) -> None:
        meta = {"env_steps": shac.env_steps, "iteration": shac.iteration, "time_s": time_s, "config": to_dict(cfg)}
        save_run_checkpoint(out, policy, spec, meta, shac.optimizer)

    def on_iteration(m: dict) -> bool:
        m["time_s"] += time_offset
        last.update(m)
        log.append(m)
        progress.update(m["env_steps"], ret=m["episode_return"], grad=m["actor_grad_norm"])
        if due(m["time_s"]):
            save(m["time_s"])
        return cfg.max_time_s > 0 and m["time_s"] >= cfg.max_time_s

    try:
        shac.learn(cfg.steps, on_iteration)
    except (Exception, KeyboardInterrupt):
        if last:  # keep what was learned
            save(last["time_s"])
        raise
    progress.close(ret=last.get("episode_return", float("nan")))
    save(last.get("time_s", time_offset))
    plot_learning_curve(out, log.rows(), env.task.max_episode_return)
    env.close()
    return finish_run(out, cfg)
