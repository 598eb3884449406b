"""``embody primt study --scale tiny|paper``: return and reward quality against the feedback budget, per task and
teacher, over seeds, as resumable jobs of the core runner (``embody.jobs``).

Arms: ``true`` (SAC on the env's reward: the upper bound), ``scripted`` (B-Pref's teacher from the true reward,
no noise by default), ``scripted+foresight`` (the same with the scripted plan's foresight trajectories in the query
buffer), ``text``, ``visual`` and ``fused`` (the text judge, the visual judge, both fused: the information-limited
stand-ins on loopback, or the models at ``llm_url`` / ``vlm_url``), ``fused+hindsight`` (fused, with hindsight's
causal loss), ``fused+foresight+hindsight`` (also foresight trajectories in the query buffer; ``fused+foresight``
is a valid arm for the ablation). Each job trains one arm at one budget into OUT/runs/JOB/ and keeps its
evaluation and its last metrics row (feedback kept, the labels' agreement with the true reward, the reward model's
Spearman correlation with the true segment returns on fresh segments of the final policy's experience, the
queries that held a foresight segment) and the judge's counters. A folder's jobs share every setting that
changes a job's result; the seeds, tasks, arms and budgets only choose jobs, so a folder takes more of them later.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from embody.jobs import Job, JobStore, run_jobs

from .cli import TEACHERS

ARMS = (
    "true",
    "scripted",
    "scripted+foresight",
    "text",
    "visual",
    "fused",
    "fused+hindsight",
    "fused+foresight+hindsight",
)


@dataclass
class StudyConfig:
    """The study's settings (``for_scale`` gives tiny's and paper's); ``sets`` are TrainConfig overrides."""

    tasks: list[str] = field(default_factory=lambda: ["cartpole-swingup", "arm-reach"])
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    budgets: list[int] = field(default_factory=lambda: [100, 500])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    steps: int = 80_000
    envs: int = 16
    repeats: int = 3  # askings per pair, order swapped
    end_jitter: float = 0.0  # foresight's (``ForesightConfig.end_jitter``): where arm-reach's trajectories end
    llm_url: str | None = None  # None: the stand-in
    llm_model: str = "judge"
    vlm_url: str | None = None  # None: the stand-in
    vlm_model: str = "judge"
    sets: list[str] = field(
        default_factory=lambda: [
            "sac.learning_starts=2000",
            "preference.unsup_steps=9000",
            "preference.every=5000",
            "preference.per_session=50",
            "eval_episodes=20",
            "video=false",
            "max_time_s=0",
        ]
    )


def for_scale(scale: str) -> StudyConfig:
    """tiny: one task, one seed, a few hundred env steps and small networks; paper: all."""
    if scale == "paper":
        return StudyConfig()
    if scale != "tiny":
        raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
    return StudyConfig(
        tasks=["cartpole-swingup"],
        budgets=[16],
        seeds=[0],
        steps=800,
        envs=4,
        repeats=2,
        sets=[
            "sac.learning_starts=200",
            "preference.unsup_steps=200",
            "preference.every=200",
            "preference.per_session=8",
            "preference.segment=20",
            "preference.hidden=[16,16]",
            "sac.hidden=[32,32]",
            "sac.log_every=200",
            "eval_episodes=2",
            "video=false",
        ],
    )


def jobs(cfg: StudyConfig) -> list[Job]:
    """Per seed and task: the true-reward arm once, every other arm at every budget."""
    out = []
    for seed in cfg.seeds:
        for task in cfg.tasks:
            for arm in cfg.arms:
                for budget in [0] if arm == "true" else cfg.budgets:
                    name = f"seed{seed}-{task}-{arm}" + (f"-b{budget}" if arm != "true" else "")
                    out.append(Job(name, {"seed": seed, "task": task, "arm": arm, "budget": budget}))
    return out


def run_job(cfg: StudyConfig, out: Path, params: dict) -> dict:
    """Train one arm; its evaluation, last metrics row and judge counters."""
    from embody.train import resolve_config, train

    from .cli import Judges, judge_teacher

    seed, task, arm, budget = params["seed"], params["task"], params["arm"], params["budget"]
    sets = cfg.sets + ([] if arm == "true" else [f"preference.budget={budget}", f"preference.teacher={arm}"])
    tc = resolve_config(task, None, sets, algo="sac", n_envs=cfg.envs, steps=cfg.steps, seed=seed)
    run = out / "runs" / f"seed{seed}-{task}-{arm}-b{budget}"
    where = Judges(cfg.llm_url, cfg.llm_model, cfg.vlm_url, cfg.vlm_model, cfg.repeats, end_jitter=cfg.end_jitter)
    with judge_teacher(tc, arm, where) as teacher:
        summary = train(tc, run, teacher=teacher)
        judges = teacher.stats() if teacher else {}
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    keep = ("feedback", "label_agreement", "reward_accuracy", "reward_spearman", "foresight_queries")
    return params | {
        "return": summary["return_mean"],
        "return_fraction_of_max": summary["return_fraction_of_max"],
        "success_rate": summary.get("success_rate"),
        "env_steps": last["env_steps"],
        "time_s": last["time_s"],
        **{k: last.get(k) for k in keep},
        "judges": judges,
    }


def run_study(cfg: StudyConfig, out: Path, command: str, log=print) -> dict:
    """Run (or resume) the study's jobs in ``out``, then write the pooled results and report."""
    from .report import write

    for arm in cfg.arms:
        if arm not in (valid := ("true", *(t for t in TEACHERS if t != "person"))):
            raise ValueError(f"unknown arm {arm!r}; valid: {', '.join(valid)}")
    # what a job computes; the seeds, tasks, arms and budgets only choose the jobs, so a folder takes more of them
    choice = ("seeds", "tasks", "arms", "budgets")
    store = JobStore(out, {k: v for k, v in asdict(cfg).items() if k not in choice})
    results = run_jobs(partial(run_job, cfg, out), jobs(cfg), store, label="primt study", log=log)
    return write(list(results.values()), asdict(cfg), out, command, log)
