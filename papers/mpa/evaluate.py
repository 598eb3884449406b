"""Closed-loop evaluation of the three agents in three settings, with fixed seeds and 95 % CIs,
plus the sweeps: driving score vs counterfactual-data size and vs K.

Driving score (per episode, in [0, 1]; a simplified NAVSIM/nuPlan-style score): multiplicative
gates times a progress term,

    score = 1[no collision] · 1[never off road] · min(1, progress_m / reference_m)

with reference_m = the ego's cruise target speed × the episode's allotted time (what an
unobstructed ego would cover). Collision rate is the fraction of episodes with a collision;
progress is metres along the road. CIs: percentile bootstrap over episodes (fixed seed).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from embody.progress import Progress
from embody.sims.driving.base import StepMetrics, driving_score, summarize
from embody.sims.driving.policies import ExpertPolicy
from embody.stats import bootstrap_ci

from .config import SETTINGS, MPAConfig
from .data import CounterfactualData, make_sim
from .policy import AGENTS, Models, MPAAgent

EXPERT = "expert"  # the IDM/MOBIL expert the base policy cloned: the reference for its competence


def run_agent_episode(
    kind: str, models: Models, cfg: MPAConfig, scenario: str, seed: int, k: int | None = None
) -> dict:
    """One closed-loop episode of agent ``kind`` (one of AGENTS, or EXPERT) on ``scenario`` with traffic seed
    ``seed``; summarize()'s dict plus ``score`` and ``reference_m``."""
    sim = make_sim(scenario, "kinematic" if kind == EXPERT else cfg.data.perception)
    agent_cfg = cfg.agent if k is None else replace(cfg.agent, candidates=k)
    agent = ExpertPolicy(sim) if kind == EXPERT else MPAAgent(kind, models, agent_cfg, sim.dt, seed=seed)
    obs = sim.reset(seed)
    agent.reset()
    sc = sim.scenario
    limit = int(round(sc.settings.duration_s / sim.dt))
    limit = min(limit, cfg.eval.max_steps) if cfg.eval.max_steps else limit
    steps: list[StepMetrics] = []
    reason = "max_steps"
    for _ in range(limit):
        r = sim.step(agent.act(obs))
        obs = r.obs
        steps.append(r.metrics)
        if r.done:
            reason = r.reason
            break
    sim.close()
    out = {"seed": seed, **summarize(steps, reason)}
    out["reference_m"] = sc.ego.target_speed * limit * sim.dt
    out["score"] = driving_score(out, out["reference_m"])
    return out


def summarize_episodes(episodes: list[dict], n_boot: int) -> dict:
    """score / collision / progress means with 95 % CIs over ``episodes``."""
    out: dict = {"episodes": len(episodes)}
    for key, values in (
        ("score", [e["score"] for e in episodes]),
        ("collision", [float(bool(e.get("collision"))) for e in episodes]),
        ("progress_m", [e.get("progress_m") or 0.0 for e in episodes]),
    ):
        out[key] = float(np.mean(values))
        out[f"{key}_ci"] = bootstrap_ci(values, n_boot)
    return out


def evaluate_agents(
    models: Models,
    cfg: MPAConfig,
    scenarios: list[str],
    agents=AGENTS,
    k: int | None = None,
    progress: Progress | None = None,
    done: list | None = None,
) -> dict:
    """{agent: {scenario: {"summary", "episodes"}}} over the fixed evaluation seeds."""
    e = cfg.eval
    seeds = [e.seed_base + cfg.seed * 10_000 + i for i in range(e.episodes)]
    results: dict = {}
    done = done if done is not None else [0]
    for agent in agents:
        for scenario in scenarios:
            eps = []
            for seed in seeds:
                eps.append(run_agent_episode(agent, models, cfg, scenario, seed, k))
                done[0] += 1
                if progress is not None:
                    progress.update(done[0], agent=agent, scenario=scenario, score=eps[-1]["score"])
            results.setdefault(agent, {})[scenario] = {"summary": summarize_episodes(eps, e.bootstrap), "episodes": eps}
    return results


def by_setting(results: dict, n_boot: int) -> dict:
    """{agent: {setting: summary}} pooling the episodes of each setting's scenarios."""
    out: dict = {}
    for agent, per_scenario in results.items():
        for setting, scenarios in SETTINGS.items():
            eps = [ep for s in scenarios if s in per_scenario for ep in per_scenario[s]["episodes"]]
            if eps:
                out.setdefault(agent, {})[setting] = summarize_episodes(eps, n_boot)
    return out


def run_evaluation(models: Models, cf: CounterfactualData, cfg: MPAConfig, retrain) -> dict:
    """The main table and both sweeps. ``retrain(cf_subset)`` → (adapter, q) for the data-size sweep: the
    first fraction of each source's branch points (the proposal branches were drawn from the full adapter)."""
    e = cfg.eval
    scenarios = [s for group in SETTINGS.values() for s in group]
    sweep = list(e.sweep_scenarios)
    reruns = sum(f < 1.0 for f in e.data_fractions) + sum(k != cfg.agent.candidates for k in e.k_values)
    agents = (EXPERT, *AGENTS)
    total = e.episodes * (len(agents) * len(scenarios) + reruns * len(sweep))
    bar, done, t0 = Progress(total, label="mpa eval", unit="episodes"), [0], time.perf_counter()
    main = evaluate_agents(models, cfg, scenarios, agents, progress=bar, done=done)
    size_rows = []
    for frac in e.data_fractions:
        sub = cf.subset(frac)
        if frac >= 1.0:  # the full data: the main run's episodes (same models, same seeds)
            res = {s: main["base+adapter+Q"][s] for s in sweep}
        else:
            adapter, q = retrain(sub)
            res = evaluate_agents(
                Models(models.bc, adapter, q), cfg, sweep, agents=("base+adapter+Q",), progress=bar, done=done
            )["base+adapter+Q"]
        size_rows.append(
            _sweep_row(
                {
                    "fraction": frac,
                    "branch_points": int(np.sum(sub.source == 0)),
                    "proposal_points": int(np.sum(sub.source == 1)),
                    "plans": int(sub.returns.size),
                },
                res,
                e.bootstrap,
            )
        )
    k_rows = []
    for k in e.k_values:
        if k == cfg.agent.candidates:  # the main run's K: reuse its episodes
            res = {s: main["base+adapter+Q"][s] for s in sweep}
        else:
            res = evaluate_agents(models, cfg, sweep, agents=("base+adapter+Q",), k=k, progress=bar, done=done)[
                "base+adapter+Q"
            ]
        k_rows.append(_sweep_row({"k": k}, res, e.bootstrap))
    bar.close()
    return {
        "scenarios": {a: {s: v["summary"] for s, v in per.items()} for a, per in main.items()},
        "settings": by_setting(main, e.bootstrap),
        "episodes": {a: {s: v["episodes"] for s, v in per.items()} for a, per in main.items()},
        "sweep_data_size": size_rows,
        "sweep_k": k_rows,
        "sweep_scenarios": sweep,
        "time_s": round(time.perf_counter() - t0, 1),
    }


def _sweep_row(key: dict, per_scenario: dict, n_boot: int) -> dict:
    eps = [ep for v in per_scenario.values() for ep in v["episodes"]]
    return {**key, **summarize_episodes(eps, n_boot), "runs": [_outcome(ep) for ep in eps]}


def _outcome(episode: dict) -> dict:
    """What ``summarize_episodes`` reads of an episode (kept in sweep rows, so that seeds can be pooled)."""
    return {k: episode.get(k) for k in ("seed", "score", "collision", "progress_m")}


def pool_evaluations(evs: list[dict], n_boot: int) -> dict:
    """``run_evaluation`` results of several seeds as one: every table recomputed from the pooled episodes;
    a sweep row's data counts are the seeds' mean."""
    episodes = {
        a: {s: [ep for ev in evs for ep in ev["episodes"][a][s]] for s in per} for a, per in evs[0]["episodes"].items()
    }
    main = {
        a: {s: {"summary": summarize_episodes(eps, n_boot), "episodes": eps} for s, eps in per.items()}
        for a, per in episodes.items()
    }
    sweeps = {}
    for name in ("sweep_data_size", "sweep_k"):
        sweeps[name] = []
        for rows in zip(*(ev[name] for ev in evs)):
            if any("runs" not in r for r in rows):
                raise ValueError("these results predate pooling (sweep rows without their episodes); rerun them")
            runs = [ep for r in rows for ep in r["runs"]]
            counts = {
                k: float(np.mean([r[k] for r in rows]))
                for k in ("branch_points", "proposal_points", "plans")
                if k in rows[0]
            }
            key = {k: rows[0][k] for k in ("fraction", "k") if k in rows[0]}
            sweeps[name].append({**key, **counts, **summarize_episodes(runs, n_boot), "runs": runs})
    return {
        "scenarios": {a: {s: v["summary"] for s, v in per.items()} for a, per in main.items()},
        "settings": by_setting(main, n_boot),
        "episodes": episodes,
        **sweeps,
        "sweep_scenarios": evs[0]["sweep_scenarios"],
        "time_s": round(sum(ev["time_s"] for ev in evs), 1),
    }
