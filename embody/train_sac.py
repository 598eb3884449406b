"""``embody train TASK --algo sac``: SAC (``embody.policies.sac``) into the same run directory as PPO, plus
``RUN/replay.safetensors`` (the replay buffer, saved with every checkpoint) so that ``--resume`` continues with
the data it had."""

from __future__ import annotations

from pathlib import Path

from embody.config import to_dict
from embody.policies.sac import SAC, SACPolicy
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

REPLAY = "replay.safetensors"


def train_sac(cfg, out: Path, resume: bool = False) -> dict:
    """Train, checkpoint (policy, optimizer and replay buffer), evaluate and record a video into ``out``."""
    from embody.train import finish_run

    env = build_env(cfg)
    start_run(out, cfg)
    spec = policy_spec(env)
    ckpt = load_run_checkpoint(out, expect=env, device=cfg.device) if resume else None
    policy = (
        ckpt.policy
        if ckpt
        else SACPolicy(
            env.observation_size,
            env.action_size,
            cfg.sac.hidden,
            cfg.sac.activation,
            cfg.sac.normalize_obs,
            cfg.sac.init_alpha,
            list(env.pixel_shape) if cfg.pixels else None,
        )
    )
    if not isinstance(policy, SACPolicy):
        raise ValueError(f"{out}: its checkpoint holds a {type(policy).__name__}, not a SACPolicy (algo {cfg.algo})")
    sac = SAC(env, policy, cfg.sac, cfg.device, cfg.seed)
    time_offset = 0.0
    if ckpt:
        sac.optimizer.load_state_dict(ckpt.optimizer_state)
        sac.env_steps, sac.updates, time_offset = (ckpt.meta[k] for k in ("env_steps", "updates", "time_s"))
        sac.buffer.restore(out / REPLAY)
    log = MetricsLog(out)
    progress = Progress(cfg.steps, label=f"train {cfg.task} (sac)", max_time_s=max(cfg.max_time_s - time_offset, 0))
    progress.update(sac.env_steps, force=True)
    logged: list[dict] = []  # this call's metrics rows

    def save(time_s: float) -> None:
        meta = {"env_steps": sac.env_steps, "updates": sac.updates, "time_s": time_s, "config": to_dict(cfg)}
        save_run_checkpoint(out, policy, spec, meta, sac.optimizer)
        sac.buffer.save(out / REPLAY)

    def on_log(row: dict) -> bool:
        row["time_s"] += time_offset
        log.append(row)
        logged.append(row)
        progress.update(row["env_steps"], ret=row["episode_return"], alpha=row["alpha"])
        if len(logged) % cfg.checkpoint_every == 0:
            save(row["time_s"])
        return cfg.max_time_s > 0 and row["time_s"] >= cfg.max_time_s

    sac.learn(cfg.steps, on_log)
    last = logged[-1] if logged else {}
    progress.close(ret=last.get("episode_return", float("nan")))
    save(last.get("time_s", time_offset))
    plot_learning_curve(out, log.rows(), env.task.max_episode_return)
    env.close()
    return finish_run(out, cfg)
