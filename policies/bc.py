"""Behavior cloning: fit a policy's action mean to demonstrated actions.

MLP policies (ActorCritic) train on shuffled (obs, action) pairs. Recurrent policies
(anything with ``forward_sequence``) train on contiguous windows of ``seq_len`` steps by
backpropagation through time, with the state zeroed at episode starts; a window that begins
mid-episode has no context for its first steps, so its first ``burn_in`` steps (those before
any episode start inside the window) are run but not scored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from .datasets import Demonstrations
from .networks import Normalizer

LOSSES = ("mse", "gaussian-nll")


@dataclass
class BCConfig:
    """Settings of ``train_bc``: epochs, minibatch size, optimizer, loss, and the BPTT window of recurrent policies."""

    epochs: int = 50
    batch_size: int = 256  # transitions per minibatch; recurrent: max(1, batch_size // seq_len) windows
    lr: float = 1e-3
    weight_decay: float = 0.0
    loss: str = "mse"  # mse | gaussian-nll (also fits log_std)
    seq_len: int = 32  # recurrent: BPTT window length
    burn_in: int = 8  # recurrent: unscored context steps at the start of a mid-episode window
    fit_normalizer: bool = True  # set the obs normalizer to the data's statistics first
    max_grad_norm: float = 1.0
    seed: int = 0


def is_recurrent(policy) -> bool:
    """True for a policy with ``forward_sequence`` (trained on BPTT windows rather than shuffled pairs)."""
    return hasattr(policy, "forward_sequence")


def train_bc(
    policy: torch.nn.Module,
    dataset: Demonstrations,
    config: BCConfig | None = None,
    progress_cb: Callable[[dict], bool | None] | None = None,
) -> dict:
    """Train ``policy`` in place on ``dataset``; ``progress_cb(epoch_metrics)`` may return True to stop.

    Returns the last epoch's mean ``loss`` and ``mse`` (training data), ``epochs``,
    ``grad_steps``, ``time_s``.
    """
    cfg = config or BCConfig()
    if cfg.loss not in LOSSES:
        raise ValueError(f"unknown BC loss {cfg.loss!r}; valid: {list(LOSSES)}")
    if (dataset.obs_size, dataset.action_size) != (policy.obs_size, policy.action_size):
        raise ValueError(
            f"demonstrations have obs/action sizes {dataset.obs_size}/{dataset.action_size}, "
            f"the policy {policy.obs_size}/{policy.action_size}"
        )
    device = policy.log_std.device
    obs, actions, starts = dataset.obs.to(device), dataset.actions.to(device), dataset.episode_starts.to(device)
    if cfg.fit_normalizer and isinstance(policy.obs_norm, Normalizer):
        fit_normalizer(policy.obs_norm, obs)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    recurrent = is_recurrent(policy)
    policy.train()
    start, steps, metrics = time.perf_counter(), 0, {}
    for epoch in range(cfg.epochs):
        batches = _windows(obs, actions, starts, cfg, gen) if recurrent else _pairs(obs, actions, cfg, gen)
        totals = {"loss": 0.0, "mse": 0.0}
        n_batches = 0
        for batch in batches:
            loss, mse = _losses(policy, *batch, cfg.loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            optimizer.step()
            totals["loss"] += loss.item()
            totals["mse"] += mse.item()
            n_batches += 1
        steps += n_batches
        metrics = {"epoch": epoch + 1, **{k: v / max(n_batches, 1) for k, v in totals.items()}}
        if progress_cb is not None and progress_cb(metrics):
            break
    policy.eval()
    policy.reset()  # a recurrent state from before training is stale
    return {
        "loss": metrics.get("loss", float("nan")),
        "mse": metrics.get("mse", float("nan")),
        "epochs": metrics.get("epoch", 0),
        "grad_steps": steps,
        "time_s": time.perf_counter() - start,
    }


@torch.no_grad()
def action_mse(policy: torch.nn.Module, data: Demonstrations) -> float:
    """Mean squared error of the deterministic action over ``data`` (a recurrent policy runs
    every segment from its start, as in deployment)."""
    device = policy.log_std.device
    obs, actions = data.obs.to(device), data.actions.to(device)
    if is_recurrent(policy):
        mean = policy.forward_sequence(obs[:, None], None, data.episode_starts.to(device)[:, None]).mean[:, 0]
    else:
        mean = policy.act(obs, deterministic=True)
    return float((mean - actions).pow(2).mean())


def fit_normalizer(norm: Normalizer, x: torch.Tensor) -> None:
    """Set ``norm``'s running statistics to those of ``x`` (N, o) alone."""
    norm.mean.zero_()
    norm.var.fill_(1.0)
    norm.count.fill_(norm.eps)
    norm.update(x)


# -- minibatches ------------------------------------------------------------------------------
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]


def _pairs(obs: torch.Tensor, actions: torch.Tensor, cfg: BCConfig, gen: torch.Generator) -> Iterator[Batch]:
    """Shuffled (obs (B, o), actions (B, a), None, None)."""
    for idx in torch.randperm(obs.shape[0], generator=gen).to(obs.device).split(cfg.batch_size):
        yield obs[idx], actions[idx], None, None


def _windows(
    obs: torch.Tensor, actions: torch.Tensor, starts: torch.Tensor, cfg: BCConfig, gen: torch.Generator
) -> Iterator[Batch]:
    """Non-overlapping windows at a random offset, shuffled: obs (L, B, o), actions (L, B, a),
    done_mask (L, B) and the loss mask (L, B)."""
    N = obs.shape[0]
    L = min(cfg.seq_len, N)
    offset = int(torch.randint(0, min(L, N - L + 1), (1,), generator=gen))
    first = torch.arange(offset, N - L + 1, L)
    first = first[torch.randperm(len(first), generator=gen)].to(obs.device)
    steps = torch.arange(L, device=obs.device)
    burn_in = min(cfg.burn_in, L - 1)
    for chunk in first.split(max(1, cfg.batch_size // L)):
        idx = (chunk[:, None] + steps).T  # (L, B)
        done = starts[idx]
        scored = (steps[:, None] >= burn_in) | (done.cumsum(0) > 0)
        yield obs[idx], actions[idx], done, scored


def _losses(policy, obs, actions, done, scored, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(training loss, action MSE), both averaged over the scored steps."""
    if done is None:
        mean = policy.distribution(obs).mean
    else:
        mean = policy.forward_sequence(obs, None, done).mean
    mse = (mean - actions).pow(2).mean(-1)
    if kind == "mse":
        per_step = mse
    else:
        per_step = -torch.distributions.Normal(mean, policy.log_std.exp()).log_prob(actions).sum(-1)
    if scored is None:
        return per_step.mean(), mse.detach().mean()
    w = scored.to(mean.dtype)
    total = w.sum().clamp(min=1.0)
    return (per_step * w).sum() / total, (mse.detach() * w).sum() / total
