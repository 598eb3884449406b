"""The MPA evaluation over replicate seeds, as jobs of the core runner (``embody.jobs``).

``embody mpa eval --seeds N [--workers W]``: each seed's whole pipeline (train, evaluate, report) is one
job writing OUT/seed<S>/ as a one-seed run would; its result is kept in OUT/jobs/ as it finishes, so an
interrupted study resumes, and ``embody mpa merge --from DIR ...`` pools folders run apart. The pooled
OUT/results.json and report.md recompute every table from the pooled episodes (sweep counts: means).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path

from embody.config import apply_overrides
from embody.files import write_atomic
from embody.jobs import Job, JobStore, merge_stores, run_jobs

from .config import MPAConfig, for_scale


def make_config(scale: str, seed: int, overrides: list[str]) -> MPAConfig:
    """The MPAConfig of ``scale`` and ``seed`` with ``--set`` ``overrides`` applied."""
    return apply_overrides(for_scale(scale, seed), texts=overrides)


def evaluate_seed(
    cfg: MPAConfig, out: Path, models: Path | None, command: str, log: Callable[[str], None], retrain_q: bool = False
) -> dict:
    """One seed: train unless ``models`` (or ``out``) holds trained models, evaluate, write results and report.
    ``retrain_q``: first fit a new Q model (``cfg.q``) on the trained models' counterfactual data (Q ablations)."""
    from embody.policies.value import train_q

    from .evaluate import run_evaluation
    from .policy import Models
    from .report import write_report
    from .train import has_models, load_models, q_targets, train_adapter_q, train_all

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    source = models or out
    if not has_models(source):
        train_all(cfg, out, log)
        source = out
    trained, cf = load_models(source)
    train_info = json.loads((source / "models" / "train.json").read_text())
    if retrain_q:
        trained = Models(trained.bc, trained.adapter, train_q(*q_targets(cf), cfg.q))
        train_info["q"] = {**trained.q.summary, "retrained": True}
    ev = run_evaluation(trained, cf, cfg, lambda sub: train_adapter_q(sub, cfg))
    result = {
        "command": command,
        "config": asdict(cfg),
        "train": train_info,
        "eval": ev,
        "time_s": round(time.perf_counter() - t0, 1),
    }
    write_atomic(out / "results.json", json.dumps(result, indent=2, default=float))
    log(f"mpa: {write_report(result, out)} ({result['time_s']:.0f} s)")
    return result


def _seed_job(
    scale: str,
    overrides: list[str],
    out: str,
    models: str | None,
    command: str,
    workers: int,
    retrain_q: bool,
    params: dict,
) -> dict:
    """A job: one seed's pipeline in OUT/seed<S>/ (module level: spawned workers import it)."""
    if workers > 1:  # processes share the cores (torch's sums then differ from a one-process run in low digits)
        import torch

        torch.set_num_threads(1)
    seed = params["seed"]
    result = evaluate_seed(
        make_config(scale, seed, overrides),
        Path(out) / f"seed{seed}",
        Path(models) if models else None,
        f"{command} (seed {seed})",
        lambda s: None,
        retrain_q,
    )
    return result  # the job store keeps it as JSON


def run_seeds(
    scale: str,
    overrides: list[str],
    seeds: list[int],
    out: Path,
    models: Path | None,
    workers: int,
    command: str,
    log: Callable[[str], None],
    retrain_q: bool = False,
) -> dict:
    """Evaluate ``seeds`` as resumable jobs in ``out/seed<S>`` (``workers`` processes), then pool them
    (``write_pooled``)."""
    fingerprint = {"scale": scale, "set": sorted(overrides), "models": str(models) if models else None}
    if retrain_q:
        fingerprint["retrain_q"] = True
    store = JobStore(out, fingerprint)
    jobs = [Job(f"seed{s}", {"seed": s}) for s in seeds]
    job = partial(_seed_job, scale, overrides, str(out), str(models) if models else None, command, workers, retrain_q)
    results = run_jobs(
        job, jobs, store, workers=workers, label="mpa seeds", log=log, metrics=lambda r: {"time_s": r["time_s"]}
    )
    return write_pooled([results[j.name] for j in jobs], out, command, log)


def merge(sources: list[Path], out: Path, log: Callable[[str], None]) -> dict:
    """Seeds of one configuration run in several folders (``eval --seeds``), pooled into ``out``."""
    _, results = merge_stores(sources)
    ordered = [results[k] for k in sorted(results, key=lambda name: int(name.removeprefix("seed")))]
    return write_pooled(ordered, out, f"embody mpa merge {' '.join(f'--from {s}' for s in sources)} --out {out}", log)


def write_pooled(results: list[dict], out: Path, command: str, log: Callable[[str], None]) -> dict:
    """Pool per-seed results into ``out/results.json`` and the report; returns the pooled results."""
    from .evaluate import pool_evaluations
    from .report import write_report

    seeds = [r["config"]["seed"] for r in results]
    pooled = {
        "command": command,
        "config": {**results[0]["config"], "seeds": seeds},
        "train": results[0]["train"],
        "eval": pool_evaluations([r["eval"] for r in results], results[0]["config"]["eval"]["bootstrap"]),
        "time_s": round(sum(r["time_s"] for r in results), 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.json", json.dumps(pooled, indent=2, default=float))
    log(f"mpa: {write_report(pooled, out)} (seeds {seeds}; {pooled['time_s']:.0f} s of seed runs)")
    return pooled
