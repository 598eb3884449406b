"""A multi-step Q model: (observation, candidate trajectory) → long-horizon return.

``QModel`` is an MLP regressor trained on recorded returns (Monte-Carlo or n-step returns
computed by the caller); it scores candidate trajectories, e.g. those ``diffusion.sample_plans``
proposes, so that the best one can be picked. Inputs and the return are normalized with
statistics fitted on the training data.

With ``members`` > 1 it is a deep ensemble (independently initialized MLPs, evaluated in one
batched pass) and ``score`` is pessimistic: mean − ``pessimism`` × the members' standard deviation.
A regressor picking the argmax among proposals is drawn to the ones it extrapolates on (its
errors, not the plans, make them look best); where the members disagree the pessimistic score
falls, so an unfamiliar proposal has to look good to every member to be chosen.

Shapes: ``N`` samples, ``B`` observations, ``K`` candidates each, ``O`` observation size,
``H`` waypoints, ``D`` values per waypoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from embody.config import PosInt

from .networks import EnsembleMLP, Normalizer, mlp
from .trajectory import (
    Array,
    SavedModel,
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


@dataclass
class QConfig:
    """Network and training settings of ``train_q`` (the training fields as ``TrajectoryBCConfig``'s)."""

    hidden: list[PosInt] = field(default_factory=lambda: [256, 256])
    activation: str = "silu"
    members: int = 1  # ensemble members (module docstring); 1: one MLP
    pessimism: float = 0.0  # score = mean − pessimism × std over the members
    epochs: int = 200
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.1
    patience: int = 20
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "cpu"
    progress: bool = True


class QModel(SavedModel):
    """(obs (B, O), traj (B, H, D)) → return (B,): the members' mean (``score``: pessimistic)."""

    MODEL, CONFIG, SIZES = "trajectory_q", QConfig, ("obs_size", "horizon", "dims")
    VERSION = 2  # 2: ensembles

    def __init__(self, obs_size: int, horizon: int, dims: int, config: QConfig | None = None):
        super().__init__()
        self.config = config = config or QConfig()
        self.obs_size, self.horizon, self.dims = obs_size, horizon, dims
        self.obs_norm = Normalizer(obs_size)
        self.traj_norm = Normalizer(horizon * dims)
        self.ret_norm = output_normalizer(1)
        sizes = [obs_size + horizon * dims, *config.hidden, 1]
        self.net = (
            mlp(sizes, config.activation)
            if config.members == 1
            else EnsembleMLP(sizes, config.members, config.activation)
        )
        self.history: list[dict] = []
        self.summary: dict = {}

    def fit_normalizers(self, obs: torch.Tensor, traj: torch.Tensor, returns: torch.Tensor) -> None:
        """Set the normalizers to the statistics of obs (N, O), traj (N, H, D) and returns (N,)."""
        fit_normalizer(self.obs_norm, obs)
        fit_normalizer(self.traj_norm, traj.reshape(len(traj), -1))
        fit_normalizer(self.ret_norm, returns[:, None])

    def _normalized(self, obs: torch.Tensor, traj: torch.Tensor) -> torch.Tensor:
        """Every member's normalized prediction (E, B)."""
        x = torch.cat([self.obs_norm(obs), self.traj_norm(traj.reshape(len(traj), -1))], -1)
        y = self.net(x)
        return y.reshape(1, -1) if self.config.members == 1 else y

    def members(self, obs: torch.Tensor, traj: torch.Tensor) -> torch.Tensor:
        """obs (B, O), traj (B, H, D) → every member's predicted return (E, B) in data units."""
        y = self._normalized(obs, traj)
        return denormalize(self.ret_norm, y.reshape(-1, 1)).reshape(y.shape)

    def forward(self, obs: torch.Tensor, traj: torch.Tensor) -> torch.Tensor:
        """obs (B, O), traj (B, H, D) → predicted return (B,) in data units (the members' mean)."""
        return self.members(obs, traj).mean(0)

    def loss(
        self, obs: torch.Tensor, traj: torch.Tensor, returns: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """MSE of the normalized return, summed over the members (each fits the data on its own)."""
        err = self._normalized(obs, traj) - self.ret_norm(returns[:, None]).squeeze(-1)
        return err.pow(2).mean(1).sum()

    @torch.no_grad()
    def score(self, obs: Array, trajs: Array, pessimism: float | None = None) -> Array:
        """obs (B, O), trajs (B, K, H, D) → predicted returns (B, K), all B·K in one pass: the members' mean −
        ``pessimism`` (default ``config.pessimism``) × their standard deviation.
        numpy in, numpy out (a tensor in, a tensor out)."""
        device = self.obs_norm.mean.device
        o, t = as_tensor(obs, device), as_tensor(trajs, device)
        if t.ndim != 4 or tuple(t.shape[2:]) != (self.horizon, self.dims) or o.shape != (t.shape[0], self.obs_size):
            raise ValueError(
                f"expected obs (B, {self.obs_size}) and trajs (B, K, {self.horizon}, {self.dims}), "
                f"got {tuple(o.shape)} and {tuple(t.shape)}"
            )
        B, K = t.shape[:2]
        m = self.members(o.repeat_interleave(K, 0), t.reshape(B * K, self.horizon, self.dims))
        kappa = self.config.pessimism if pessimism is None else pessimism
        q = m.mean(0) - kappa * m.std(0) if len(m) > 1 and kappa else m.mean(0)
        return like_input(q.reshape(B, K), trajs)

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
