"""``embody almi study``: ALMI against the obvious alternatives, same budget, several seeds; then ``almi eval``.

Methods (each a whole-body ``almi`` run in ``OUT/<method>/seed<S>``, skipped when it holds an ``eval.json``, so an
interrupted study resumes and seeds can run in separate folders and be evaluated together):

* ``almi``: the alternation, ``rounds`` × (lower stage + upper stage);
* ``whole-body``: one PPO policy over all 21 joints with both rewards (the paper's main baseline);
* ``no-curricula``: the alternation with clips at full amplitude from the whole library;
* ``open-loop``: the lower policy trained against open-loop clips only for the whole budget, no alternation;
  the upper body follows its reference open loop.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from embody.runs import EVAL
from embody.train import TrainConfig, train

from .evaluate import evaluate_methods, write_report
from .train import AlmiTrainConfig, compose, speed_limit_env, stage_config, train_almi, train_stage

METHODS = ("almi", "whole-body", "no-curricula", "open-loop")


def run_study(cfg: AlmiTrainConfig, seeds: list[int], out: Path, command: str, log=print) -> dict:
    """Every method × seed (skipping finished runs), then the evaluation on held-out motions into ``out``."""
    for seed in seeds:
        c = replace(cfg, seed=seed)
        for method in METHODS:
            run = out / method / f"seed{seed}"
            if (run / EVAL).is_file():
                log(f"{method} seed {seed}: done ({run})")
                continue
            log(f"{method} seed {seed}: training into {run}")
            _train_method(method, c, run, log)
    runs = [out / m / f"seed{s}" for m in METHODS for s in seeds]
    methods = evaluate_methods(runs, cfg.eval_episodes)
    write_report(methods, out, command)
    return methods


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
            train(t, run)
            return
        base = _resumed(t, run / "stages" / "whole-body")
        t = stage_config(cfg, task, speed_limit_env(cfg.deploy_steps))
        t.steps, t.max_time_s, t.init_from = cfg.deploy_steps, 0.0, str(base)
        train(t, run)
    else:
        lower = _resumed(t, run / "stages" / "lower")
        if cfg.deploy_steps:
            env = speed_limit_env(cfg.deploy_steps)
            lower = train_stage(cfg, run, "lower-deploy", "almi-lower", lower, env, log, steps=cfg.deploy_steps)
        compose(lower, None, run, cfg)


def _resumed(t: TrainConfig, run: Path) -> Path:
    """``run`` trained with ``t`` unless it is finished (holds an evaluation) already."""
    if not (run / EVAL).is_file():
        train(t, run)
    return run
