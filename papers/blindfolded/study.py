"""The study: held-out success of cloned experts vs. the number of demonstrated tasks m, per information level.

For each replicate seed and level: one expert demonstration on each of max(m) training tasks (peg: several
per hole, only the successful ones kept; saved, then reloaded through the validating loader); for each m,
a history-conditioned BC policy (the domain's ``train`` when it has one) trained on the demonstrations
of the first m tasks, evaluated on its training tasks and on the held-out tasks. Then: 95%
bootstrap intervals, the generalization gap (train − held-out success) fitted against sqrt(I/m) by
least squares, a plain verdict, results.json, report.md, success_vs_m.png and gap_vs_sqrt_I_over_m.png.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path

import numpy as np

from embody.files import write_atomic
from embody.jobs import JobStore, grid, pool, read_store, run_jobs
from embody.stats import bootstrap_ci

from . import demos as demo_io
from .config import StudyConfig
from .history_bc import train_history_bc


def get_domain(cfg: StudyConfig):
    """The domain object for ``cfg.domain`` (a second domain adds a branch here and a sub-config)."""
    if cfg.domain == "maze":
        from .maze import MazeDomain

        return MazeDomain(cfg.maze)
    if cfg.domain == "peg":
        from .peg import PegDomain

        return PegDomain(cfg.peg)
    raise ValueError(f"unknown domain {cfg.domain!r}; valid: maze, peg")


def first_tasks(demos: demo_io.Demos, m: int) -> demo_io.Demos | None:
    """The demonstrations of the first ``m`` tasks: the first m episodes, or, when the domain kept only
    successful expert episodes (``meta.episode_tasks``: each episode's task index), those of tasks < m
    (None when the expert succeeded on none of them)."""
    ep_tasks = demos.meta.get("episode_tasks")
    if ep_tasks is None:
        return demos.first(m)
    k = sum(1 for t in ep_tasks if t < m)
    if k == 0:
        return None
    d = demos.first(k)
    d.meta["tasks"], d.meta["episode_tasks"] = list(demos.meta["tasks"])[:m], list(ep_tasks)[:k]
    return d


def expert_stats(domain, level: str, tasks) -> dict:
    """The expert of ``level`` on ``tasks``: success, steps (mean / max), from the domain."""
    if hasattr(domain, "expert_stats"):
        return domain.expert_stats(level, tasks)
    eps = domain.expert_episodes(level, tasks)
    return {
        "success": float(np.mean([e.success for e in eps])),
        "steps_mean": float(np.mean([len(e.action) for e in eps])),
        "steps_max": int(max(len(e.action) for e in eps)),
    }


def demos_path(out: Path, level: str, seed: int) -> Path:
    """Where the demonstrations of ``level`` and ``seed`` live under ``out``."""
    return out / "demos" / f"{level}_seed{seed}.npz"


def collect(
    cfg: StudyConfig,
    out: Path,
    seed: int,
    levels: list[str] | None = None,
    m: int | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Path]:
    """Expert demonstrations of every level on the replicate's first ``m`` (default max m) training tasks."""
    domain = get_domain(cfg)
    m = m or max(cfg.m_values)
    tasks = cfg.train_tasks(seed, m)
    paths = {}
    for level in levels or domain.levels():
        bits = domain.information(level, cfg.heldout_tasks())
        d = domain.collect(level, tasks, bits)
        paths[level] = demo_io.save(d, demos_path(out, level, seed))
        log(
            f"blindfolded: {level}: {m} demonstrations, {int(d.episode_lengths.sum())} steps "
            f"(mean {d.episode_lengths.mean():.1f}), I = {bits:.2f} bits -> {paths[level]}"
        )
    return paths


def train_on(cfg: StudyConfig, domain, demos: demo_io.Demos, seed: int):
    """A learner trained on ``demos``: the domain's own (peg: the GRU student) or the history BC."""
    if hasattr(domain, "train"):  # the domain's own learner (peg: the continuous GRU student)
        return domain.train(demos, seed)
    feats = [domain.features(obs) for obs, _ in demos.episodes()]
    acts = [a.astype(np.int64) for _, a in demos.episodes()]
    bc = type(cfg.bc)(**{**asdict(cfg.bc), "seed": seed})
    return train_history_bc(feats, acts, domain.n_actions, bc)


def evaluate_cell(cfg: StudyConfig, domain, policy, train_tasks: list[int], seed: int) -> dict:
    """One cell's results: ``train_success``, ``heldout_success``, ``heldout_steps`` (all and successful only), the
    per-episode outcomes and, for peg, ``heldout_peak_force`` [N]."""
    n = max(cfg.train_eval_episodes, len(train_tasks))
    cycled = [train_tasks[i % len(train_tasks)] for i in range(n)]
    tr = domain.evaluate(policy, cycled, seed=seed * 7 + 1)
    ho = domain.evaluate(policy, cfg.heldout_tasks(), seed=seed * 7 + 2)
    cell = {
        "train_success": float(tr.success.mean()),
        "heldout_success": float(ho.success.mean()),
        "heldout_steps": float(ho.steps.mean()),
        "heldout_steps_success": float(ho.steps[ho.success].mean()) if ho.success.any() else None,
        "train_outcomes": tr.success.astype(int).tolist(),
        "heldout_outcomes": ho.success.astype(int).tolist(),
    }
    if hasattr(ho, "peak_force"):  # peg: the peak wrist force of each held-out episode [N]
        cell["heldout_peak_force"] = ho.peak_force.tolist()
    return cell


def fit_line(x, y) -> dict:
    """Least squares y = slope·x + intercept and its R² (nan when x or y does not vary)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 2 or np.ptp(x) == 0:
        return {
            "slope": float("nan"),
            "intercept": float(np.mean(y)) if len(y) else float("nan"),
            "r2": float("nan"),
            "n": int(len(x)),
        }
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return {"slope": float(slope), "intercept": float(intercept), "r2": r2, "n": int(len(x))}


def _pooled(values, reduce=np.mean) -> float | None:
    """``reduce`` of the values that exist (None entries: no successful episode), None when none does."""
    vals = [v for v in values if v is not None]
    return float(reduce(vals)) if vals else None


def summarize(cfg: StudyConfig, runs: list[dict], info: dict[str, float]) -> dict:
    """Per (level, m): success means over seeds, pooled-episode bootstrap CIs, gap; the fit; the verdict."""
    table = []
    for level in info:
        for m in cfg.m_values:
            rs = [r for r in runs if r["level"] == level and r["m"] == m]
            if not rs:
                continue
            ho = [o for r in rs for o in r["heldout_outcomes"]]
            tr = [o for r in rs for o in r["train_outcomes"]]
            table.append(
                {
                    "level": level,
                    "I_bits": info[level],
                    "m": m,
                    "seeds": len(rs),
                    "heldout_success": float(np.mean([r["heldout_success"] for r in rs])),
                    "heldout_ci95": bootstrap_ci(ho, cfg.bootstrap, cfg.seed),
                    "train_success": float(np.mean([r["train_success"] for r in rs])),
                    "train_ci95": bootstrap_ci(tr, cfg.bootstrap, cfg.seed + 1),
                    "gap": float(np.mean([r["train_success"] - r["heldout_success"] for r in rs])),
                    "heldout_steps": float(np.mean([r["heldout_steps"] for r in rs])),
                    "heldout_steps_success": _pooled([r["heldout_steps_success"] for r in rs]),
                    "heldout_peak_force": _pooled(
                        [np.mean(r["heldout_peak_force"]) for r in rs if "heldout_peak_force" in r]
                    ),
                    "heldout_peak_force_max": _pooled(
                        [np.max(r["heldout_peak_force"]) for r in rs if "heldout_peak_force" in r], np.max
                    ),
                    "sqrt_I_over_m": math.sqrt(info[level] / m),
                }
            )
    fit = fit_line([c["sqrt_I_over_m"] for c in table], [c["gap"] for c in table])
    # the claim: cloning a blindfolded expert generalizes better, especially with few demonstrated tasks
    small = [m for m in cfg.m_values if m <= float(np.median(cfg.m_values))]

    def small_m_success(level):
        vals = [c["heldout_success"] for c in table if c["level"] == level and c["m"] in small]
        return float(np.mean(vals)) if vals else float("nan")

    informed = small_m_success("informed")
    per_level = {lv: small_m_success(lv) - informed for lv in info if lv != "informed"}
    better = [lv for lv, d in per_level.items() if d > 0]
    fits = bool(fit["slope"] > 0 and fit["r2"] >= 0.5)
    verdict = (
        "holds"
        if better and fits and len(better) == len(per_level)
        else "partly holds"
        if better or fits
        else "does not hold"
    )
    diffs = ", ".join(f"{lv} {d:+.2f}" for lv, d in per_level.items())
    text = (
        f"Held-out success at m <= {max(small)}, blindfolded minus informed clone: {diffs} "
        f"({'better for ' + ', '.join(better) if better else 'no blindfolded clone better'}). The generalization "
        f"gap vs. sqrt(I/m): slope {fit['slope']:.3f}, R² {fit['r2']:.2f} "
        f"({'a positive fit with R² >= 0.5' if fits else 'not a positive fit with R² >= 0.5'}). "
        f"The claim {verdict} at this scale ({cfg.scale}, {cfg.seeds} seed(s), {cfg.heldout} held-out tasks)."
    )
    return {
        "table": table,
        "fit": fit,
        "small_m": small,
        "blindfolded_minus_informed_small_m": per_level,
        "verdict": verdict,
        "verdict_text": text,
    }


def run_level(cfg: StudyConfig, out: Path, seed: int, level: str) -> list[dict]:
    """One replicate and level: the expert's demonstrations, then a clone per m, trained and evaluated."""
    import torch

    torch.set_num_threads(cfg.threads)
    domain = get_domain(cfg)
    bits = domain.information(level, cfg.heldout_tasks())
    demos = demo_io.load(collect(cfg, out, seed, [level])[level], domain.obs_spec)
    cells = []
    for m in cfg.m_values:
        policy, bc_info = train_on(cfg, domain, first_tasks(demos, m), seed)
        cell = evaluate_cell(cfg, domain, policy, cfg.train_tasks(seed, m), seed)
        cells.append({"level": level, "m": m, "seed": seed, "I_bits": bits, "bc": bc_info, **cell})
    return cells


def level_job(cfg: StudyConfig, out: Path, params: dict) -> list[dict]:
    """The job of one (seed, level): ``run_level``'s cells (a module-level function: spawned workers import it)."""
    return run_level(cfg, out, params["seed"], params["level"])


def fingerprint(config: dict) -> dict:
    """What a (seed, level) job's cells depend on: the study config (``asdict``) less the seeds (each job
    carries its own; the BC seed is set to it), parallelism and the sub-config of the domain not studied."""
    other = {"maze", "peg"} - {config["domain"]}
    fp = {k: v for k, v in config.items() if k not in {"seed", "seeds", "workers", "threads", *other}}
    if isinstance(fp.get("bc"), dict):
        fp["bc"] = {k: v for k, v in fp["bc"].items() if k != "seed"}  # train_on uses the replicate's seed
    return fp


def run_study(cfg: StudyConfig, out: str | Path, log: Callable[[str], None] = print) -> dict:
    """The whole study in ``out``; each (seed, level) job's cells kept in ``out/jobs`` as it finishes
    (embody.jobs), so rerunning an interrupted study on the same ``out`` resumes it."""
    import torch

    torch.set_num_threads(cfg.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = JobStore(out, fingerprint(asdict(cfg)))  # refuses a folder of another configuration before any work
    t0 = time.perf_counter()
    domain = get_domain(cfg)
    levels = domain.levels()
    heldout = cfg.heldout_tasks()
    info = {lv: domain.information(lv, heldout) for lv in levels}
    experts = {}
    for lv in levels:  # the experts on the held-out tasks: their time and success
        experts[lv] = {**expert_stats(domain, lv, heldout), "I_bits": info[lv]}
    rnd = domain.evaluate(None, heldout, seed=cfg.seed)
    baseline = {"heldout_success": float(rnd.success.mean()), "heldout_steps": float(rnd.steps.mean())}
    log(
        "blindfolded: I (bits) "
        + ", ".join(f"{k} {v:.2f}" for k, v in info.items())
        + f"; random policy held-out success {baseline['heldout_success']:.2f}"
    )
    jobs = grid({"level": levels}, [cfg.seed + r for r in range(cfg.seeds)])
    cells = run_jobs(
        partial(level_job, cfg, out),
        jobs,
        store,
        workers=cfg.workers,
        label="blindfolded study",
        log=log,
        metrics=lambda c: {"heldout": c[-1]["heldout_success"], "train": c[-1]["train_success"]},
    )
    runs = [cell for job in jobs for cell in cells[job.name]]  # (seed, level, m) order, however they finished
    summary = summarize(cfg, runs, info)
    result = {
        "config": asdict(cfg),
        "information_bits": info,
        "experts": experts,
        "random_policy": baseline,
        "summary": summary,
        "runs": runs,
        "time_s": round(time.perf_counter() - t0, 1),
    }
    write_atomic(out / "results.json", json.dumps(result, indent=2, default=float))
    write_report(result, out)
    log(f"blindfolded: {summary['verdict_text']}")
    log(f"blindfolded: {out / 'report.md'} ({result['time_s']:.0f} s)")
    return result


def _study_runs(src: Path, result: dict) -> tuple[dict, dict[str, list[dict]]]:
    """A study folder's fingerprint and cells by job name: from its ``jobs/`` (embody.jobs), or, for a study
    run before those existed, from its results.json."""
    if (src / "jobs").is_dir():
        return read_store(src)
    cells: dict[str, list[dict]] = {}
    for run in result["runs"]:
        cells.setdefault(f"seed{run['seed']}-{run['level']}", []).append(run)
    return fingerprint(result["config"]), cells


def merge_studies(sources: list[str | Path], out: str | Path, log: Callable[[str], None] = print) -> dict:
    """One study from several runs of the same configuration on different seeds (e.g. one seed per machine
    or per evening): their runs pooled, summarized and reported as one (the experts and the random policy
    from the first). Refuses runs of another configuration (seeds and parallelism aside) or overlapping seeds."""
    from .config import for_scale

    results = []
    for src in sources:
        path = Path(src) / "results.json"
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a study's results ({e})") from None
    first = results[0]
    _, pooled = pool([(str(src), *_study_runs(Path(src), r)) for src, r in zip(sources, results)])
    c = first["config"]
    levels = list(first["information_bits"])
    runs = sorted(
        (run for cells in pooled.values() for run in cells),  # the order run_study gives its runs
        key=lambda r: (r["seed"], levels.index(r["level"]), c["m_values"].index(r["m"])),
    )
    seen = sorted({run["seed"] for run in runs})
    cfg = for_scale(c["scale"], min(seen), c["domain"])
    cfg.seeds, cfg.m_values, cfg.heldout, cfg.bootstrap = len(seen), c["m_values"], c["heldout"], c["bootstrap"]
    summary = summarize(cfg, runs, first["information_bits"])
    result = {
        **first,
        "config": {**c, "seed": min(seen), "seeds": len(seen)},
        "summary": summary,
        "runs": runs,
        "time_s": round(sum(r["time_s"] for r in results), 1),
        "merged_from": [str(s) for s in sources],
    }
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.json", json.dumps(result, indent=2, default=float))
    write_report(result, out)
    log(f"blindfolded: {summary['verdict_text']}")
    log(f"blindfolded: {out / 'report.md'} ({len(sources)} runs, seeds {seen})")
    return result


def _steps_force(c: dict | None) -> str:
    if c is None or c.get("heldout_peak_force") is None:
        return "-"
    steps = "-" if c.get("heldout_steps_success") is None else f"{c['heldout_steps_success']:.0f}"
    return f"{steps} / {c['heldout_peak_force']:.1f} ({c['heldout_peak_force_max']:.1f})"


def _fmt_ci(p: float, ci) -> str:
    return f"{p:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def write_report(result: dict, out: Path) -> Path:
    """Write ``report.md`` (and its figures) from the study's results into ``out``; returns its path."""
    cfg, summ = result["config"], result["summary"]
    ms = cfg["m_values"]
    table = {(c["level"], c["m"]): c for c in summ["table"]}
    levels = list(result["information_bits"])
    demos_text = "one expert demonstration per training task"
    if cfg["domain"] == "peg":
        demos_text = (
            f"{cfg['peg']['demos_per_task']} expert episodes per training hole, only the successful ones "
            f"cloned; {cfg['peg']['max_steps']}-step episodes"
        )
    lines = [
        f"# Blindfolded experts — {cfg['domain']} study ({cfg['scale']} scale)",
        "",
        f"{cfg['seeds']} seed(s) from {cfg['seed']}; {cfg['heldout']} held-out tasks; {demos_text}; "
        f"history-conditioned GRU BC. Time: {result['time_s']:.0f} s"
        + (f" in all, pooled from {', '.join(result['merged_from'])}." if "merged_from" in result else "."),
        "",
        "## Held-out success rate (mean over seeds; 95% bootstrap CI over pooled episodes)",
        "",
        "| level | I (bits) | " + " | ".join(f"m={m}" for m in ms) + " |",
        "|---|---|" + "---|" * len(ms),
    ]
    for lv in levels:
        cells = [
            _fmt_ci(table[lv, m]["heldout_success"], table[lv, m]["heldout_ci95"]) if (lv, m) in table else "-"
            for m in ms
        ]
        lines.append(f"| {lv} | {result['information_bits'][lv]:.2f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Training-task success / generalization gap (train − held-out)",
        "",
        "| level | " + " | ".join(f"m={m}" for m in ms) + " |",
        "|---|" + "---|" * len(ms),
    ]
    for lv in levels:
        cells = [
            f"{table[lv, m]['train_success']:.2f} / {table[lv, m]['gap']:+.2f}" if (lv, m) in table else "-" for m in ms
        ]
        lines.append(f"| {lv} | " + " | ".join(cells) + " |")
    if any(c.get("heldout_peak_force") is not None for c in summ["table"]):
        lines += [
            "",
            "## Held-out episodes: steps to insert (successes) / mean peak wrist force [N] (max)",
            "",
            "| level | " + " | ".join(f"m={m}" for m in ms) + " |",
            "|---|" + "---|" * len(ms),
        ]
        for lv in levels:
            lines.append(f"| {lv} | " + " | ".join(_steps_force(table.get((lv, m))) for m in ms) + " |")
    lines += [
        "",
        "## Experts on the held-out tasks",
        "",
        "| level | I (bits) | success | mean steps | max steps |",
        "|---|---|---|---|---|",
    ]
    for lv, e in result["experts"].items():
        force = f" (peak wrist force {e['peak_force_max']:.1f} N)" if "peak_force_max" in e else ""
        lines.append(
            f"| {lv} | {e['I_bits']:.2f} | {e['success']:.2f}{force} | {e['steps_mean']:.1f} | {e['steps_max']} |"
        )
    rp = result["random_policy"]
    fit = summ["fit"]
    lines += [
        "",
        f"Uniformly random policy: held-out success {rp['heldout_success']:.2f}, mean steps {rp['heldout_steps']:.1f}.",
        "",
        "## Generalization gap vs. sqrt(I/m)",
        "",
        f"Least squares over the {fit['n']} (level, m) cells: gap = {fit['slope']:.3f} · sqrt(I/m) "
        f"{fit['intercept']:+.3f}, R² = {fit['r2']:.2f}.",
        "",
        "## Verdict",
        "",
        summ["verdict_text"],
        "",
        "Plots: success_vs_m.png, gap_vs_sqrt_I_over_m.png; every run in results.json.",
        "",
    ]
    path = write_atomic(out / "report.md", "\n".join(lines))
    _plots(result, out)
    return path


def _plots(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ, info = result["summary"], result["information_bits"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for lv in info:
        cs = sorted((c for c in summ["table"] if c["level"] == lv), key=lambda c: c["m"])
        ms = [c["m"] for c in cs]
        ys = np.array([c["heldout_success"] for c in cs])
        lo = np.array([c["heldout_ci95"][0] for c in cs])
        hi = np.array([c["heldout_ci95"][1] for c in cs])
        ax.plot(ms, ys, marker="o", label=f"{lv} (I={info[lv]:.2f} bits)")
        ax.fill_between(ms, lo, hi, alpha=0.15)
    ax.axhline(result["random_policy"]["heldout_success"], color="grey", ls=":", label="random policy")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("demonstrated tasks m")
    ax.set_ylabel("held-out success rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Cloned experts on held-out {result['config']['domain']} tasks")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "success_vs_m.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    for lv in info:
        cs = [c for c in summ["table"] if c["level"] == lv]
        ax.scatter([c["sqrt_I_over_m"] for c in cs], [c["gap"] for c in cs], label=lv)
    fit = summ["fit"]
    xs = np.array([c["sqrt_I_over_m"] for c in summ["table"]])
    if len(xs) and np.isfinite(fit["slope"]):
        grid = np.linspace(0, xs.max(), 20)
        ax.plot(grid, fit["slope"] * grid + fit["intercept"], "k--", label=f"fit, R²={fit['r2']:.2f}")
    ax.set_xlabel("sqrt(I / m)  [sqrt(bits)]")
    ax.set_ylabel("generalization gap (train − held-out success)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "gap_vs_sqrt_I_over_m.png", dpi=120)
    plt.close(fig)
