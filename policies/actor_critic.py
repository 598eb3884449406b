"""MLP actor-critic with a diagonal Gaussian policy (rsl_rl's layout).

The critic may see more than the actor: ``critic_obs = cat(obs, privileged_obs)`` when the
task has a privileged observation (an asymmetric critic), shape (n, o + p). With ``pixels`` the
actor reads images through a ``PixelEncoder`` and the critic reads the privileged observation
alone (n, p): a visual actor with a state critic (D.VA, PPO from pixels).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from embody.config import PosFloat, PosInt

from .networks import Normalizer, PixelEncoder, mlp


@dataclass
class ActorCriticConfig:
    """Layer sizes, activation, initial action std and obs normalization of ``ActorCritic`` (saved in checkpoints)."""

    actor_hidden: list[PosInt] = field(default_factory=lambda: [64, 64])
    critic_hidden: list[PosInt] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    init_std: PosFloat = 0.6
    normalize_obs: bool = True
    squash: bool = False  # act() returns tanh(mean or sample): SHAC's bounded actions (PPO samples unsquashed)
    pixels: list[int] | None = None  # (C, H, W): the observation is uint8 images, laid flat (sims/pixels.py)
    pixel_precision: str = "float32"  # the pixel encoder's convolutions: float32 | bfloat16 (PixelEncoder)


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
        pixels = config.pixels
        if pixels and not privileged_size:
            raise ValueError("a pixel actor-critic needs a privileged observation for its critic")
        self.critic_size = critic_in = privileged_size if pixels else obs_size + privileged_size
        self.encoder = PixelEncoder(tuple(pixels), precision=config.pixel_precision) if pixels else None
        features = PixelEncoder.FEATURES if pixels else obs_size
        self.actor = mlp([features, *config.actor_hidden, action_size], config.activation, out_gain=0.01)
        self.critic = mlp([critic_in, *config.critic_hidden, 1], config.activation, out_gain=1.0)
        self.log_std = nn.Parameter(torch.full((action_size,), float(torch.tensor(config.init_std).log())))
        self.obs_norm = Normalizer(obs_size) if config.normalize_obs and not pixels else nn.Identity()
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
        without ``normalize_obs``; images are not normalized)."""
        for norm, x in ((self.obs_norm, obs), (self.critic_norm, critic_obs)):
            if isinstance(norm, Normalizer):
                norm.update(x)

    def critic_input(self, obs: torch.Tensor, privileged: torch.Tensor) -> torch.Tensor:
        """What the critic reads (n, critic_size): cat(obs, privileged), or the privileged part alone (pixels)."""
        if self.encoder is not None:
            return privileged
        return torch.cat([obs, privileged], dim=-1) if privileged.shape[-1] else obs

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the action depends on: the actor, its log-std and the image encoder (if any)."""
        encoder = list(self.encoder.parameters()) if self.encoder is not None else []
        return [*encoder, *self.actor.parameters(), self.log_std]

    def distribution(self, obs: torch.Tensor, augment: bool = False) -> torch.distributions.Normal:
        """The action distribution for obs (n, o): a ``Normal`` of shape (n, a); sum
        ``log_prob`` over the last axis for one log-likelihood per env. ``augment``: random shifts of images."""
        mean = self.actor(self._features(obs, augment))
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def _features(self, obs: torch.Tensor, augment: bool = False) -> torch.Tensor:
        return self.encoder(obs, augment) if self.encoder is not None else self.obs_norm(obs)

    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """(n, o + p) → (n,)"""
        return self.critic(self.critic_norm(critic_obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a): the mean when ``deterministic``, else a sample; unclipped (tanh of it with
        ``squash``), no gradients."""
        action = self.actor(self._features(obs)) if deterministic else self.distribution(obs).sample()
        return torch.tanh(action) if self.config.squash else action

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass
