"""The upper body's "no policy": its reference followed open loop (the open-loop baseline's upper part)."""

from __future__ import annotations

import torch


class ReferencePolicy(torch.nn.Module):
    """action = (reference − q₀) / scale, read from the upper observation's reference columns, so that the PD
    target q₀ + scale·action is the reference itself. obs (n, o) → action (n, len(columns))."""

    def __init__(self, obs_size: int, columns: list[int], scale: float):
        super().__init__()
        self.obs_size, self.columns, self.scale = obs_size, list(columns), float(scale)
        self.action_size = len(self.columns)

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> ReferencePolicy:
        return cls(**kwargs)

    def init_kwargs(self) -> dict:
        return {"obs_size": self.obs_size, "columns": self.columns, "scale": self.scale}

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        return obs[:, self.columns] / self.scale

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass
