"""MPA training: expert demos → base BC → counterfactual branches → diffusion adapter + Q model.

Artifacts under ``out/models``: bc/, adapter/, q/ (embody checkpoints), expert.npz,
counterfactual.npz, train.json (sizes, losses, times).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from embody.policies.diffusion import load_diffusion, plan_condition, save_diffusion, train_diffusion
from embody.policies.trajectory import load_trajectory_bc, save_model, train_trajectory_bc
from embody.policies.value import load_q, save_q, train_q
from embody.progress import Progress

from .config import MPAConfig
from .data import CounterfactualData, counterfactual_data, expert_rollouts, make_sim
from .policy import Models, MPAAgent


def adapter_targets(cf: CounterfactualData, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The adapter's training pairs: per branch point its ``top_k`` plans by return, as
    cond = plan_condition(obs, base_plan) (S·k, O + H·4) and residual = plan − base_plan (S·k, H, 4)."""
    k = min(top_k, cf.plans.shape[1])
    idx = np.argsort(-cf.returns, axis=1, kind="stable")[:, :k]  # (S, k)
    best = np.take_along_axis(cf.plans, idx[:, :, None, None], axis=1)  # (S, k, H, 4)
    residual = best - cf.base_plan[:, None]
    cond = plan_condition(np.repeat(cf.obs, k, 0), np.repeat(cf.base_plan, k, 0))
    return cond, residual.reshape(-1, *cf.plans.shape[2:])


def q_targets(cf: CounterfactualData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (obs, plan, return) of the branches: (S·M, O), (S·M, H, 4), (S·M,)."""
    m = cf.plans.shape[1]
    return np.repeat(cf.obs, m, 0), cf.plans.reshape(-1, *cf.plans.shape[2:]), cf.returns.reshape(-1)


def train_adapter_q(cf: CounterfactualData, cfg: MPAConfig):
    """(adapter, Q model) fitted on ``cf``."""
    cond, residual = adapter_targets(cf, cfg.agent.adapter_top_k)
    adapter = train_diffusion(cond, residual, cfg.adapter)
    q = train_q(*q_targets(cf), cfg.q)
    return adapter, q


def train_all(cfg: MPAConfig, out: Path, log=print) -> Models:
    """The whole training pipeline; writes ``out/models`` (module docstring)."""
    d, models_dir = cfg.data, Path(out) / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    info: dict = {"scale": cfg.scale, "seed": cfg.seed}
    t0 = time.perf_counter()
    obs, plans = expert_rollouts(d, [cfg.seed * 10_000 + i for i in range(d.expert_episodes)])
    np.savez_compressed(models_dir / "expert.npz", obs=obs, plans=plans)
    info["expert"] = {"samples": len(obs), "time_s": round(time.perf_counter() - t0, 1)}
    log(f"mpa: {len(obs)} expert samples from {d.expert_episodes} episodes ({info['expert']['time_s']} s)")
    bc = train_trajectory_bc(obs, plans, cfg.bc)
    save_model(models_dir / "bc", bc)
    info["bc"] = bc.summary
    log(f"mpa: base BC val R² {bc.summary['val_r2']:.3f}, RMSE {np.round(bc.summary['val_rmse'], 2).tolist()}")

    t1 = time.perf_counter()
    base = MPAAgent("base", Models(bc), cfg.agent, make_sim(d.scenario).dt)
    total = d.branch_episodes * (d.branch_max_steps // d.branch_every + 1)
    bar = Progress(total, label="counterfactual branches", unit="points")
    cf = counterfactual_data(d, base, [cfg.seed * 10_000 + 5_000 + i for i in range(d.branch_episodes)], bar)
    bar.close()
    cf.save(models_dir / "counterfactual.npz")
    info["counterfactual"] = {"branch_points": len(cf.obs), "plans": int(cf.returns.size),
                              "mean_return": float(cf.returns.mean()),
                              "base_is_best_fraction": float(np.mean(cf.returns.argmax(1) == 0)),
                              "time_s": round(time.perf_counter() - t1, 1)}
    log(f"mpa: {len(cf.obs)} branch points × {cf.plans.shape[1]} plans ({info['counterfactual']['time_s']} s)")
    adapter, q = train_adapter_q(cf, cfg)
    save_diffusion(models_dir / "adapter", adapter)
    save_q(models_dir / "q", q)
    info["adapter"], info["q"] = adapter.summary, q.summary
    info["time_s"] = round(time.perf_counter() - t0, 1)
    log(f"mpa: adapter val loss {adapter.summary['val_loss']:.3f}; Q val Spearman {q.summary['val_spearman']:.3f}")
    (models_dir / "train.json").write_text(json.dumps(info, indent=2, default=float))
    return Models(bc, adapter, q)


def has_models(directory: Path) -> bool:
    m = Path(directory) / "models"
    return all((m / name / "checkpoint.json").exists() for name in ("bc", "adapter", "q")) and \
        (m / "counterfactual.npz").exists()


def load_models(directory: Path) -> tuple[Models, CounterfactualData]:
    m = Path(directory) / "models"
    return (Models(load_trajectory_bc(m / "bc"), load_diffusion(m / "adapter"), load_q(m / "q")),
            CounterfactualData.load(m / "counterfactual.npz"))
