"""Behavior cloning over trajectories: observation → a short future trajectory.

A driving policy predicts ``H`` future waypoints of ``D`` values each (e.g. H=8, D=4: x, y,
heading, speed in the ego/road frame) from an observation vector. ``TrajectoryMLP`` is an MLP
with input and output normalization fitted on the training data, so the network sees and
predicts values of unit scale whatever the units.

This module also holds what the trajectory model family (``diffusion.py``, ``value.py``)
shares: ``fit_supervised`` (train/val split, minibatch AdamW, early stop on the validation
loss with the best weights restored, a progress line with rate and ETA, a metrics history)
and ``save_model``/``load_model`` (an embody checkpoint: safetensors + JSON, see
``checkpoint.py``).

Shapes: ``N`` samples, ``B`` batch, ``O`` observation size, ``H`` waypoints, ``D`` values
per waypoint.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

from embody.config import PosInt

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .networks import ConvEncoder, Normalizer, mlp

Array = np.ndarray | torch.Tensor


@dataclass
class TrajectoryBCConfig:
    """Network and training settings of ``train_trajectory_bc``."""

    hidden: list[PosInt] = field(default_factory=lambda: [256, 256])
    activation: str = "silu"
    epochs: int = 200
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    val_fraction: float = 0.1  # held out for early stopping; 0: train on all, keep the last weights
    patience: int = 20  # epochs without a better validation loss before stopping (0: never stop early)
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "cpu"
    progress: bool = True  # a progress line on stderr (rate, ETA, losses)
    # (C, H, W): the observation's last C·H·W values are an image (0..255, e.g. a driving BEV), read by a
    # ConvEncoder into ``image_features`` values trained end to end with the MLP; None: obs is one feature vector
    image: tuple[int, int, int] | None = None
    image_features: int = 128

    def __post_init__(self) -> None:
        if self.image is not None:
            self.image = tuple(int(v) for v in self.image)


# -- the shared supervised trainer ---------------------------------------------------------------
class FitSettings(Protocol):
    """The training fields every trajectory-family config carries."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    val_fraction: float
    patience: int
    max_grad_norm: float
    seed: int
    device: str
    progress: bool


class Trainable(Protocol):
    """What ``fit_supervised`` trains: a module whose ``loss`` scores one minibatch."""

    def loss(self, *batch: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """A scalar training loss for one minibatch (the tensors ``fit_supervised`` was given, indexed)."""


def split_indices(n: int, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, val) indices of a seeded random split; val is empty when ``val_fraction`` is 0 or n < 2."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_val = min(max(int(round(n * val_fraction)), 1), n - 1) if val_fraction > 0 and n >= 2 else 0
    return perm[n_val:], perm[:n_val]


def fit_supervised(
    model: nn.Module,
    data: Sequence[torch.Tensor],
    train_idx: torch.Tensor,
    val_idx: torch.Tensor,
    cfg: FitSettings,
    label: str,
    callback: Callable[[dict], bool | None] | None = None,
) -> list[dict]:
    """Train ``model`` in place on ``data`` (tensors sharing their first dimension) with
    ``model.loss(*batch)``; returns the history, one dict per epoch (``epoch``, ``train_loss``,
    ``val_loss``, ``time_s``). With a validation split the weights of the best validation epoch
    are restored at the end. ``callback(metrics)`` may return True to stop."""
    from embody.progress import Progress

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    bar = Progress(cfg.epochs, label=label, unit="epochs") if cfg.progress else None
    best, best_state, since_best, history, start = math.inf, None, 0, [], time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        train_loss = _train_epoch(model, data, train_idx, opt, gen, cfg)
        val_loss = evaluate_loss(model, data, val_idx, cfg.seed) if len(val_idx) else train_loss
        history.append(
            {"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, "time_s": time.perf_counter() - start}
        )
        if val_loss < best:
            best, since_best = val_loss, 0
            best_state = copy.deepcopy(model.state_dict()) if len(val_idx) else None
        else:
            since_best += 1
        if bar is not None:
            bar.update(epoch, train=train_loss, val=val_loss, best=best)
        if (callback is not None and callback(history[-1])) or (cfg.patience and since_best >= cfg.patience):
            break
    if bar is not None:
        bar.close(train=history[-1]["train_loss"], val=history[-1]["val_loss"], best=best)
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return history


def _train_epoch(
    model: nn.Module,
    data: Sequence[torch.Tensor],
    idx: torch.Tensor,
    opt: torch.optim.Optimizer,
    gen: torch.Generator,
    cfg: FitSettings,
) -> float:
    model.train()
    total, n = 0.0, 0
    for batch_idx in idx[torch.randperm(len(idx), generator=gen)].split(cfg.batch_size):
        loss = model.loss(*(t[batch_idx] for t in data), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        total, n = total + loss.item() * len(batch_idx), n + len(batch_idx)
    return total / max(n, 1)


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, data: Sequence[torch.Tensor], idx: torch.Tensor, seed: int = 0, batch_size: int = 4096
) -> float:
    """Mean ``model.loss`` over ``idx``; a fixed-seed generator makes a noisy loss repeatable."""
    model.eval()
    gen = torch.Generator().manual_seed(seed + 1)
    total = 0.0
    for batch_idx in idx.split(batch_size):
        total += model.loss(*(t[batch_idx] for t in data), generator=gen).item() * len(batch_idx)
    return total / max(len(idx), 1)


# -- normalization and array helpers ---------------------------------------------------------------
def fit_normalizer(norm: Normalizer, x: torch.Tensor) -> None:
    """Set ``norm``'s statistics to those of ``x`` (N, size) alone."""
    norm.mean.zero_()
    norm.var.fill_(1.0)
    norm.count.fill_(norm.eps)
    norm.update(x)


def denormalize(norm: Normalizer, y: torch.Tensor) -> torch.Tensor:
    """The inverse of ``norm`` (without its clipping)."""
    return y * torch.sqrt(norm.var + norm.eps) + norm.mean


def output_normalizer(size: int) -> Normalizer:
    """A normalizer for regression targets: statistics as for inputs, but never clipped."""
    return Normalizer(size, clip=math.inf)


def as_tensor(x: Array, device: str | torch.device = "cpu") -> torch.Tensor:
    """``x`` as a float32 tensor on ``device``: an array is converted, a tensor cast and moved."""
    return torch.as_tensor(
        np.asarray(x, dtype=np.float32) if not isinstance(x, torch.Tensor) else x, dtype=torch.float32, device=device
    )


def like_input(y: torch.Tensor, x: Array) -> Array:
    """``y`` as the same kind as the input ``x``: numpy in, numpy out; a tensor in, a tensor out."""
    return y if isinstance(x, torch.Tensor) else y.cpu().numpy()


def check_rows(name: str, x: torch.Tensor, n: int | None, trailing: tuple[int, ...] | None = None) -> None:
    """Raise a ValueError naming ``name`` unless ``x`` has ``n`` rows, ``trailing`` dims and finite values."""
    if n is not None and x.shape[0] != n:
        raise ValueError(f"{name} has {x.shape[0]} rows, expected {n}")
    if trailing is not None and tuple(x.shape[1:]) != trailing:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected (N, {', '.join(map(str, trailing))})")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} holds NaN or infinite values")


# -- the model ------------------------------------------------------------------------------------
class SavedModel(nn.Module):
    """What the checkpoint functions need from a model: its constructor arguments (the size
    attributes named in ``SIZES`` plus a ``CONFIG`` dataclass) and a spec naming it."""

    MODEL: str
    VERSION = 1
    CONFIG: type
    SIZES: tuple[str, ...]

    def init_kwargs(self) -> dict:
        """The ``SIZES`` attributes plus ``config`` as a dict: saved in ``checkpoint.json`` for ``from_kwargs``."""
        return {k: getattr(self, k) for k in self.SIZES} | {"config": asdict(self.config)}

    @classmethod
    def from_kwargs(cls, kwargs: dict):
        """Rebuild an (untrained) model from ``init_kwargs()``; ``load_model`` then loads the weights."""
        kwargs = dict(kwargs)
        kwargs["config"] = cls.CONFIG(**kwargs.get("config", {}))
        return cls(**kwargs)

    def spec(self) -> dict:
        """The checkpoint spec ``load_model`` checks: ``{"model": MODEL, "version": VERSION}`` plus the
        ``SIZES`` attributes."""
        return {"model": self.MODEL, "version": self.VERSION} | {k: getattr(self, k) for k in self.SIZES}


class TrajectoryMLP(SavedModel):
    """obs (B, O) → trajectory (B, H, D), with input/output normalization fitted on data.

    With ``config.image`` = (C, H, W) the last C·H·W observation values are an image: a ``ConvEncoder``
    reads it and the MLP sees [normalized vector part, image features], trained end to end.
    ``features(obs)`` is what the MLP's input is made of, for models that condition on this one's perception.

    Also a ``Policy``: ``act(obs)`` returns the flattened trajectory (B, H*D).
    """

    MODEL, CONFIG, SIZES = "trajectory_bc", TrajectoryBCConfig, ("obs_size", "horizon", "dims")
    VERSION = 2  # 2: the optional image encoder

    def __init__(self, obs_size: int, horizon: int, dims: int, config: TrajectoryBCConfig | None = None):
        super().__init__()
        self.config = config = config or TrajectoryBCConfig()
        self.obs_size, self.horizon, self.dims = obs_size, horizon, dims
        self.action_size = horizon * dims
        pixels = math.prod(config.image) if config.image else 0
        if pixels >= obs_size:
            raise ValueError(f"an image of shape {config.image} needs more than {obs_size} observation values")
        self.vector_size = obs_size - pixels
        self.obs_norm = Normalizer(self.vector_size)
        self.encoder = ConvEncoder(config.image, config.image_features) if config.image else None
        self.out_norm = output_normalizer(horizon * dims)
        inputs = self.vector_size + (config.image_features if config.image else 0)
        self.net = mlp([inputs, *config.hidden, horizon * dims], config.activation)
        self.history: list[dict] = []
        self.summary: dict = {}

    def fit_normalizers(self, obs: torch.Tensor, traj: torch.Tensor) -> None:
        """Set the input and output normalizers to the statistics of obs (N, O) and traj (N, H, D)."""
        fit_normalizer(self.obs_norm, obs[:, : self.vector_size])
        fit_normalizer(self.out_norm, traj.reshape(len(traj), -1))

    def _inputs(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.obs_norm(obs[:, : self.vector_size])
        return x if self.encoder is None else torch.cat([x, self.encoder(obs[:, self.vector_size :])], -1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (B, O) → trajectory (B, H, D) in data units."""
        y = self.net(self._inputs(obs))
        return denormalize(self.out_norm, y).reshape(-1, self.horizon, self.dims)

    def loss(self, obs: torch.Tensor, traj: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Mean squared error in normalized units (every waypoint value weighs the same)."""
        target = self.out_norm(traj.reshape(len(traj), -1))
        return (self.net(self._inputs(obs)) - target).pow(2).mean()

    @torch.no_grad()
    def features(self, obs: Array) -> Array:
        """obs (B, O) → (B, F): the observation itself without an image; with one, the vector part (data units)
        and the image encoder's features (F = O − C·H·W + image_features)."""
        if self.encoder is None:
            return obs
        x = as_tensor(obs, self.obs_norm.mean.device)
        f = torch.cat([x[:, : self.vector_size], self.encoder(x[:, self.vector_size :])], -1)
        return like_input(f, obs)

    @torch.no_grad()
    def predict(self, obs: Array) -> Array:
        """obs (B, O) → (B, H, D); numpy in, numpy out (a tensor in, a tensor out)."""
        device = self.obs_norm.mean.device
        return like_input(self(as_tensor(obs, device)), obs)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """The ``Policy`` view: obs (B, O) → the flattened trajectory (B, H * D) in data units."""
        return self(obs).reshape(len(obs), -1)

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass


def train_trajectory_bc(
    obs: Array,
    traj: Array,
    cfg: TrajectoryBCConfig | None = None,
    callback: Callable[[dict], bool | None] | None = None,
) -> TrajectoryMLP:
    """Fit a ``TrajectoryMLP`` to obs (N, O) → traj (N, H, D).

    The returned model carries ``history`` (per epoch: train_loss, val_loss — normalized MSE —
    and time_s) and ``summary`` (epochs, best_epoch, val_loss, val_rmse per dim in data units,
    val_r2 against predicting the training mean).
    """
    cfg = cfg or TrajectoryBCConfig()
    obs_t, traj_t = as_tensor(obs, cfg.device), as_tensor(traj, cfg.device)
    if obs_t.ndim != 2 or traj_t.ndim != 3:
        raise ValueError(f"expected obs (N, O) and traj (N, H, D), got {tuple(obs_t.shape)} and {tuple(traj_t.shape)}")
    check_rows("obs", obs_t, None)
    check_rows("traj", traj_t, len(obs_t))
    with torch.random.fork_rng(devices=[]):  # seeded initial weights, the global generator untouched
        torch.manual_seed(cfg.seed)
        model = TrajectoryMLP(obs_t.shape[1], traj_t.shape[1], traj_t.shape[2], cfg).to(cfg.device)
    train_idx, val_idx = split_indices(len(obs_t), cfg.val_fraction, cfg.seed)
    model.fit_normalizers(obs_t[train_idx], traj_t[train_idx])
    model.history = fit_supervised(model, (obs_t, traj_t), train_idx, val_idx, cfg, "trajectory BC", callback)
    model.summary = _bc_summary(model, obs_t, traj_t, train_idx, val_idx)
    return model


@torch.no_grad()
def _bc_summary(
    model: TrajectoryMLP, obs: torch.Tensor, traj: torch.Tensor, train_idx: torch.Tensor, val_idx: torch.Tensor
) -> dict:
    hist = model.history
    best = min(hist, key=lambda h: h["val_loss"])
    out = {
        "epochs": len(hist),
        "best_epoch": best["epoch"],
        "val_loss": best["val_loss"],
        "time_s": hist[-1]["time_s"] if hist else 0.0,
    }
    idx = val_idx if len(val_idx) else train_idx
    err = model(obs[idx]) - traj[idx]
    baseline = traj[idx] - traj[train_idx].mean(0)
    out["val_rmse"] = err.pow(2).mean((0, 1)).sqrt().tolist()
    out["val_r2"] = float(1.0 - err.pow(2).sum() / baseline.pow(2).sum().clamp(min=1e-12))
    return out


# -- checkpoints ------------------------------------------------------------------------------------


def save_model(directory: str | Path, model: nn.Module, meta: dict | None = None) -> Path:
    """Write a trajectory-family model (weights, normalizers, config, history) as an embody
    checkpoint directory: ``model.safetensors`` + ``checkpoint.json``, atomically."""
    meta = {"history": getattr(model, "history", []), "summary": getattr(model, "summary", {}), **(meta or {})}
    return save_checkpoint(directory, model, model.spec(), meta)


def load_model(directory: str | Path, cls: type, device: str = "cpu") -> nn.Module:
    """Load a model saved by ``save_model``; anything else raises one ``CheckpointError`` naming the file."""
    ck = load_checkpoint(directory, device=device)
    if not isinstance(ck.policy, cls) or ck.spec.get("model") != cls.MODEL:
        raise CheckpointError(f"{directory} is a checkpoint of {type(ck.policy).__name__}, not of {cls.__name__}")
    version = ck.spec.get("version")
    if not isinstance(version, int) or not 1 <= version <= cls.VERSION:
        raise CheckpointError(
            f"{directory}: {cls.__name__} version {version!r} is not supported (this embody reads 1..{cls.VERSION})"
        )
    model = ck.policy.eval()
    model.history, model.summary = ck.meta.get("history", []), ck.meta.get("summary", {})
    return model


def load_trajectory_bc(directory: str | Path, device: str = "cpu") -> TrajectoryMLP:
    """Load a ``TrajectoryMLP`` saved by ``save_model`` (eval mode); anything else raises ``CheckpointError``."""
    return load_model(directory, TrajectoryMLP, device)
