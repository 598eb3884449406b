"""``embody almi study``: ALMI against the obvious alternatives, same budget, several seeds; then ``almi eval``.

Each method × seed is a job of ``embody.jobs``: its whole-body ``almi`` run in ``OUT/<method>/seed<S>`` (trained
unless it holds an ``eval.json``), evaluated on held-out motions into ``OUT/jobs/seed<S>-<method>.json``. The
report covers every job in OUT, so seeds run in other sessions, processes or machines (``--ray-address``) pool, and
the runs themselves need not be kept once their job file is written. Methods:

* ``almi``: the alternation, ``rounds`` × (lower stage + upper stage);
* ``whole-body``: one PPO policy over all 21 joints with both rewards (the paper's main baseline);
* ``no-curricula``: the alternation with clips at full amplitude from the whole library;
* ``open-loop``: the lower policy trained against open-loop clips only for the whole budget, no alternation;
  the upper body follows its reference open loop.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

from embody.jobs import Job, JobStore, read_store, run_jobs
from embody.runs import EVAL, MetricsLog

from .evaluate import evaluate_almi_run, summarize, write_report
from .train import AlmiTrainConfig, compose, speed_limit_env, stage_config, train_almi, train_resuming, train_stage

METHODS = ("almi", "whole-body", "no-curricula", "open-loop")


def run_study(cfg: AlmiTrainConfig, seeds: list[int], out: Path, command: str, log=print) -> dict:
    """Every method × seed as a job in ``out/jobs`` (trained unless its run is finished, then evaluated on held-out
    motions), then the report over every job the folder holds (seeds run apart pool there)."""
    fingerprint = {k: v for k, v in asdict(cfg).items() if k != "seed"}
    jobs = [Job(f"seed{s}-{m}", {"seed": s, "method": m}) for s in seeds for m in METHODS]
    run_jobs(partial(run_job, cfg, out, log), jobs, JobStore(out, fingerprint), label="almi study", log=log)
    done = read_store(out)[1].values()
    methods = summarize(sorted(done, key=lambda r: METHODS.index(Path(r["run"]).parent.name)))
    write_report(methods, out, command)
    return methods


def run_job(cfg: AlmiTrainConfig, out: Path, log, params: dict) -> dict:
    """One method × seed: its run in ``out/<method>/seed<S>`` (kept if finished) and its held-out outcomes."""
    method, seed = params["method"], params["seed"]
    run = out / method / f"seed{seed}"
    if (run / EVAL).is_file():
        log(f"{method} seed {seed}: trained already ({run})")
    else:
        log(f"{method} seed {seed}: training into {run}")
        _train_method(method, replace(cfg, seed=seed), run, log)
    return {"run": str(run), "env_steps": trained_steps(run), **evaluate_almi_run(run, cfg.eval_episodes)}


def trained_steps(run: Path) -> int:
    """Env steps every training run under ``run`` (its stages included) took, for the report: equal under a step
    budget (the paper scale's), what the minutes bought under a wall-clock one
    (``AlmiTrainConfig.stage_time_s``)."""
    logs = (MetricsLog(metrics.parent).rows() for metrics in run.rglob("metrics.jsonl"))
    return sum(rows[-1]["env_steps"] for rows in logs if rows)


def _train_method(method: str, cfg: AlmiTrainConfig, run: Path, log) -> None:
    stages = 2 * cfg.rounds  # the alternation's budget, spent by the others on one policy
    if method in ("almi", "no-curricula"):
        train_almi(replace(cfg, curricula=method == "almi"), run, log)
        return
    task = "almi" if method == "whole-body" else "almi-lower"
    t = stage_config(cfg, task, {})
    t.steps, t.max_time_s = cfg.stage_steps * stages, cfg.stage_time_s * stages
    if method == "whole-body":
        if not cfg.deploy_steps:
            train_resuming(t, run, log)
            return
        base = train_resuming(t, run / "stages" / "whole-body", log)
        t = stage_config(cfg, task, speed_limit_env(cfg.deploy_steps))
        t.steps, t.max_time_s, t.init_from = cfg.deploy_steps, 0.0, str(base)
        train_resuming(t, run, log)
    else:
        lower = train_resuming(t, run / "stages" / "lower", log)
        if cfg.deploy_steps:
            env = speed_limit_env(cfg.deploy_steps)
            lower = train_stage(cfg, run, "lower-deploy", "almi-lower", lower, env, log, steps=cfg.deploy_steps)
        compose(lower, None, run, cfg)
