"""Small shared pieces for the policy tests: tiny networks, a cartpole batch, a linear expert."""

from __future__ import annotations

import torch

from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
from embody.policies.recurrent import RecurrentActorCritic, RecurrentConfig


def small_mlp(obs: int, act: int, priv: int = 0, **kw) -> ActorCritic:
    return ActorCritic(obs, act, priv, ActorCriticConfig(actor_hidden=[32, 32], critic_hidden=[32, 32], **kw))


def small_rnn(obs: int, act: int, priv: int = 0, rnn_type: str = "gru", **kw) -> RecurrentActorCritic:
    cfg = RecurrentConfig(rnn_type=rnn_type, rnn_hidden=32, actor_hidden=[32], critic_hidden=[32], **kw)
    return RecurrentActorCritic(obs, act, priv, cfg)


def cartpole(n_envs: int = 4, seed: int = 0, **task_kw):
    from embody.sims.tasks.cartpole_swingup import CartpoleSwingupConfig
    from embody.sims.vec_env import make_env

    return make_env("cartpole-swingup", n_envs=n_envs, seed=seed, config=CartpoleSwingupConfig(**task_kw))


K = torch.tensor([0.3, -0.5, 1.0, 0.4, 0.2])  # a scripted linear expert on cartpole's 5 observations


def linear_expert(obs: torch.Tensor) -> torch.Tensor:
    """(n, 5) → (n, 1) = clip(K · obs, -1, 1)."""
    return (obs @ K).clamp(-1.0, 1.0)[:, None]
