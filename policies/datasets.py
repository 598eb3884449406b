"""Demonstrations: (observation, action) pairs in time order, for behavior cloning.

Rows are ``N`` consecutive steps of trajectory segments laid end to end; ``episode_starts``
marks the first step of every episode and of every segment, so that a recurrent policy
knows where its state must be zeroed. Saved as one safetensors file whose header metadata
holds the JSON description. Never pickle.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from embody import exits

FORMAT, FORMAT_VERSION = "embody.demonstrations", 1


class DatasetError(ValueError):
    """A demonstrations file is missing, damaged, foreign or too new."""
    exit_code = exits.INPUT


@dataclass
class Demonstrations:
    obs: torch.Tensor  # (N, o) float32
    actions: torch.Tensor  # (N, a) float32
    episode_starts: torch.Tensor  # (N,) bool
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.obs = torch.as_tensor(self.obs, dtype=torch.float32)
        self.actions = torch.as_tensor(self.actions, dtype=torch.float32)
        self.episode_starts = torch.as_tensor(self.episode_starts, dtype=torch.bool)
        n = self.obs.shape[0]
        if self.obs.ndim != 2 or self.actions.ndim != 2 or self.actions.shape[0] != n \
                or self.episode_starts.shape != (n,):
            raise ValueError(f"inconsistent shapes: obs {tuple(self.obs.shape)}, actions "
                             f"{tuple(self.actions.shape)}, episode_starts {tuple(self.episode_starts.shape)}")
        if n and not self.episode_starts[0]:  # a segment always starts the data
            self.episode_starts = self.episode_starts.clone()
            self.episode_starts[0] = True

    def __len__(self) -> int:
        return self.obs.shape[0]

    @property
    def obs_size(self) -> int:
        return self.obs.shape[1]

    @property
    def action_size(self) -> int:
        return self.actions.shape[1]

    @staticmethod
    def concat(parts: list["Demonstrations"]) -> "Demonstrations":
        """Segments of every part, in order (the first row of each part starts a segment)."""
        return Demonstrations(torch.cat([p.obs for p in parts]), torch.cat([p.actions for p in parts]),
                              torch.cat([p.episode_starts for p in parts]), dict(parts[0].meta) if parts else {})

    # -- collection --------------------------------------------------------------------------
    @classmethod
    def from_rollouts(cls, env, expert, steps: int, expert_obs: str = "obs", noise_std: float = 0.0,
                      seed: int = 0) -> "Demonstrations":
        """Roll out ``expert`` for ``steps`` steps in each of ``env``'s n envs (N = n * steps).

        ``expert`` is a Policy (its deterministic ``act``) or a callable (n, e) → (n, a) on
        torch tensors; ``expert_obs`` is "obs" or "privileged" (obs concatenated with the
        privileged obs). Labels are the expert's actions; with ``noise_std`` > 0 the env is
        driven by the labels plus Gaussian noise, to visit states the expert would not.
        """
        act = as_action_fn(expert)
        gen = torch.Generator().manual_seed(seed)
        obs, priv = env.reset()
        reset_policy(expert, None)
        rows: dict[str, list] = {"obs": [], "actions": [], "starts": []}
        starts = np.ones(env.n_envs, dtype=bool)
        returns: list[float] = []
        for _ in range(steps):
            label = act(expert_input(obs, priv, expert_obs))
            rows["obs"].append(torch.as_tensor(obs, dtype=torch.float32))
            rows["actions"].append(label)
            rows["starts"].append(torch.as_tensor(starts))
            action = label + noise_std * torch.randn(label.shape, generator=gen) if noise_std else label
            obs, _, terminated, truncated, info = env.step(action.numpy())
            priv, starts = info.privileged_obs, terminated | truncated
            reset_policy(expert, starts)
            returns.extend(info.episode_return.tolist())
        return cls.from_time_major(torch.stack(rows["obs"]), torch.stack(rows["actions"]),
                                   torch.stack(rows["starts"]), {"episode_returns": returns})

    @classmethod
    def from_time_major(cls, obs: torch.Tensor, actions: torch.Tensor, starts: torch.Tensor,
                        meta: dict | None = None) -> "Demonstrations":
        """obs (T, n, o), actions (T, n, a), starts (T, n) → env-major rows (N = n * T),
        each env's T steps one segment."""
        starts = starts.clone()
        starts[0] = True
        flat = lambda x: x.transpose(0, 1).reshape(-1, *x.shape[2:])  # noqa: E731
        return cls(flat(obs), flat(actions), flat(starts), meta or {})

    # -- files -------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write one safetensors file atomically (a temporary file renamed into place)."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "format_version": FORMAT_VERSION, "meta": self.meta}
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            save_file({"obs": self.obs.contiguous(), "actions": self.actions.contiguous(),
                       "episode_starts": self.episode_starts.contiguous()}, str(tmp),
                      metadata={"embody": json.dumps(header, default=str)})
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Demonstrations":
        from safetensors import SafetensorError, safe_open

        path = Path(path)
        if not path.is_file():
            raise DatasetError(f"{path}: no such demonstrations file")
        try:
            with safe_open(str(path), framework="pt") as f:
                header = json.loads((f.metadata() or {}).get("embody", "null"))
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except (SafetensorError, OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"cannot read {path}: {e}") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise DatasetError(f"{path} is not an embody demonstrations file")
        if header.get("format_version") != FORMAT_VERSION:
            raise DatasetError(f"{path}: format version {header.get('format_version')!r} is not supported "
                               f"(this embody reads version {FORMAT_VERSION})")
        try:
            return cls(tensors["obs"], tensors["actions"], tensors["episode_starts"], header.get("meta", {}))
        except (KeyError, ValueError) as e:
            raise DatasetError(f"{path}: {e}") from None


# -- helpers shared with distillation ---------------------------------------------------------
def as_action_fn(policy) -> Callable[[torch.Tensor], torch.Tensor]:
    """A Policy's deterministic ``act``, or the callable itself, under no_grad: CPU tensors
    (n, e) → CPU float32 (n, a), moving the input to the policy's device and back."""
    fn = (lambda x: policy.act(x, deterministic=True)) if hasattr(policy, "act") else policy
    param = next(policy.parameters(), None) if isinstance(policy, torch.nn.Module) else None
    device = param.device if param is not None else torch.device("cpu")

    @torch.no_grad()
    def act(x: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(fn(x.to(device))).float().cpu()

    return act


def reset_policy(policy, done: np.ndarray | None) -> None:
    """Zero a recurrent policy's state where ``done`` (n,) is set (all envs when None)."""
    if not hasattr(policy, "reset"):
        return
    if done is None:
        policy.reset(None)
    elif done.any():
        policy.reset(torch.as_tensor(np.flatnonzero(done)))


def expert_input(obs: np.ndarray, priv: np.ndarray, which: str) -> torch.Tensor:
    """obs (n, o) for "obs"; cat(obs, privileged) (n, o + p) for "privileged"."""
    if which not in ("obs", "privileged"):
        raise ValueError(f"expert/teacher obs must be 'obs' or 'privileged', not {which!r}")
    x = np.concatenate([obs, priv], axis=-1) if which == "privileged" else obs
    return torch.as_tensor(x, dtype=torch.float32)
