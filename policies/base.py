"""The Policy protocol: the one interface trainers, evaluators and the deploy loop use.

Shapes: ``n`` envs, ``o`` observation size, ``a`` action size. Actions are nominally in
[-1, 1]; the task maps them to joint targets or torques.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Policy(Protocol):
    obs_size: int
    action_size: int

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a). Normalization, if any, happens inside."""

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Clear recurrent state for ``env_ids`` (all envs when None); a no-op for MLPs."""
