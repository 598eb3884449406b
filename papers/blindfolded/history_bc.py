"""History-conditioned behavioral cloning for discrete actions: a GRU over the observation history.

The goal is not observed, so the policy conditions on everything seen so far: at step t its input is the
observation features x_t and the previous action a_{t-1} (one-hot, "none" at t = 0), through an MLP
encoder into a GRU whose output gives action logits. Training is cross-entropy on the demonstrated
actions, batched over whole episodes padded to the longest with a mask (one forward pass per minibatch
of episodes, no per-step Python loop). ``embody.policies.bc`` trains Gaussian (continuous) policies by
MSE/NLL over BPTT windows; this trainer exists because its losses, normaliser and ``log_std`` device
lookup are all tied to continuous actions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn


@dataclass
class HistoryBCConfig:
    """Training of the history BC learner (a GRU over observation features and previous actions)."""

    hidden: int = 64  # GRU units
    embed: int = 64  # encoder units
    epochs: int = 150  # passes over the episodes (each a few gradient steps at most)
    batch_episodes: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-4
    max_grad_norm: float = 1.0
    target_loss: float = 0.0  # stop once an epoch's mean loss falls below this (0: run every epoch)
    seed: int = 0


class HistoryPolicy(nn.Module):
    """Logits over ``n_actions`` from the history of ``feature_size`` observations and previous actions."""

    def __init__(self, feature_size: int, n_actions: int, hidden: int = 64, embed: int = 64):
        super().__init__()
        self.feature_size, self.n_actions, self.hidden = feature_size, n_actions, hidden
        self.encoder = nn.Sequential(nn.Linear(feature_size + n_actions + 1, embed), nn.ReLU())
        self.rnn = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_actions)

    def init_kwargs(self) -> dict:
        """The constructor's keyword arguments, for rebuilding the model from a checkpoint."""
        return {
            "feature_size": self.feature_size,
            "n_actions": self.n_actions,
            "hidden": self.hidden,
            "embed": self.encoder[0].out_features,
        }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> HistoryPolicy:
        return cls(**kwargs)

    def spec(self) -> dict:
        """The checkpoint's model description: ``model``, ``version`` and ``init_kwargs``."""
        return {"model": "history_bc", "version": 1, **self.init_kwargs()}

    def _inputs(self, x: torch.Tensor, prev_action: torch.Tensor) -> torch.Tensor:
        prev = torch.nn.functional.one_hot(prev_action.long() + 1, self.n_actions + 1).to(x.dtype)  # -1: none
        return self.encoder(torch.cat([x, prev], dim=-1))

    def forward(self, x: torch.Tensor, prev_action: torch.Tensor) -> torch.Tensor:
        """(B, T, F) features and (B, T) previous actions → (B, T, n_actions) logits."""
        out, _ = self.rnn(self._inputs(x, prev_action))
        return self.head(out)

    def initial_state(self, n: int) -> torch.Tensor:
        """The GRU's zero hidden state for ``n`` sequences, (1, n, hidden)."""
        return torch.zeros(1, n, self.hidden)

    def step(self, x: torch.Tensor, prev_action: torch.Tensor, state: torch.Tensor):
        """One step for n episodes: (n, F), (n,) → (n, n_actions) logits and the new (1, n, H) state."""
        out, state = self.rnn(self._inputs(x.float(), prev_action)[:, None], state)
        return self.head(out[:, 0]), state


def pad_episodes(features: Sequence[np.ndarray], actions: Sequence[np.ndarray]):
    """Lists of (T_i, F) features and (T_i,) actions → padded (B, T, F), actions (B, T), previous actions
    (B, T) (-1 at t = 0) and a (B, T) bool mask of real steps."""
    if not features or len(features) != len(actions):
        raise ValueError(
            f"need as many feature as action sequences (and at least one), got {len(features)} and {len(actions)}"
        )
    B, T, F = len(features), max(len(f) for f in features), features[0].shape[-1]
    x = torch.zeros(B, T, F)
    a = torch.zeros(B, T, dtype=torch.long)
    prev = torch.full((B, T), -1, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    for i, (f, act) in enumerate(zip(features, actions)):
        n = len(f)
        if n == 0 or len(act) != n:
            raise ValueError(f"episode {i}: {n} observations and {len(act)} actions (need equal, non-zero)")
        x[i, :n] = torch.as_tensor(f, dtype=torch.float32)
        a[i, :n] = torch.as_tensor(act, dtype=torch.long)
        prev[i, 1:n] = a[i, : n - 1]
        mask[i, :n] = True
    return x, a, prev, mask


def train_history_bc(
    features: Sequence[np.ndarray],
    actions: Sequence[np.ndarray],
    n_actions: int,
    config: HistoryBCConfig | None = None,
    progress_cb: Callable[[dict], None] | None = None,
) -> tuple[HistoryPolicy, dict]:
    """Fit a ``HistoryPolicy`` to demonstrated episodes; returns it (in eval mode) and the final
    ``loss`` (masked cross-entropy), ``accuracy`` on the demonstrations, ``epochs``, ``grad_steps``, ``time_s``."""
    cfg = config or HistoryBCConfig()
    torch.manual_seed(cfg.seed)
    x, a, prev, mask = pad_episodes(features, actions)
    if int(a[mask].max()) >= n_actions or int(a[mask].min()) < 0:
        raise ValueError(f"demonstrated actions must lie in 0..{n_actions - 1}")
    policy = HistoryPolicy(x.shape[-1], n_actions, cfg.hidden, cfg.embed)
    opt = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    B = x.shape[0]
    start, steps, loss_v, epochs = time.perf_counter(), 0, float("nan"), 0
    policy.train()
    for epoch in range(cfg.epochs):
        epochs = epoch + 1
        order = torch.randperm(B, generator=gen)
        total, n = 0.0, 0
        for s in range(0, B, cfg.batch_episodes):
            idx = order[s : s + cfg.batch_episodes]
            T = int(mask[idx].sum(1).max())  # trim this minibatch's padding
            logits = policy(x[idx, :T], prev[idx, :T])
            m = mask[idx, :T]
            loss = nn.functional.cross_entropy(logits[m], a[idx, :T][m])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            opt.step()
            total, n, steps = total + loss.item(), n + 1, steps + 1
        loss_v = total / max(n, 1)
        if progress_cb is not None:
            progress_cb({"epoch": epochs, "loss": loss_v})
        if loss_v < cfg.target_loss:
            break
    policy.eval()
    with torch.no_grad():
        acc = float((policy(x, prev).argmax(-1)[mask] == a[mask]).float().mean())
    return policy, {
        "loss": loss_v,
        "accuracy": acc,
        "epochs": epochs,
        "grad_steps": steps,
        "time_s": round(time.perf_counter() - start, 2),
    }


def save_policy(policy: HistoryPolicy, directory, extra: dict | None = None) -> Path:
    """An embody checkpoint directory (model.safetensors + checkpoint.json, ``extra`` as metadata), atomically."""
    from embody.policies.checkpoint import save_checkpoint

    return save_checkpoint(directory, policy, policy.spec(), extra or {})


def load_policy(directory) -> tuple[HistoryPolicy, dict]:
    """(policy in eval mode, the metadata saved with it); a damaged or foreign checkpoint raises
    ``CheckpointError`` naming the file."""
    from embody.policies.checkpoint import CheckpointError, load_checkpoint

    ck = load_checkpoint(directory)
    if not isinstance(ck.policy, HistoryPolicy):
        raise CheckpointError(f"{directory} is a checkpoint of {type(ck.policy).__name__}, not of HistoryPolicy")
    return ck.policy.eval(), ck.meta


__all__ = ["HistoryBCConfig", "HistoryPolicy", "pad_episodes", "train_history_bc", "save_policy", "load_policy"]
