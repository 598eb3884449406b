"""MLP actor-critic with a diagonal Gaussian policy (rsl_rl's layout).

The critic may see more than the actor: ``critic_obs = cat(obs, privileged_obs)`` when the
task has a privileged observation (an asymmetric critic), shape (n, o + p).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .networks import Normalizer, mlp


@dataclass
class ActorCriticConfig:
    actor_hidden: list[int] = field(default_factory=lambda: [64, 64])
    critic_hidden: list[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    init_std: float = 0.6
    normalize_obs: bool = True


class ActorCritic(nn.Module):
    def __init__(self, obs_size: int, action_size: int, privileged_size: int = 0,
                 config: ActorCriticConfig | None = None):
        super().__init__()
        self.config = config = config or ActorCriticConfig()
        self.obs_size, self.action_size, self.privileged_size = obs_size, action_size, privileged_size
        critic_in = obs_size + privileged_size
        self.actor = mlp([obs_size, *config.actor_hidden, action_size], config.activation, out_gain=0.01)
        self.critic = mlp([critic_in, *config.critic_hidden, 1], config.activation, out_gain=1.0)
        self.log_std = nn.Parameter(torch.full((action_size,), float(torch.tensor(config.init_std).log())))
        self.obs_norm = Normalizer(obs_size) if config.normalize_obs else nn.Identity()
        self.critic_norm = Normalizer(critic_in) if config.normalize_obs else nn.Identity()

    def init_kwargs(self) -> dict:
        """What ``ActorCritic(**kwargs)`` needs to rebuild this network (saved in checkpoints)."""
        from dataclasses import asdict

        return {"obs_size": self.obs_size, "action_size": self.action_size,
                "privileged_size": self.privileged_size, "config": asdict(self.config)}

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "ActorCritic":
        kwargs = dict(kwargs)
        kwargs["config"] = ActorCriticConfig(**kwargs.get("config", {}))
        return cls(**kwargs)

    def update_normalizers(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        if isinstance(self.obs_norm, Normalizer):
            self.obs_norm.update(obs)
            self.critic_norm.update(critic_obs)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Normal:
        mean = self.actor(self.obs_norm(obs))
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """(n, o + p) → (n,)"""
        return self.critic(self.critic_norm(critic_obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        if deterministic:
            return self.actor(self.obs_norm(obs))
        return self.distribution(obs).sample()

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass
