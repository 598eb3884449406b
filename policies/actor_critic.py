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
    """Layer sizes, activation, initial action std and obs normalization of ``ActorCritic`` (saved in checkpoints)."""

    actor_hidden: list[int] = field(default_factory=lambda: [64, 64])
    critic_hidden: list[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    init_std: float = 0.6
    normalize_obs: bool = True
    squash: bool = False  # act() returns tanh(mean or sample): SHAC's bounded actions (PPO samples unsquashed)


class ActorCritic(nn.Module):
    """A diagonal Gaussian policy and a value function, as two MLPs.

    Actor: obs (n, o) → action mean (n, a); the std ``exp(log_std)`` (a,) is learned but does
    not depend on the observation. Critic: critic_obs (n, o + p) → value (n,). Both inputs go
    through running normalizers (``obs_norm``, ``critic_norm``) that ``update_normalizers`` feeds.
    """

    def __init__(
        self, obs_size: int, action_size: int, privileged_size: int = 0, config: ActorCriticConfig | None = None
    ):
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

        return {
            "obs_size": self.obs_size,
            "action_size": self.action_size,
            "privileged_size": self.privileged_size,
            "config": asdict(self.config),
        }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> ActorCritic:
        """Rebuild from ``init_kwargs()`` (``config`` as a dict); used by ``load_checkpoint``."""
        kwargs = dict(kwargs)
        kwargs["config"] = ActorCriticConfig(**kwargs.get("config", {}))
        return cls(**kwargs)

    def update_normalizers(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        """Fold obs (n, o) and critic_obs (n, o + p) into the running statistics (a no-op
        without ``normalize_obs``)."""
        if isinstance(self.obs_norm, Normalizer):
            self.obs_norm.update(obs)
            self.critic_norm.update(critic_obs)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Normal:
        """The action distribution for obs (n, o): a ``Normal`` of shape (n, a); sum
        ``log_prob`` over the last axis for one log-likelihood per env."""
        mean = self.actor(self.obs_norm(obs))
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """(n, o + p) → (n,)"""
        return self.critic(self.critic_norm(critic_obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a): the mean when ``deterministic``, else a sample; unclipped (tanh of it with
        ``squash``), no gradients."""
        action = self.actor(self.obs_norm(obs)) if deterministic else self.distribution(obs).sample()
        return torch.tanh(action) if self.config.squash else action

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass
