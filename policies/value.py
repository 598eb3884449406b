"""A multi-step Q model: (observation, candidate trajectory) → long-horizon return.

``QModel`` is an MLP regressor trained on recorded returns (Monte-Carlo or n-step returns
computed by the caller); it scores candidate trajectories, e.g. those ``diffusion.sample_plans``
proposes, so that the best one can be picked. Inputs and the return are normalized with
statistics fitted on the training data.

Shapes: ``N`` samples, ``B`` observations, ``K`` candidates each, ``O`` observation size,
``H`` waypoints, ``D`` values per waypoint.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from .networks import Normalizer, mlp
from .trajectory import (
    Array,
    SavedModel,
    TrajectoryBCConfig,
    as_tensor,
    check_rows,
    denormalize,
    fit_normalizer,
    fit_supervised,
    like_input,
    load_model,
    output_normalizer,
    save_model,
    split_indices,
)

QConfig = TrajectoryBCConfig  # the Q regressor trains with exactly the BC settings


class QModel(SavedModel):
    """(obs (B, O), traj (B, H, D)) → return (B,)."""

    MODEL, CONFIG, SIZES = "trajectory_q", QConfig, ("obs_size", "horizon", "dims")

    def __init__(self, obs_size: int, horizon: int, dims: int, config: QConfig | None = None):
        super().__init__()
        self.config = config = config or QConfig()
        self.obs_size, self.horizon, self.dims = obs_size, horizon, dims
        self.obs_norm = Normalizer(obs_size)
        self.traj_norm = Normalizer(horizon * dims)
        self.ret_norm = output_normalizer(1)
        self.net = mlp([obs_size + horizon * dims, *config.hidden, 1], config.activation)
        self.history: list[dict] = []
        self.summary: dict = {}

    def fit_normalizers(self, obs: torch.Tensor, traj: torch.Tensor, returns: torch.Tensor) -> None:
        """Set the normalizers to the statistics of obs (N, O), traj (N, H, D) and returns (N,)."""
        fit_normalizer(self.obs_norm, obs)
        fit_normalizer(self.traj_norm, traj.reshape(len(traj), -1))
        fit_normalizer(self.ret_norm, returns[:, None])

    def _normalized(self, obs: torch.Tensor, traj: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.obs_norm(obs), self.traj_norm(traj.reshape(len(traj), -1))], -1)
        return self.net(x).squeeze(-1)

    def forward(self, obs: torch.Tensor, traj: torch.Tensor) -> torch.Tensor:
        """obs (B, O), traj (B, H, D) → predicted return (B,) in data units."""
        return denormalize(self.ret_norm, self._normalized(obs, traj)[:, None]).squeeze(-1)

    def loss(
        self, obs: torch.Tensor, traj: torch.Tensor, returns: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """MSE of the normalized return."""
        return (self._normalized(obs, traj) - self.ret_norm(returns[:, None]).squeeze(-1)).pow(2).mean()

    @torch.no_grad()
    def score(self, obs: Array, trajs: Array) -> Array:
        """obs (B, O), trajs (B, K, H, D) → predicted returns (B, K), all B·K in one pass.
        numpy in, numpy out (a tensor in, a tensor out)."""
        device = self.obs_norm.mean.device
        o, t = as_tensor(obs, device), as_tensor(trajs, device)
        if t.ndim != 4 or tuple(t.shape[2:]) != (self.horizon, self.dims) or o.shape != (t.shape[0], self.obs_size):
            raise ValueError(
                f"expected obs (B, {self.obs_size}) and trajs (B, K, {self.horizon}, {self.dims}), "
                f"got {tuple(o.shape)} and {tuple(t.shape)}"
            )
        B, K = t.shape[:2]
        q = self(o.repeat_interleave(K, 0), t.reshape(B * K, self.horizon, self.dims)).reshape(B, K)
        return like_input(q, trajs)

    @torch.no_grad()
    def best(self, obs: Array, trajs: Array) -> Array:
        """The highest-scoring candidate per observation: (B, H, D)."""
        t = as_tensor(trajs, self.obs_norm.mean.device)
        pick = t[torch.arange(len(t), device=t.device), self.score(obs, t).argmax(1)]
        return like_input(pick, trajs)


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman rank correlation along the last dimension (ties broken by order): (..., n) → (...)."""
    ra, rb = (x.argsort(-1).argsort(-1).float() for x in (a, b))
    ra, rb = ra - ra.mean(-1, keepdim=True), rb - rb.mean(-1, keepdim=True)
    return (ra * rb).sum(-1) / (ra.pow(2).sum(-1) * rb.pow(2).sum(-1)).sqrt().clamp(min=1e-12)


def train_q(
    obs: Array,
    traj: Array,
    returns: Array,
    cfg: QConfig | None = None,
    callback: Callable[[dict], bool | None] | None = None,
) -> QModel:
    """Regress returns (N,) on obs (N, O) and traj (N, H, D).

    The returned model carries ``history`` and ``summary`` (epochs, best_epoch, val_loss,
    val_rmse in return units, val_spearman over the validation samples).
    """
    cfg = cfg or QConfig()
    o, t, r = as_tensor(obs, cfg.device), as_tensor(traj, cfg.device), as_tensor(returns, cfg.device)
    if o.ndim != 2 or t.ndim != 3 or r.ndim != 1:
        raise ValueError(
            f"expected obs (N, O), traj (N, H, D), returns (N,), got "
            f"{tuple(o.shape)}, {tuple(t.shape)}, {tuple(r.shape)}"
        )
    check_rows("obs", o, None)
    check_rows("traj", t, len(o))
    check_rows("returns", r, len(o))
    with torch.random.fork_rng(devices=[]):  # seeded initial weights, the global generator untouched
        torch.manual_seed(cfg.seed)
        model = QModel(o.shape[1], t.shape[1], t.shape[2], cfg).to(cfg.device)
    train_idx, val_idx = split_indices(len(o), cfg.val_fraction, cfg.seed)
    model.fit_normalizers(o[train_idx], t[train_idx], r[train_idx])
    model.history = fit_supervised(model, (o, t, r), train_idx, val_idx, cfg, "Q regression", callback)
    model.summary = _q_summary(model, o, t, r, val_idx if len(val_idx) else train_idx)
    return model


@torch.no_grad()
def _q_summary(model: QModel, o: torch.Tensor, t: torch.Tensor, r: torch.Tensor, idx: torch.Tensor) -> dict:
    best = min(model.history, key=lambda h: h["val_loss"])
    pred = model(o[idx], t[idx])
    return {
        "epochs": len(model.history),
        "best_epoch": best["epoch"],
        "val_loss": best["val_loss"],
        "val_rmse": float((pred - r[idx]).pow(2).mean().sqrt()),
        "val_spearman": float(spearman(pred, r[idx])),
        "time_s": model.history[-1]["time_s"],
    }


def save_q(directory: str | Path, model: QModel, meta: dict | None = None) -> Path:
    """Write ``model`` as an embody checkpoint directory, atomically (see ``trajectory.save_model``)."""
    return save_model(directory, model, meta)


def load_q(directory: str | Path, device: str = "cpu") -> QModel:
    """Load a model saved by ``save_q`` (eval mode); anything else raises ``CheckpointError``."""
    return load_model(directory, QModel, device)
