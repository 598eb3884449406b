"""``embody dva study --scale tiny|paper [--sim NAME]``: D.VA against its baselines at equal wall-clock, per task and
seed, as resumable jobs of the core runner (``embody.jobs``).

Arms (each trains for ``budget_s`` seconds of wall-clock into OUT/runs/JOB/, then is evaluated deterministically):

- ``dva``: SHAC whose actor reads the simulator's rendered frames, detached (D.VA);
- ``shac-state``: SHAC from the state (the upper bound);
- ``sac-pixels``: SAC with DrQ-v2's encoder and random shifts (the paper's main baseline);
- ``ppo-pixels``: PPO with the same encoder, its critic on the state;
- ``dagger``: the ``shac-state`` policy distilled into a pixel student with DAgger; its clock starts at the
  expert's training time (state→pixels distillation pays for its expert);
- cart-pole only, through the differentiable rasterizer (``raster.py``): ``dva-raster`` (detached, as D.VA) and
  ``dva-raster-through`` (the gradient also passes through the rendering) — the paper's ablation.

Each job runs in a fresh process, so that its peak memory (``peak_rss_mb``) is its own.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from embody.jobs import Job, JobStore, run_jobs

ARMS = ("shac-state", "dva", "sac-pixels", "ppo-pixels", "dagger", "dva-raster", "dva-raster-through")
RASTER_ARMS = ("dva-raster", "dva-raster-through")
CURVE_POINTS = 200  # rows of a learning curve kept per job


@dataclass
class StudyConfig:
    """The study's settings (``for_scale`` gives tiny's and paper's). ``task_sets``: TrainConfig overrides per task
    (every arm the same: the cart-pole adds dflex's quadratic cost, whose gradient SHAC needs hanging down)."""

    tasks: list[str] = field(default_factory=lambda: ["cartpole-swingup", "hopper"])
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    sim: str = "mujoco"
    budget_s: float = 300.0  # wall-clock of training per run
    pixels: int = 48
    frames: int = 3
    envs: int = 64  # SHAC, D.VA and PPO
    sac_envs: int = 8
    eval_episodes: int = 10
    dagger_iterations: int = 12
    dagger_steps: int = 40  # per env and iteration (the aggregated images stay within memory)
    dagger_envs: int = 16
    task_sets: dict[str, list[str]] = field(
        default_factory=lambda: {
            # SHAC's rates for the cart-pole: with the paper's (2e-3, 5e-4) its return plateaued (issue 24's note)
            "cartpole-swingup": ["env.reward_weights.quadratic=0.1", "shac.actor_lr=1e-2", "shac.critic_lr=1e-3"]
        }
    )
    sets: list[str] = field(
        default_factory=lambda: [
            "video=false",
            "checkpoint_every=1000000",
            "checkpoint_minutes=0",  # no saves inside the timed budget
            "shac.lr_schedule=constant",  # a wall-clock budget has no step count to decay over
            "sac.log_every=1000",  # the budget is checked at each metrics row
            "sac.learning_starts=1000",
        ]
    )


def for_scale(scale: str) -> StudyConfig:
    """tiny: the cart-pole, one seed, seconds per arm, small images; paper: both tasks, three seeds."""
    if scale == "paper":
        return StudyConfig()
    if scale != "tiny":
        raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
    return StudyConfig(
        tasks=["cartpole-swingup"],
        seeds=[0],
        budget_s=6.0,
        pixels=24,
        envs=8,
        sac_envs=4,
        eval_episodes=2,
        dagger_iterations=2,
        dagger_steps=16,
        dagger_envs=4,
        sets=[*StudyConfig().sets, "shac.horizon=8", "sac.learning_starts=64", "sac.log_every=32", "ppo.n_steps=8"],
        task_sets={"cartpole-swingup": [*StudyConfig().task_sets["cartpole-swingup"], "env.max_episode_steps=50"]},
    )


def jobs(cfg: StudyConfig) -> list[Job]:
    """Per seed and task, every arm (the raster arms on the cart-pole only); ``shac-state`` before ``dagger``,
    which distills it."""
    out = []
    for seed in cfg.seeds:
        for task in cfg.tasks:
            for arm in cfg.arms:
                if arm in RASTER_ARMS and task != "cartpole-swingup":
                    continue
                out.append(Job(f"seed{seed}-{task}-{arm}", {"seed": seed, "task": task, "arm": arm}))
    return out


def arm_config(cfg: StudyConfig, task: str, arm: str, seed: int):
    """The TrainConfig of one arm's run (dagger: of its pixel student's env)."""
    from embody.train import resolve_config

    sets = [*cfg.sets, *cfg.task_sets.get(task, []), f"max_time_s={cfg.budget_s}", f"eval_episodes={cfg.eval_episodes}"]
    if arm != "shac-state":
        sets += [f"pixels={cfg.pixels}", f"frames={cfg.frames}"]
    if arm in RASTER_ARMS:
        sets.append("pixel_source=cartpole-raster")
    if arm == "dva-raster-through":
        sets.append("shac.render_gradient=true")
    if arm == "sac-pixels":
        sets.append("torch_threads=2")  # its updates are the bottleneck, and the simulator idles meanwhile
    algo = {"sac-pixels": "sac", "ppo-pixels": "ppo"}.get(arm, "shac")
    envs = cfg.sac_envs if arm == "sac-pixels" else cfg.dagger_envs if arm == "dagger" else cfg.envs
    return resolve_config(task, None, sets, algo=algo, n_envs=envs, steps=10**12, seed=seed, sim=cfg.sim)


def run_job(cfg: StudyConfig, out: Path, params: dict) -> dict:
    """One arm in a fresh process (its own peak memory)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(train_arm, cfg, str(out), params).result()


def train_arm(cfg: StudyConfig, out: str, params: dict) -> dict:
    """Train and evaluate one arm; its evaluation, learning curve, gradient statistics and peak memory."""
    import numpy as np

    seed, task, arm = params["seed"], params["task"], params["arm"]
    run = Path(out) / "runs" / f"seed{seed}-{task}-{arm}"
    tc = arm_config(cfg, task, arm, seed)
    start = time.perf_counter()
    if arm == "dagger":
        summary, rows = distill_arm(cfg, tc, run, Path(out) / "runs" / f"seed{seed}-{task}-shac-state")
    else:
        from embody.train import train

        summary = train(tc, run)
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    grads = [r["actor_grad_norm"] for r in rows if "actor_grad_norm" in r]
    last = rows[-1] if rows else {}
    keep = np.unique(np.linspace(0, len(rows) - 1, min(len(rows), CURVE_POINTS)).astype(int)) if rows else []
    return params | {
        "return": summary["return_mean"],
        "return_std": summary["return_std"],
        "env_steps": last.get("env_steps", 0),
        "train_s": last.get("time_s", 0.0),
        "wall_s": time.perf_counter() - start,
        "steps_per_s": last.get("env_steps", 0) / max(last.get("time_s", 0.0), 1e-9),
        "grad_norm_mean": float(np.mean(grads)) if grads else None,
        "grad_norm_std": float(np.std(grads)) if grads else None,
        "skipped_updates": last.get("skipped_updates"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "curve": [
            {k: rows[i].get(k) for k in ("time_s", "env_steps", "episode_return", "actor_grad_norm")} for i in keep
        ],
    }


def distill_arm(cfg: StudyConfig, tc, run: Path, expert_run: Path) -> tuple[dict, list[dict]]:
    """DAgger from the ``shac-state`` run's policy into a pixel student (D.VA's actor network, unsquashed: it
    regresses the expert's bounded actions), for ``budget_s`` or ``dagger_iterations``."""
    from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
    from embody.policies.bc import BCConfig
    from embody.policies.distill import DAggerConfig, distill
    from embody.runs import build_env, evaluate_run, load_run_checkpoint, write_eval, write_policy_run

    if not (expert_run / "eval.json").is_file():
        raise RuntimeError(f"the dagger arm distills {expert_run}, which has not finished (run arm shac-state first)")
    expert = load_run_checkpoint(expert_run).policy.eval()
    expert_rows = [json.loads(line) for line in (expert_run / "metrics.jsonl").read_text().splitlines()]
    t0, steps0 = expert_rows[-1]["time_s"], expert_rows[-1]["env_steps"]
    env = build_env(tc)
    s = tc.shac
    net = ActorCriticConfig(s.actor_hidden, s.critic_hidden, s.activation, s.init_std, pixels=list(env.pixel_shape))
    student = ActorCritic(env.observation_size, env.action_size, env.privileged_size, net)
    state = slice(env.observation_size, env.observation_size + env.state_observation_size)
    rows: list[dict] = []
    start = time.perf_counter()

    def on_iteration(m: dict) -> bool:
        rows.append(
            {
                "time_s": t0 + time.perf_counter() - start,
                "env_steps": steps0 + m["iteration"] * cfg.dagger_steps * env.n_envs,
                "episode_return": m["rollout_return"],
            }
        )
        return time.perf_counter() - start >= cfg.budget_s

    config = DAggerConfig(
        iterations=cfg.dagger_iterations,
        steps_per_iteration=cfg.dagger_steps,
        bc=BCConfig(epochs=4, batch_size=256, seed=tc.seed),
        seed=tc.seed,
    )
    distill(env, lambda x: expert.act(x[:, state]), student, config, progress_cb=on_iteration)
    env.close()
    write_policy_run(run, tc, student, {"expert": str(expert_run)})
    summary = evaluate_run(run, episodes=tc.eval_episodes)
    write_eval(run, summary)
    return summary, rows


def run_study(cfg: StudyConfig, out: Path, command: str, log=print) -> dict:
    """Run (or resume) the study's jobs in ``out``, then write the pooled results and report."""
    from embody.sims import SIMULATORS
    from embody.sims.base import check_capabilities

    from .report import write

    for arm in cfg.arms:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; valid: {', '.join(ARMS)}")
    check_capabilities(cfg.sim, SIMULATORS.get(cfg.sim).capabilities, "dva study", {"differentiable"})
    store = JobStore(out, asdict(replace(cfg, seeds=[])))
    results = run_jobs(partial(run_job, cfg, out), jobs(cfg), store, label="dva study", log=log)
    return write(list(results.values()), asdict(cfg), out, command, log)
