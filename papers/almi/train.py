"""ALMI's alternation: lower-1 → upper-1 → lower-2 → upper-2 …, then one whole-body run.

With ``deploy_steps``, a last lower stage (``lower-deploy``) fine-tunes the legs against the joint velocity
limits, whose 1.2× the deploy supervisor faults on: issue 19's penalty past 0.8 of each limit, inside the step
reward's clip at 0 for the first half of its steps and outside it for the second (at full weight from the start
it unlearns walking). Without it the paper-scale policy slaps an ankle past the limit 0.16 s into a deploy.

Each stage is an ordinary ``embody train`` run under ``OUT/stages/<stage>``: it starts from its own part's previous
stage (``init_from``) and drives the other part with that part's latest frozen policy. A stage whose run holds an
``eval.json`` is done and is skipped, one with only a checkpoint resumes from it, so an interrupted ``embody almi
train`` resumes. The last lower and upper policies are then composed into one ``almi`` (whole-body) run in OUT
itself: a ``CompositePolicy`` that ``embody eval``, ``sim2sim``, ``video`` and ``deploy`` use like any run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from embody.config import ConfigError, apply_overrides
from embody.policies.checkpoint import CheckpointError, load_checkpoint
from embody.policies.compose import CompositePolicy
from embody.runs import CHECKPOINT, EVAL, build_env, policy_spec, write_policy_run
from embody.train import TrainConfig, finish_run, resolve_config, train


@dataclass
class AlmiTrainConfig:
    """The alternation's size: rounds, and each stage's budget (env steps, and wall-clock seconds, 0: none).

    The paper scale's budget is env steps, so that methods, seeds and machines of different speeds compare: the
    first study's 10-minute stages bought 2.9-4.4 M steps, by method and session.
    """

    rounds: int = 2
    stage_steps: int = 4_000_000
    stage_time_s: float = 0.0
    n_envs: int = 256
    eval_episodes: int = 20
    seed: int = 0
    curricula: bool = True  # False: the clips at full amplitude from the whole library (a baseline)
    video: bool = True
    overrides: list[str] = field(default_factory=list)  # key=value for every stage's and the final run's config
    deploy_steps: int = 0  # env steps of the lower-deploy stage (module docstring); 0: none


SCALES = {
    "tiny": AlmiTrainConfig(
        rounds=2, stage_steps=2 * 24 * 16, stage_time_s=0.0, n_envs=16, eval_episodes=2, video=False
    ),
    "paper": AlmiTrainConfig(),
}


def make_config(
    scale: str, seed: int = 0, overrides: list[str] = (), curricula: bool = True, deploy_steps: int = 0
) -> AlmiTrainConfig:
    if scale not in SCALES:
        raise ConfigError(f"unknown scale {scale!r}; valid: {', '.join(SCALES)}")
    return replace(SCALES[scale], seed=seed, overrides=list(overrides), curricula=curricula, deploy_steps=deploy_steps)


def speed_limit_env(steps: int) -> dict[str, str]:
    """The lower-deploy stage's env settings for a stage of ``steps`` env steps (module docstring)."""
    return {
        "reward_weights.dof_vel_limits": "-5.0",
        "legged.soft_velocity_limit": "0.8",
        "penalty_curriculum.initial": "1.0",  # full weights at once: the walking policy survives them
        "legged.unclipped": "[dof_vel_limits]",
        "legged.unclipped_from_steps": str(steps // 2),
    }


def stage_config(cfg: AlmiTrainConfig, task: str, env: dict[str, str | None]) -> TrainConfig:
    """A stage's (or the final run's) TrainConfig: the task's defaults, the scale, ``env`` keys, the overrides."""
    sets = [f"env.{k}={v}" for k, v in env.items() if v is not None]
    if not cfg.curricula:
        sets.append("env.clips.enabled=false")
    t = resolve_config(task, overrides=sets)
    t.steps, t.max_time_s, t.n_envs, t.seed = cfg.stage_steps, cfg.stage_time_s, cfg.n_envs, cfg.seed
    t.eval_episodes, t.video = cfg.eval_episodes, False
    return apply_overrides(t, texts=cfg.overrides)  # the user's --set last: it wins over the scale


def train_almi(cfg: AlmiTrainConfig, out: Path, log=print) -> dict:
    """Every stage (skipping finished ones), then the composed whole-body run in ``out``; its evaluation."""
    lower = upper = None
    for r in range(1, cfg.rounds + 1):
        lower = train_stage(cfg, out, f"lower-{r}", "almi-lower", lower, {"upper_policy": upper}, log)
        upper = train_stage(cfg, out, f"upper-{r}", "almi-upper", upper, {"lower_policy": lower}, log)
    if cfg.deploy_steps:
        env = {"upper_policy": upper, **speed_limit_env(cfg.deploy_steps)}
        lower = train_stage(cfg, out, "lower-deploy", "almi-lower", lower, env, log, steps=cfg.deploy_steps)
    return compose(lower, upper, out, cfg)


def train_stage(
    cfg: AlmiTrainConfig, out: Path, name: str, task: str, previous: Path | None, env: dict, log, steps: int = 0
) -> Path:
    """One stage's run (``steps``: its env-step budget instead of the scale's steps and time)."""
    run = out / "stages" / name
    if (run / EVAL).is_file():
        log(f"{name}: done ({run})")
        return run
    t = stage_config(cfg, task, {k: None if v is None else str(v) for k, v in env.items()})
    t.init_from = None if previous is None else str(previous)
    if steps:
        t.steps, t.max_time_s = steps, 0.0
    log(f"{name}: training {task} into {run}")
    train_resuming(t, run, log)
    return run


def train_resuming(t: TrainConfig, run: Path, log=print) -> Path:
    """``run`` trained with ``t`` unless it is finished (holds an evaluation), resuming from its checkpoint if a
    killed process left one there."""
    if (run / EVAL).is_file():
        return run
    resume = (run / CHECKPOINT).is_dir()
    if resume:
        log(f"{run}: resuming from its checkpoint")
    train(t, run, resume=resume)
    return run


def compose(lower: Path, upper: Path | None, out: Path, cfg: AlmiTrainConfig) -> dict:
    """The whole-body run in ``out`` from an almi-lower and an almi-upper run (None: the upper body follows its
    reference open loop, a ``ReferencePolicy``); evaluated (``eval.json``)."""
    from .policies import ReferencePolicy

    lower_policy = _part(lower, "almi-lower")
    upper_policy = None if upper is None else _part(upper, "almi-upper")
    t = stage_config(cfg, "almi", {})
    t.video = cfg.video
    env = build_env(t, n_envs=1, evaluation=True)
    task, spec = env.task, policy_spec(env)
    n_lower, n_legs, n_upper = task.lower_observation_size, len(task.legs), task.upper_observation_size
    env.close()
    if upper_policy is None:  # the upper observation's reference columns, 6..14 (tasks.py)
        upper_policy = ReferencePolicy(n_upper, list(range(6, 6 + len(task.tracked))), t.env["upper_action_scale"])
    policy = CompositePolicy.of(
        [
            (lower_policy, (0, n_lower), (0, n_legs)),
            (upper_policy, (n_lower, spec["obs_size"]), (n_legs, spec["action_size"])),
        ]
    )
    write_policy_run(out, t, policy, {"stages": {"lower": str(lower), "upper": str(upper)}}, spec)
    return finish_run(out, t)


def _part(run: Path, task: str):
    """The policy of ``run``, refused (naming the file) unless it is a checkpoint of ``task``."""
    ckpt = load_checkpoint(Path(run) / CHECKPOINT)
    if ckpt.spec.get("task") != task:
        raise CheckpointError(f"{Path(run) / CHECKPOINT} holds a {ckpt.spec.get('task')} policy, not {task}")
    return ckpt.policy


def untrained_run(task: str, out: Path) -> Path:
    """A run directory holding a freshly initialized policy for ``task`` (benchmarks, tests)."""
    from embody.policies.actor_critic import ActorCritic

    cfg = resolve_config(task)
    env = build_env(cfg, n_envs=1)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    env.close()
    return write_policy_run(out, cfg, policy)
