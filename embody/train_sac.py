"""``embody train TASK --algo sac``: SAC (``embody.policies.sac``) into the same run directory as PPO, plus
``RUN/replay.safetensors`` (the replay buffer, saved with every checkpoint) so that ``--resume`` continues with
the data it had. With ``preference.teacher`` (or a ``teacher`` passed in), the reward is learned from preferences
(``embody.policies.preference``): ``RUN/reward_model/`` (an embody checkpoint) and ``RUN/preferences.safetensors``
(the labelled pairs) are saved beside, and resume with the run; the recent history queries are drawn from does
not (it refills)."""

from __future__ import annotations

from pathlib import Path

import torch

from embody.config import ConfigError, to_dict
from embody.policies.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from embody.policies.preference import PreferenceDataset, PreferenceLearner, RewardModel, ScriptedTeacher, Teacher
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

REPLAY, REWARD_MODEL, PREFERENCES = "replay.safetensors", "reward_model", "preferences.safetensors"


def train_sac(cfg, out: Path, resume: bool = False, teacher: Teacher | None = None) -> dict:
    """Train, checkpoint (policy, optimizer and replay buffer), evaluate and record a video into ``out``;
    ``teacher`` answers preference queries (else ``preference.teacher`` names one)."""
    from embody.train import CheckpointClock, finish_run

    if cfg.workers and (cfg.sac.her != "none" or teacher is not None or cfg.preference.teacher != "none"):
        raise ConfigError("--workers: SAC collects on workers without HER or a preference-learned reward (not yet)")
    env = build_env(cfg, n_envs=1 if cfg.workers else None)  # with workers the envs live there
    if cfg.workers:
        from embody.scale import connect

        connect(cfg.ray_address, cfg.workers, cfg.worker_cpus)  # an unreachable or small cluster: nothing written
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
            cfg.pixel_precision,
            cfg.sac.init,
        )
    )
    if not isinstance(policy, SACPolicy):
        raise ValueError(f"{out}: its checkpoint holds a {type(policy).__name__}, not a SACPolicy (algo {cfg.algo})")
    workers = None
    if cfg.workers:
        from embody.scale import RolloutWorkers

        workers = RolloutWorkers(cfg, policy.init_kwargs(), cfg.workers, cfg.ray_address, cfg.worker_cpus)
    sac = SAC(env, policy, cfg.sac, cfg.device, cfg.seed, workers)
    time_offset = 0.0
    if ckpt:
        sac.optimizer.load_state_dict(ckpt.optimizer_state)
        sac.env_steps, sac.updates, time_offset = (ckpt.meta[k] for k in ("env_steps", "updates", "time_s"))
        sac.buffer.restore(out / REPLAY)
        env.task.restore_curriculum(ckpt.meta.get("curriculum", {}))
    if teacher is not None or cfg.preference.teacher != "none":
        sac.reward_learner = preference_learner(cfg, env, teacher)
        if ckpt:
            restore_preferences(sac.reward_learner, out, spec)
    log = MetricsLog(out)
    progress = Progress(cfg.steps, label=f"train {cfg.task} (sac)", max_time_s=max(cfg.max_time_s - time_offset, 0))
    progress.update(sac.env_steps, force=True)
    logged: list[dict] = []  # this call's metrics rows
    due = CheckpointClock(cfg, time_offset)

    def save(time_s: float) -> None:
        meta = {"env_steps": sac.env_steps, "updates": sac.updates, "time_s": time_s, "config": to_dict(cfg)}
        meta["curriculum"] = env.task.curriculum_state() if workers is None else {}  # workers' tasks live there
        save_run_checkpoint(out, policy, spec, meta, sac.optimizer)
        sac.buffer.save(out / REPLAY)
        if sac.reward_learner is not None:
            save_preferences(sac.reward_learner, out, spec)

    def on_log(row: dict) -> bool:
        row["time_s"] += time_offset
        log.append(row)
        logged.append(row)
        progress.update(row["env_steps"], ret=row["episode_return"], alpha=row["alpha"])
        if due(row["time_s"]):
            save(row["time_s"])
        return cfg.max_time_s > 0 and row["time_s"] >= cfg.max_time_s

    try:
        sac.learn(cfg.steps, on_log)
    except (Exception, KeyboardInterrupt):
        if logged:  # a worker or the learner raised, or Ctrl-C: keep what was learned
            save(logged[-1]["time_s"])
        raise
    finally:
        if workers is not None:
            workers.close()
    last = logged[-1] if logged else {}
    progress.close(ret=last.get("episode_return", float("nan")))
    save(last.get("time_s", time_offset))
    plot_learning_curve(out, log.rows(), env.task.max_episode_return)
    env.close()
    return finish_run(out, cfg, workers)


def preference_learner(cfg, env, teacher: Teacher | None) -> PreferenceLearner:
    """The run's PEBBLE learner with ``teacher``, or the one ``preference.teacher`` names."""
    c = cfg.preference
    if teacher is None:
        if c.teacher != "scripted":
            raise ConfigError(f"unknown preference.teacher {c.teacher!r}; valid: none, scripted")
        teacher = ScriptedTeacher.from_config(c, cfg.seed)
    return PreferenceLearner(c, teacher, env.observation_size, env.action_size, env.n_envs, cfg.seed)


def save_preferences(learner: PreferenceLearner, out: Path, spec: dict) -> None:
    """The reward model (with its optimizer and the learner's counters) and the labelled pairs."""
    state = {"queries": learner.queries, "sessions": learner.sessions, "next_session": learner.next_session}
    save_checkpoint(out / REWARD_MODEL, learner.model, spec, {"learner": state}, learner.optimizer)
    learner.dataset.save(out / PREFERENCES)


def restore_preferences(learner: PreferenceLearner, out: Path, spec: dict) -> None:
    """What ``save_preferences`` wrote; a model for another task or a damaged file is one error naming it."""
    ckpt = load_checkpoint(out / REWARD_MODEL, expect_spec=spec)
    if not isinstance(ckpt.policy, RewardModel):
        raise CheckpointError(f"{out / REWARD_MODEL}: holds a {type(ckpt.policy).__name__}, not a RewardModel")
    learner.model = ckpt.policy
    learner.optimizer = torch.optim.Adam(learner.model.parameters(), lr=learner.config.lr)
    learner.optimizer.load_state_dict(ckpt.optimizer_state)
    for key, value in ckpt.meta["learner"].items():
        setattr(learner, key, value)
    learner.dataset = PreferenceDataset.load(out / PREFERENCES, learner.model.obs_size, learner.model.action_size)
