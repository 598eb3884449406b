"""The Policy protocol: the one interface trainers, evaluators and the deploy loop use.

Shapes: ``n`` envs, ``o`` observation size, ``a`` action size. Actions are nominally in
[-1, 1]; the task maps them to joint targets or torques.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Policy(Protocol):
    """What trainers, evaluators and the deploy loop call: obs (n, o) float32 → action (n, a).

    ``obs_size`` is o and ``action_size`` a (a ``CompositePolicy``'s parts read blocks of the observation).
    ``obs`` is on the policy's device and the action comes back on it,
    without gradients and unclipped (the task clips and scales it). A recurrent policy keeps per-env
    state between ``act`` calls, so call ``reset(env_ids)`` where episodes end. To be saved with
    ``save_checkpoint`` a policy is also an ``nn.Module`` with ``init_kwargs()`` / ``from_kwargs``
    and is registered in ``POLICY_CLASSES`` under its class name.
    """

    obs_size: int
    action_size: int

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a). Normalization, if any, happens inside."""

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Clear recurrent state for ``env_ids`` (all envs when None); a no-op for MLPs."""


class RandomPolicy:
    """Uniform random actions in [-1, 1]: the baseline a learned policy is compared against.

    obs (n, o) → action (n, a), float32, drawn from its own ``torch.Generator`` seeded with
    ``seed``: the same seed gives the same actions, whatever else uses torch's global RNG, so a
    study's random baseline is reproducible. ``deterministic`` is ignored (it is the baseline).
    """

    def __init__(self, obs_size: int, action_size: int, seed: int = 0):
        self.obs_size, self.action_size = obs_size, action_size
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return torch.rand(obs.shape[0], self.action_size, generator=self.generator) * 2.0 - 1.0

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass
