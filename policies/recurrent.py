"""Recurrent actor-critic: a GRU or LSTM core shared by MLP actor and critic heads.

Shapes: ``T`` time steps, ``n`` envs, ``o`` observation size, ``p`` privileged size,
``a`` action size, ``L`` recurrent layers, ``H`` hidden units, ``S`` state units per layer
(``H`` for a GRU; ``2H`` for an LSTM, whose h and c are concatenated on the last axis so
that the state is always one tensor of shape (L, n, S)).

``act`` keeps a per-env state between calls (for rollouts and deployment); ``reset`` zeroes
it where episodes end. ``forward_sequence`` runs whole (T, n) sequences for BPTT training,
zeroing the state where ``done_mask`` says an episode starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import torch
from torch import nn

from embody.config import PosInt

from .networks import Normalizer, mlp

RNN_TYPES = {"gru": nn.GRU, "lstm": nn.LSTM}


@dataclass
class RecurrentConfig:
    """Core type and sizes, head sizes, initial action std and obs normalization of ``RecurrentActorCritic``."""

    rnn_type: str = "gru"  # gru | lstm
    rnn_hidden: int = 64
    rnn_layers: int = 1
    actor_hidden: list[PosInt] = field(default_factory=lambda: [64])
    critic_hidden: list[PosInt] = field(default_factory=lambda: [64])
    activation: str = "elu"
    init_std: float = 0.6
    normalize_obs: bool = True


class SequenceOutput(NamedTuple):
    """What ``forward_sequence`` returns; shapes as commented on each field."""

    features: torch.Tensor  # (T, n, H) the core's output
    mean: torch.Tensor  # (T, n, a) the action mean
    hidden: torch.Tensor  # (L, n, S) the state after the last step


class RecurrentActorCritic(nn.Module):
    """A diagonal Gaussian policy over a recurrent core; the critic head sees the core's
    features and, when the task has one, the privileged observation (an asymmetric critic)."""

    def __init__(
        self, obs_size: int, action_size: int, privileged_size: int = 0, config: RecurrentConfig | None = None
    ):
        super().__init__()
        self.config = config = config or RecurrentConfig()
        if config.rnn_type not in RNN_TYPES:
            raise ValueError(f"unknown rnn_type {config.rnn_type!r}; valid: {sorted(RNN_TYPES)}")
        self.obs_size, self.action_size, self.privileged_size = obs_size, action_size, privileged_size
        H = config.rnn_hidden
        self.rnn = RNN_TYPES[config.rnn_type](obs_size, H, config.rnn_layers)
        self.actor = mlp([H, *config.actor_hidden, action_size], config.activation, out_gain=0.01)
        self.critic = mlp([H + privileged_size, *config.critic_hidden, 1], config.activation, out_gain=1.0)
        self.log_std = nn.Parameter(torch.full((action_size,), float(torch.tensor(config.init_std).log())))
        norm = config.normalize_obs
        self.obs_norm = Normalizer(obs_size) if norm else nn.Identity()
        self.privileged_norm = Normalizer(privileged_size) if norm and privileged_size else nn.Identity()
        self._hidden: torch.Tensor | None = None  # (L, n, S) for act(); not part of the state_dict

    @property
    def state_size(self) -> int:
        """S: units of recurrent state per layer and env."""
        return self.config.rnn_hidden * (2 if self.config.rnn_type == "lstm" else 1)

    def init_kwargs(self) -> dict:
        """What ``RecurrentActorCritic(**kwargs)`` needs to rebuild this network (saved in checkpoints)."""
        return {
            "obs_size": self.obs_size,
            "action_size": self.action_size,
            "privileged_size": self.privileged_size,
            "config": asdict(self.config),
        }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> RecurrentActorCritic:
        """Rebuild from ``init_kwargs()`` (``config`` as a dict); used by ``load_checkpoint``."""
        kwargs = dict(kwargs)
        kwargs["config"] = RecurrentConfig(**kwargs.get("config", {}))
        return cls(**kwargs)

    def initial_state(self, n: int, device: torch.device | str | None = None) -> torch.Tensor:
        """Zeros (L, n, S)."""
        device = device if device is not None else self.log_std.device
        return torch.zeros(self.config.rnn_layers, n, self.state_size, device=device)

    def update_normalizers(self, obs: torch.Tensor, critic_obs: torch.Tensor) -> None:
        """obs (..., o), critic_obs (..., o + p) as for ActorCritic."""
        if isinstance(self.obs_norm, Normalizer):
            self.obs_norm.update(obs)
        if isinstance(self.privileged_norm, Normalizer):
            self.privileged_norm.update(critic_obs[..., self.obs_size :])

    # -- sequences -------------------------------------------------------------------------
    def forward_sequence(
        self, obs_seq: torch.Tensor, hidden0: torch.Tensor | None = None, done_mask: torch.Tensor | None = None
    ) -> SequenceOutput:
        """obs_seq (T, n, o), hidden0 (L, n, S) or None (zeros), done_mask (T, n) bool or None.

        ``done_mask[t]`` marks envs where ``obs_seq[t]`` is the first observation of a new
        episode: their state is zeroed before step t. The core runs in one call per stretch
        of steps in which no env starts an episode.
        """
        T, n, _ = obs_seq.shape
        h = self.initial_state(n, obs_seq.device) if hidden0 is None else hidden0
        x = self.obs_norm(obs_seq)
        cuts = [0, T]
        if done_mask is not None:
            done_mask = done_mask.to(torch.bool)
            cuts = [0, *(done_mask[1:].any(1).nonzero().flatten() + 1).tolist(), T]
            h = self._zero_where(h, done_mask[0])
        outs = []
        for t0, t1 in zip(cuts[:-1], cuts[1:]):
            if t0 > 0:
                h = self._zero_where(h, done_mask[t0])
            out, h = self._run(x[t0:t1], h)
            outs.append(out)
        features = torch.cat(outs, dim=0)
        return SequenceOutput(features, self.actor(features), h)

    def _run(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (t, n, o), h (L, n, S) → out (t, n, H), h (L, n, S)."""
        if self.config.rnn_type == "lstm":
            hc = h.chunk(2, dim=-1)
            out, (h1, c1) = self.rnn(x, (hc[0].contiguous(), hc[1].contiguous()))
            return out, torch.cat([h1, c1], dim=-1)
        out, h1 = self.rnn(x, h.contiguous())
        return out, h1

    @staticmethod
    def _zero_where(h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """h (L, n, S) with the envs of ``mask`` (n,) zeroed (out of place, for autograd)."""
        return h * (~mask).to(h.dtype)[None, :, None]

    def distribution(self, mean: torch.Tensor) -> torch.distributions.Normal:
        """The Gaussian around an action mean (..., a) from ``forward_sequence``."""
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def value(self, features: torch.Tensor, privileged_obs: torch.Tensor | None = None) -> torch.Tensor:
        """features (..., H), privileged_obs (..., p) → (...,)"""
        if self.privileged_size:
            features = torch.cat([features, self.privileged_norm(privileged_obs)], dim=-1)
        return self.critic(features).squeeze(-1)

    # -- the Policy protocol -----------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a), advancing the per-env state."""
        n = obs.shape[0]
        if self._hidden is None or self._hidden.shape[1] != n or self._hidden.device != obs.device:
            self._hidden = self.initial_state(n, obs.device)
        out = self.forward_sequence(obs[None], self._hidden)
        self._hidden = out.hidden
        mean = out.mean[0]
        return mean if deterministic else self.distribution(mean).sample()

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Zero the state of ``env_ids`` (all envs when None)."""
        if env_ids is None or self._hidden is None:
            self._hidden = None
        else:
            self._hidden[:, torch.as_tensor(env_ids, device=self._hidden.device)] = 0.0
