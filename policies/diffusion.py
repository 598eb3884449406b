"""A small conditional diffusion model: DDPM training, DDIM sampling.

``DiffusionModel`` learns p(x | cond) for x of any fixed shape (flattened inside) and a
condition vector: an epsilon-prediction MLP over ``cat(x_t, normalized cond, sinusoidal
timestep embedding)`` (the Diffusion-QL / IDQL layout). Both x and cond are normalized with
statistics fitted on the training data; sampling returns x in data units.

For a residual adapter over a base plan, train on ``x = expert_traj - base_plan`` with
``cond = plan_condition(obs, base_plan)``, then ``sample_plans`` returns base plan + sampled
residuals.

Shapes: ``N`` samples, ``B`` conditions, ``n`` samples per condition, ``C`` condition size,
``X`` = prod(x_shape), ``T`` diffusion steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from embody.config import PosInt

from .networks import Normalizer, mlp
from .trajectory import (
    Array,
    SavedModel,
    as_tensor,
    check_rows,
    denormalize,
    evaluate_loss,
    fit_normalizer,
    fit_supervised,
    like_input,
    load_model,
    output_normalizer,
    save_model,
    split_indices,
)

SCHEDULES = ("cosine", "linear")


@dataclass
class DiffusionConfig:
    """Network, noise schedule, sampling defaults and training settings of ``DiffusionModel`` / ``train_diffusion``."""

    timesteps: int = 100  # T, DDPM training steps
    schedule: str = "cosine"  # cosine (Nichol & Dhariwal) | linear (1e-4..0.02, scaled by 1000/T)
    hidden: list[PosInt] = field(default_factory=lambda: [256, 256, 256])
    activation: str = "silu"
    time_embed: int = 32  # sinusoidal timestep embedding size
    ddim_steps: int = 10  # default sampling steps (≤ timesteps)
    eta: float = 0.0  # default DDIM eta: 0 deterministic given the initial noise, 1 DDPM-like
    clip_x0: bool = True  # clamp each step's predicted x0 to the training data's range (see ``_ddim_step``)
    clip_margin: float = 0.1  # ... widened on each side by this fraction of the range
    epochs: int = 300
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    val_fraction: float = 0.1  # the best validation epoch's weights are kept
    patience: int = 0  # 0: run every epoch (diffusion samples keep improving after the loss flattens)
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "cpu"
    progress: bool = True


def alpha_bars(timesteps: int, schedule: str) -> torch.Tensor:
    """ᾱ_t for t = 0..T-1 (float64), the fraction of signal variance left after t+1 noising steps."""
    if schedule == "cosine":
        s = 0.008
        steps = torch.arange(timesteps + 1, dtype=torch.float64) / timesteps
        f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
        betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    elif schedule == "linear":
        scale = 1000.0 / timesteps
        betas = torch.linspace(1e-4 * scale, 0.02 * scale, timesteps, dtype=torch.float64).clamp(max=0.999)
    else:
        raise ValueError(f"unknown beta schedule {schedule!r}; valid: {list(SCHEDULES)}")
    return torch.cumprod(1 - betas, 0)


def timestep_embedding(t: torch.Tensor, size: int) -> torch.Tensor:
    """t (B,) integer steps → (B, size) sinusoidal features."""
    half = size // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / max(half, 1))
    args = t.float()[:, None] * freqs[None]
    emb = torch.cat([torch.sin(args), torch.cos(args)], -1)
    return nn.functional.pad(emb, (0, size - 2 * half))


def make_generator(generator: torch.Generator | int | None) -> torch.Generator | None:
    """An int seeds a new CPU ``torch.Generator``; a generator or None is passed through."""
    return torch.Generator().manual_seed(generator) if isinstance(generator, int) else generator


def randn(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """Standard normal noise drawn on the generator's device (the CPU by default), so a seed gives
    the same numbers whatever device the model is on."""
    gen_device = generator.device if generator is not None else "cpu"
    return torch.randn(shape, generator=generator, device=gen_device).to(device)


class DiffusionModel(SavedModel):
    """p(x | cond): cond (B, C), x (B, *x_shape)."""

    MODEL, CONFIG, SIZES = "diffusion", DiffusionConfig, ("cond_size", "x_shape")

    def __init__(self, cond_size: int, x_shape: list[int], config: DiffusionConfig | None = None):
        super().__init__()
        self.config = config = config or DiffusionConfig()
        if not 1 <= config.ddim_steps <= config.timesteps:
            raise ValueError(f"ddim_steps {config.ddim_steps} must lie in 1..timesteps ({config.timesteps})")
        self.cond_size, self.x_shape = cond_size, list(x_shape)
        self.x_size = math.prod(self.x_shape)
        self.cond_norm = Normalizer(cond_size)
        self.x_norm = output_normalizer(self.x_size)
        self.net = mlp([self.x_size + cond_size + config.time_embed, *config.hidden, self.x_size], config.activation)
        self.register_buffer("x_low", torch.full((self.x_size,), -math.inf))  # x0 clip range, normalized units
        self.register_buffer("x_high", torch.full((self.x_size,), math.inf))
        self.register_buffer("alpha_bar", alpha_bars(config.timesteps, config.schedule).float(), persistent=False)
        self.history: list[dict] = []
        self.summary: dict = {}

    def fit_normalizers(self, cond: torch.Tensor, x: torch.Tensor) -> None:
        """Set the condition and x normalizers to the statistics of cond (N, C) and x (N, *x_shape),
        and the x0 clip range to x's normalized min/max widened by ``clip_margin``."""
        fit_normalizer(self.cond_norm, cond)
        x = x.reshape(len(x), -1)
        fit_normalizer(self.x_norm, x)
        xn = self.x_norm(x)
        low, high = xn.min(0).values, xn.max(0).values
        margin = self.config.clip_margin * (high - low)
        self.x_low.copy_(low - margin)
        self.x_high.copy_(high + margin)

    def epsilon(self, x_t: torch.Tensor, t: torch.Tensor, cond_n: torch.Tensor) -> torch.Tensor:
        """Predicted noise: x_t (B, X) normalized, t (B,) steps, cond_n (B, C) normalized → (B, X)."""
        return self.net(torch.cat([x_t, cond_n, timestep_embedding(t, self.config.time_embed)], -1))

    def loss(self, cond: torch.Tensor, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """DDPM's simple loss: the MSE of the predicted noise at a uniformly drawn step."""
        x0 = self.x_norm(x.reshape(len(x), -1))
        gen_device = generator.device if generator is not None else "cpu"
        t = torch.randint(0, self.config.timesteps, (len(x0),), generator=generator, device=gen_device).to(x0.device)
        noise = randn(tuple(x0.shape), generator, x0.device)
        ab = self.alpha_bar[t][:, None]
        x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        return (self.epsilon(x_t, t, self.cond_norm(cond)) - noise).pow(2).mean()

    def ddim_timesteps(self, steps: int) -> torch.Tensor:
        """The ``steps`` (or fewer, where rounding repeats one) descending steps DDIM visits, from T-1 to 0."""
        if not 1 <= steps <= self.config.timesteps:
            raise ValueError(f"ddim_steps {steps} must lie in 1..{self.config.timesteps}")
        return torch.linspace(self.config.timesteps - 1, 0, steps).round().long().unique_consecutive()

    @torch.no_grad()
    def sample(
        self,
        cond: Array,
        n: int = 1,
        ddim_steps: int | None = None,
        eta: float | None = None,
        generator: torch.Generator | int | None = None,
    ) -> Array:
        """cond (B, C) → samples (B, n, *x_shape) in data units, by DDIM over all B·n at once.

        ``eta`` 0 is deterministic given the initial noise, so a seed (an int or a
        ``torch.Generator``) fixes the samples. numpy in, numpy out (a tensor in, a tensor out).
        """
        device = self.alpha_bar.device
        c = as_tensor(cond, device)
        if c.ndim != 2 or c.shape[1] != self.cond_size:
            raise ValueError(f"cond has shape {tuple(c.shape)}, expected (B, {self.cond_size})")
        gen = make_generator(generator)
        steps = self.ddim_timesteps(self.config.ddim_steps if ddim_steps is None else ddim_steps)
        eta = self.config.eta if eta is None else eta
        cond_n = self.cond_norm(c).repeat_interleave(n, 0)  # (B·n, C), condition-major
        x = randn((len(cond_n), self.x_size), gen, device)
        for i, t in enumerate(steps.tolist()):
            t_prev = int(steps[i + 1]) if i + 1 < len(steps) else -1
            x = self._ddim_step(x, t, t_prev, cond_n, eta, gen)
        out = denormalize(self.x_norm, x).reshape(len(c), n, *self.x_shape)
        return like_input(out, cond)

    def _ddim_step(
        self, x: torch.Tensor, t: int, t_prev: int, cond_n: torch.Tensor, eta: float, gen: torch.Generator | None
    ) -> torch.Tensor:
        """One DDIM update x_t → x_{t_prev} (t_prev -1: the clean sample).

        x0 = (x_t - √(1-ᾱ)·ε)/√ᾱ amplifies the error of ε by 1/√ᾱ, about 1000 at the last step of
        a cosine schedule, so without a clamp the first steps throw samples far off; hence
        ``clip_x0`` (diffusers' clip_sample, with the data's own range instead of ±1).
        """
        ab = self.alpha_bar[t]
        ab_prev = self.alpha_bar[t_prev] if t_prev >= 0 else torch.ones_like(ab)
        eps = self.epsilon(x, torch.full((len(x),), t, device=x.device), cond_n)
        x0 = (x - (1 - ab).sqrt() * eps) / ab.sqrt()
        if self.config.clip_x0:
            x0 = torch.maximum(torch.minimum(x0, self.x_high), self.x_low)
            eps = (x - ab.sqrt() * x0) / (1 - ab).sqrt()
        sigma = eta * ((1 - ab_prev) / (1 - ab) * (1 - ab / ab_prev)).clamp(min=0).sqrt()
        x = ab_prev.sqrt() * x0 + (1 - ab_prev - sigma**2).clamp(min=0).sqrt() * eps
        if eta > 0 and t_prev >= 0:
            x = x + sigma * randn(tuple(x.shape), gen, x.device)
        return x


def train_diffusion(
    cond: Array, x: Array, cfg: DiffusionConfig | None = None, callback: Callable[[dict], bool | None] | None = None
) -> DiffusionModel:
    """Fit p(x | cond) on cond (N, C) and x (N, ...) by DDPM's epsilon regression.

    The returned model carries ``history`` (per epoch: train_loss, val_loss — the noise MSE,
    the validation one with fixed noise — and time_s) and ``summary``.
    """
    cfg = cfg or DiffusionConfig()
    c, x_t = as_tensor(cond, cfg.device), as_tensor(x, cfg.device)
    if c.ndim != 2 or x_t.ndim < 2:
        raise ValueError(f"expected cond (N, C) and x (N, ...), got {tuple(c.shape)} and {tuple(x_t.shape)}")
    check_rows("cond", c, None)
    check_rows("x", x_t, len(c))
    with torch.random.fork_rng(devices=[]):  # seeded initial weights, the global generator untouched
        torch.manual_seed(cfg.seed)
        model = DiffusionModel(c.shape[1], list(x_t.shape[1:]), cfg).to(cfg.device)
    train_idx, val_idx = split_indices(len(c), cfg.val_fraction, cfg.seed)
    model.fit_normalizers(c[train_idx], x_t[train_idx])
    model.history = fit_supervised(model, (c, x_t), train_idx, val_idx, cfg, "diffusion", callback)
    best = min(model.history, key=lambda h: h["val_loss"])
    model.summary = {
        "epochs": len(model.history),
        "best_epoch": best["epoch"],
        "val_loss": best["val_loss"],
        "train_loss": evaluate_loss(model, (c, x_t), train_idx, cfg.seed),
        "time_s": model.history[-1]["time_s"],
    }
    return model


# -- the residual adapter over a base plan ---------------------------------------------------------
def plan_condition(obs: Array, base_plan: Array) -> Array:
    """obs (B, O) and base_plan (B, H, D) → the condition (B, O + H·D) of a residual adapter."""
    if isinstance(obs, torch.Tensor):
        return torch.cat([obs, torch.as_tensor(base_plan).reshape(len(obs), -1).to(obs)], -1)
    return np.concatenate([np.asarray(obs, np.float32), np.asarray(base_plan, np.float32).reshape(len(obs), -1)], -1)


def sample_plans(
    model: DiffusionModel,
    obs: Array,
    base_plan: Array,
    n: int,
    ddim_steps: int | None = None,
    eta: float | None = None,
    generator: torch.Generator | int | None = None,
) -> Array:
    """``n`` candidate plans per observation: base_plan (B, H, D) + sampled residuals → (B, n, H, D)."""
    residuals = model.sample(plan_condition(obs, base_plan), n, ddim_steps, eta, generator)
    if isinstance(residuals, torch.Tensor):
        return torch.as_tensor(base_plan).to(residuals)[:, None] + residuals
    return residuals + np.asarray(base_plan, np.float32)[:, None]


# -- checkpoints ------------------------------------------------------------------------------------


def save_diffusion(directory: str | Path, model: DiffusionModel, meta: dict | None = None) -> Path:
    """Write ``model`` as an embody checkpoint directory, atomically (see ``trajectory.save_model``)."""
    return save_model(directory, model, meta)


def load_diffusion(directory: str | Path, device: str = "cpu") -> DiffusionModel:
    """Load a model saved by ``save_diffusion`` (eval mode); anything else raises ``CheckpointError``."""
    return load_model(directory, DiffusionModel, device)
