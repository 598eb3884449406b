"""MPA training: expert demos → base BC → counterfactual branches → diffusion adapter + Q model.

Artifacts under ``out/models``: bc/, adapter/, q/ (embody checkpoints), expert.npz, bc_data.npz (expert + DAgger),
counterfactual.npz, train.json (sizes, losses, times).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from embody.policies.diffusion import load_diffusion, plan_condition, sample_plans, save_diffusion, train_diffusion
from embody.policies.trajectory import (
    TrajectoryBCConfig,
    TrajectoryMLP,
    load_trajectory_bc,
    save_model,
    train_trajectory_bc,
)
from embody.policies.value import load_q, save_q, train_q
from embody.progress import Progress

from .config import MPAConfig
from .data import BEV, CounterfactualData, counterfactual_data, dagger_rollouts, expert_rollouts, make_sim
from .policy import Models, MPAAgent


def adapter_targets(cf: CounterfactualData, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The adapter's training pairs: per branch point of the perturbation family (source 0) its
    ``top_k`` plans by return, as cond = plan_condition(obs, base_plan) (S·k, O + H·4) and
    residual = plan − base_plan (S·k, H, 4)."""
    cf = cf.where(cf.source == 0)
    k = min(top_k, cf.plans.shape[1])
    idx = np.argsort(-cf.returns, axis=1, kind="stable")[:, :k]  # (S, k)
    best = np.take_along_axis(cf.plans, idx[:, :, None, None], axis=1)  # (S, k, H, 4)
    residual = best - cf.base_plan[:, None]
    cond = plan_condition(np.repeat(cf.obs, k, 0), np.repeat(cf.base_plan, k, 0))
    return cond, residual.reshape(-1, *cf.plans.shape[2:])


def q_targets(cf: CounterfactualData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (obs, plan, advantage) of the branches: (S·M, O), (S·M, H, 4), (S·M,), where the
    advantage is the plan's return minus the base plan's at the same branch point. Raw returns
    vary mostly with the traffic, not with the plan (first version: within-state ranking right
    ~2 % of the time); the advantage is what choosing among candidates needs, and it makes the
    base plan's value 0 by definition."""
    m = cf.plans.shape[1]
    advantage = cf.returns - cf.returns[:, :1]
    return np.repeat(cf.obs, m, 0), cf.plans.reshape(-1, *cf.plans.shape[2:]), advantage.reshape(-1)


def train_adapter_q(cf: CounterfactualData, cfg: MPAConfig):
    """(adapter, Q model) fitted on ``cf``: the adapter on its perturbation-family branch points, the
    Q model on every branch point."""
    return train_adapter(cf, cfg), train_q(*q_targets(cf), cfg.q)


def train_adapter(cf: CounterfactualData, cfg: MPAConfig):
    """The diffusion adapter trained on the top-``adapter_top_k`` counterfactual plans of each branch point."""
    return train_diffusion(*adapter_targets(cf, cfg.agent.adapter_top_k), cfg.adapter)


def adapter_proposer(adapter, cfg: MPAConfig, seed: int):
    """propose(obs (O,), base (H, 4), n) → (n, H, 4): the adapter's samples, as the agents draw them."""
    gen = torch.Generator().manual_seed(seed)
    a = cfg.agent
    return lambda o, base, n: sample_plans(adapter, o[None], base[None], n, a.ddim_steps, a.eta, gen)[0]


def branch(
    cfg: MPAConfig, base: MPAAgent, seeds: list[int], label: str, propose=None, driver=None
) -> CounterfactualData:
    """Counterfactual data from ``base``'s rollouts on ``seeds``, with a progress bar labelled ``label``."""
    d = cfg.data
    bar = Progress(len(seeds) * (d.branch_max_steps // d.branch_every + 1), label=label, unit="points")
    cf = counterfactual_data(d, base, seeds, bar, propose, driver)
    bar.close()
    return cf


def proposal_rounds(cfg: MPAConfig, cf: CounterfactualData, bc, adapter, info: dict, log=print):
    """Q data on the adapter's own proposals: ``proposal_rounds`` rounds of ``proposal_episodes``
    rollouts, branching on adapter samples; round 1 is driven by the base policy, each later round by
    the base+adapter+Q agent with the Q model trained on everything so far, so that the Q model also
    learns the states its own choices lead to (DAgger for the Q model: in closed loop it met states
    unlike the branch data and extrapolated). → (cf with the new branch points, the final Q model)."""
    d, dt = cfg.data, make_sim(cfg.data.scenario).dt
    base = MPAAgent("base", Models(bc), cfg.agent, dt)
    info["proposals"], q = [], None
    for r in range(d.proposal_rounds):
        t0 = time.perf_counter()
        driver = None if r == 0 else MPAAgent("base+adapter+Q", Models(bc, adapter, q), cfg.agent, dt, seed=r)
        seeds = [cfg.seed * 10_000 + 7_000 + 100 * r + i for i in range(d.proposal_episodes)]
        more = branch(cfg, base, seeds, f"proposal branches, round {r + 1}", adapter_proposer(adapter, cfg, r), driver)
        info["proposals"].append(
            {
                "driver": "base" if driver is None else "base+adapter+Q",
                "branch_points": len(more.obs),
                "mean_return": float(more.returns.mean()),
                "base_is_best_fraction": float(np.mean(more.returns.argmax(1) == 0)),
                "time_s": round(time.perf_counter() - t0, 1),
            }
        )
        log(f"mpa: proposal round {r + 1}: {len(more.obs)} branch points ({info['proposals'][-1]['time_s']} s)")
        cf = cf.concat(more)
        if r + 1 < d.proposal_rounds:  # the next round's driver
            q = train_q(*q_targets(cf), cfg.q)
    return cf, train_q(*q_targets(cf), cfg.q)


def base_config(cfg: MPAConfig) -> TrajectoryBCConfig:
    """The base BC's settings: ``cfg.bc`` with the image encoder on for the end-to-end (bev) perception."""
    return replace(cfg.bc, image=BEV.shape() if cfg.data.perception == "bev" else None)


def train_base(cfg: MPAConfig, models_dir: Path, log=print) -> tuple[TrajectoryMLP, dict]:
    """Base BC: clone the expert's episodes, then ``dagger_iterations`` rounds of DAgger (the
    policy drives, the expert labels the states it reaches, retrain on everything): cloning the
    expert's own states alone collided in 60 % of 30 s episodes (compounding error)."""
    d, t0 = cfg.data, time.perf_counter()
    obs, plans = expert_rollouts(d, [cfg.seed * 10_000 + i for i in range(d.expert_episodes)])
    np.savez_compressed(models_dir / "expert.npz", obs=obs, plans=plans)
    info: dict = {"expert": {"samples": len(obs), "time_s": round(time.perf_counter() - t0, 1)}, "dagger": []}
    log(f"mpa: {len(obs)} expert samples from {d.expert_episodes} episodes ({info['expert']['time_s']} s)")
    bc_cfg = base_config(cfg)
    bc = train_trajectory_bc(obs, plans, bc_cfg)
    dt = make_sim(d.scenario).dt
    for it in range(d.dagger_iterations):
        t1 = time.perf_counter()
        seeds = [cfg.seed * 10_000 + 2_000 + 100 * it + i for i in range(d.dagger_episodes)]
        more_obs, more_plans, stats = dagger_rollouts(d, MPAAgent("base", Models(bc), cfg.agent, dt), seeds)
        obs, plans = np.concatenate([obs, more_obs]), np.concatenate([plans, more_plans])
        bc = train_trajectory_bc(obs, plans, bc_cfg)
        info["dagger"].append(
            {
                **stats,
                "labels": len(more_obs),
                "samples": len(obs),
                "val_r2": bc.summary["val_r2"],
                "time_s": round(time.perf_counter() - t1, 1),
            }
        )
        log(
            f"mpa: DAgger round {it + 1}: the policy collided in {stats['collisions']}/{stats['episodes']} episodes; "
            f"+{len(more_obs)} expert labels → {len(obs)} samples"
        )
    np.savez_compressed(models_dir / "bc_data.npz", obs=obs, plans=plans)
    return bc, info


def train_all(cfg: MPAConfig, out: Path, log=print) -> Models:
    """The whole training pipeline; writes ``out/models`` (module docstring)."""
    d, models_dir = cfg.data, Path(out) / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    bc, base_info = train_base(cfg, models_dir, log)
    info: dict = {"scale": cfg.scale, "seed": cfg.seed, **base_info}
    save_model(models_dir / "bc", bc)
    info["bc"] = bc.summary
    log(f"mpa: base BC val R² {bc.summary['val_r2']:.3f}, RMSE {np.round(bc.summary['val_rmse'], 2).tolist()}")

    t1 = time.perf_counter()
    base = MPAAgent("base", Models(bc), cfg.agent, make_sim(d.scenario).dt)
    seeds = [cfg.seed * 10_000 + 5_000 + i for i in range(d.branch_episodes)]
    cf = branch(cfg, base, seeds, "counterfactual branches")
    info["counterfactual"] = {
        "branch_points": len(cf.obs),
        "plans": int(cf.returns.size),
        "mean_return": float(cf.returns.mean()),
        "base_is_best_fraction": float(np.mean(cf.returns.argmax(1) == 0)),
        "time_s": round(time.perf_counter() - t1, 1),
    }
    log(f"mpa: {len(cf.obs)} branch points × {cf.plans.shape[1]} plans ({info['counterfactual']['time_s']} s)")
    adapter = train_adapter(cf, cfg)
    cf, q = proposal_rounds(cfg, cf, bc, adapter, info, log)
    cf.save(models_dir / "counterfactual.npz")
    save_diffusion(models_dir / "adapter", adapter)
    save_q(models_dir / "q", q)
    info["adapter"], info["q"] = adapter.summary, q.summary
    info["time_s"] = round(time.perf_counter() - t0, 1)
    log(f"mpa: adapter val loss {adapter.summary['val_loss']:.3f}; Q val Spearman {q.summary['val_spearman']:.3f}")
    (models_dir / "train.json").write_text(json.dumps(info, indent=2, default=float))
    return Models(bc, adapter, q)


def has_models(directory: Path) -> bool:
    """Whether ``directory/models`` holds every trained model and the counterfactual data."""
    m = Path(directory) / "models"
    return (
        all((m / name / "checkpoint.json").exists() for name in ("bc", "adapter", "q"))
        and (m / "counterfactual.npz").exists()
    )


def load_models(directory: Path) -> tuple[Models, CounterfactualData]:
    """The trained models and counterfactual data under ``directory/models``."""
    m = Path(directory) / "models"
    return (
        Models(load_trajectory_bc(m / "bc"), load_diffusion(m / "adapter"), load_q(m / "q")),
        CounterfactualData.load(m / "counterfactual.npz"),
    )
