"""SHAC: short-horizon actor-critic, a first-order policy gradient through a differentiable simulator (Xu et al.,
ICLR 2022; the learner D.VA builds on).

Each iteration rolls ``horizon`` steps of every env with the actor's reparameterized samples, through the physics
and the reward (sims/diff_env.py), and maximizes the discounted return of the window plus a terminal value from a
target critic, by backpropagation through time:

    L_actor = −1/(H·n) Σ_envs Σ_windows [ Σ_t γ^t r_t + γ^T V'(s_T) ]     (windows end at H, a reset or a fall)

(no terminal value after a fall). The critic then fits TD(λ) targets of the same rollout, detached, in
``critic_iterations`` epochs of ``critic_minibatches``; the target critic follows it by Polyak averaging
(V' ← α V' + (1 − α) V). A non-finite or exploded actor gradient skips the update and is counted (``skipped``).

The critic always reads the task's state observation. The actor reads it too, or, with a pixel ``ActorCritic`` over
a ``PixelEnv``, the rendered frames of the same states — outside the gradient, so that the actor's gradient reaches
the action through the dynamics and rewards only (D.VA: ``action = actor(render(x).detach())``). ``actor_input``
replaces what the actor reads (e.g. a differentiable rendering, to measure the gradient *through* it).

The policy is an ``ActorCritic`` (its actor, log-std, critic and normalizers), so a SHAC run is evaluated, deployed
and exported like a PPO run. One Adam holds both parameter groups (actor lr, critic lr); each loss reaches only its
own group.
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from embody.config import NonNeg, PosFloat, PosInt, Unit

from .actor_critic import ActorCritic, ActorCriticConfig


@dataclass
class SHACConfig:
    """SHAC's settings and its network; defaults: the D.VA paper's (methods.md: ELU MLPs [64, 64], log-std −1, tanh
    actions), SHAC's for the target critic (α = 0.2)."""

    horizon: PosInt = 32
    gamma: Unit = 0.99
    lam: Unit = 0.95  # TD(λ) of the critic targets
    actor_lr: NonNeg = 2e-3
    critic_lr: NonNeg = 5e-4
    betas: tuple[float, float] = (0.7, 0.95)
    grad_norm: PosFloat = 1.0  # the actor's and critic's gradients are clipped to this norm
    skip_grad_norm: PosFloat = 1e6  # an actor gradient above this norm (or non-finite) has exploded: skipped, counted
    critic_iterations: PosInt = 16
    critic_minibatches: PosInt = 4
    target_alpha: Unit = 0.2  # Polyak: target ← α·target + (1 − α)·critic
    lr_schedule: str = "linear"  # linear (to 0 at the step budget) | constant
    actor_hidden: list[PosInt] = field(default_factory=lambda: [64, 64])
    critic_hidden: list[PosInt] = field(default_factory=lambda: [64, 64])
    activation: str = "elu"
    init_std: PosFloat = math.exp(-1.0)
    augment: bool = True  # random shifts of a pixel actor's frames (DrQ's), in the rollouts
    render_gradient: bool = False  # `embody train`: the actor reads DifferentiableFrames (through the rendering)

    def policy(
        self,
        obs_size: int,
        action_size: int,
        pixels: list[int] | None = None,
        state_size: int = 0,
        pixel_precision: str = "float32",
    ) -> ActorCritic:
        """A fresh ActorCritic of these settings (tanh-squashed, obs-normalized). The critic sees the observation;
        with ``pixels`` (C, H, W) the actor sees images and the critic the state observation (``state_size``)."""
        net = ActorCriticConfig(
            self.actor_hidden, self.critic_hidden, self.activation, self.init_std, True, True, pixels, pixel_precision
        )
        return ActorCritic(obs_size, action_size, state_size if pixels else 0, net)


ActorInput = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""What the actor reads: (states x (n, d) with gradients, ``fresh`` (n,) bool: the envs whose x starts an
episode) → (n, o)."""


class SHAC:
    """SHAC on a DiffEnv; ``learn(steps, on_iteration)`` as PPO's."""

    def __init__(
        self, env, policy: ActorCritic, config: SHACConfig, device: str = "cpu", actor_input: ActorInput | None = None
    ):
        if config.lr_schedule not in ("linear", "constant"):
            raise ValueError(f"unknown shac.lr_schedule {config.lr_schedule!r}; valid: linear, constant")
        self.env, self.policy, self.config = env, policy.to(device), config
        self.device = device
        self.optimizer = torch.optim.Adam(
            [
                {"params": policy.actor_parameters(), "lr": config.actor_lr},
                {"params": policy.critic.parameters(), "lr": config.critic_lr},
            ],
            betas=config.betas,
        )
        self.target_critic = copy.deepcopy(policy.critic).requires_grad_(False)
        self.env_steps = self.iteration = self.skipped = 0
        self.x = env.reset()
        self.fresh = torch.ones(env.n_envs, dtype=torch.bool)  # the envs whose state self.x starts an episode
        self.recent_returns: deque[float] = deque(maxlen=max(env.n_envs, 10))  # of the episodes that ended last
        self.augment = config.augment and policy.encoder is not None
        self.actor_input = actor_input or (self._frames if policy.encoder is not None else self._state)

    def _obs(self, x: torch.Tensor) -> torch.Tensor:
        return self.env.observe(x).to(self.device, torch.float32)

    def _state(self, x: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        return self._obs(x)

    def _frames(self, x: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """The wrapped PixelEnv's frames of the states x: numbers, outside the gradient."""
        return torch.as_tensor(self.env.obs, device=self.device)

    def _value(self, critic, obs: torch.Tensor) -> torch.Tensor:
        return critic(self.policy.critic_norm(obs)).squeeze(-1)

    def rollout(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The actor loss of one H-step window (a graph through the physics) and the detached buffers the critic
        learns from: obs (H, n, o), rewards (H, n), dones (H, n), next values (H, n)."""
        c, n = self.config, self.env.n_envs
        x, fresh = self.x.detach(), self.fresh
        discount = torch.ones(n)  # γ^t since each env's window started
        ret = torch.zeros(n)  # Σ γ^t r_t of the open window, with gradients
        loss = torch.zeros(())
        buf = {k: [] for k in ("obs", "rewards", "dones", "next_values")}
        for t in range(c.horizon):
            obs, actor_obs = self._obs(x), self.actor_input(x, fresh)
            self.policy.update_normalizers(actor_obs.detach(), obs.detach())
            action = self.policy.distribution(actor_obs, self.augment).rsample()
            if self.policy.config.squash:
                action = torch.tanh(action)
            step = self.env.step(x, action.to(x))
            reward = step.reward.float()
            ret = ret + discount * reward
            done_np = step.terminated | step.truncated
            done, fell = torch.from_numpy(done_np), torch.from_numpy(step.terminated)
            next_value = self._value(self.target_critic, self._obs(step.x_next)) * ~fell
            close = done if t < c.horizon - 1 else torch.ones(n, dtype=torch.bool)
            loss = loss - torch.where(close, ret + discount * c.gamma * next_value, 0.0).sum()
            discount = torch.where(done, 1.0, discount * c.gamma)
            ret = torch.where(done, 0.0, ret)
            for k, v in zip(buf, (obs, reward, done.float(), next_value)):
                buf[k].append(v.detach())
            self.recent_returns.extend(step.info.episode_return.tolist())
            x, fresh = step.x, done
        self.x, self.fresh = x.detach(), fresh
        self.env_steps += c.horizon * n
        return loss / (c.horizon * n), {k: torch.stack(v) for k, v in buf.items()}

    def td_lambda(self, rewards, dones, next_values) -> torch.Tensor:
        """TD(λ) targets (H, n) of a window (SHAC's recursion): a done step, and every env's last step of the
        window, bootstraps from its own next value."""
        c = self.config
        A = B = torch.zeros_like(rewards[0])
        lam = torch.ones_like(rewards[0])
        targets = torch.empty_like(rewards)
        for t in reversed(range(len(rewards))):
            d = dones[t] if t < len(rewards) - 1 else torch.ones_like(dones[t])
            lam = lam * c.lam * (1 - d) + d
            A = (1 - d) * (c.lam * c.gamma * A + c.gamma * next_values[t] + (1 - lam) / (1 - c.lam) * rewards[t])
            B = c.gamma * (next_values[t] * d + B * (1 - d)) + rewards[t]
            targets[t] = (1 - c.lam) * A + lam * B
        return targets

    def update_actor(self, loss: torch.Tensor) -> float:
        """One clipped Adam step of the actor group; a non-finite or exploded gradient (norm above
        ``skip_grad_norm``) skips it. Returns the gradient norm before clipping."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for p in self.optimizer.param_groups[0]["params"] if p.grad is not None]
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.grad_norm))
        if np.isfinite(norm) and norm <= self.config.skip_grad_norm and torch.isfinite(loss):
            self.optimizer.step()
        else:
            self.skipped += 1
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def update_critic(self, buf: dict[str, torch.Tensor]) -> float:
        """Fit the TD(λ) targets; Polyak-average the target critic. Returns the last epoch's mean loss."""
        c = self.config
        targets = self.td_lambda(buf["rewards"], buf["dones"], buf["next_values"]).flatten()
        obs = buf["obs"].flatten(0, 1)
        for _ in range(c.critic_iterations):
            losses = []
            for ids in torch.randperm(len(obs)).chunk(c.critic_minibatches):
                loss = (self._value(self.policy.critic, obs[ids]) - targets[ids]).pow(2).mean()
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.critic.parameters(), c.grad_norm)
                self.optimizer.step()
                losses.append(loss.item())
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for tp, p in zip(self.target_critic.parameters(), self.policy.critic.parameters()):
                tp.mul_(c.target_alpha).add_(p, alpha=1 - c.target_alpha)
        return float(np.mean(losses))

    def set_progress(self, fraction: float) -> None:
        """Linear learning-rate decay: both groups at (1 − fraction) of their initial rates."""
        if self.config.lr_schedule == "linear":
            scale = max(1.0 - fraction, 0.0)
            for group, lr in zip(self.optimizer.param_groups, (self.config.actor_lr, self.config.critic_lr)):
                group["lr"] = lr * scale

    def learn(self, total_steps: int, on_iteration: Callable[[dict], bool] | None = None) -> None:
        """Iterate until ``total_steps`` env steps; ``on_iteration(metrics)`` returning True stops early."""
        start = time.perf_counter()
        while self.env_steps < total_steps:
            self.set_progress(self.env_steps / total_steps)
            loss, buf = self.rollout()
            grad_norm = self.update_actor(loss)
            critic_loss = self.update_critic(buf)
            self.iteration += 1
            m = {
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "time_s": time.perf_counter() - start,
                "episode_return": float(np.mean(self.recent_returns)) if self.recent_returns else float("nan"),
                "actor_loss": loss.item(),
                "actor_grad_norm": grad_norm,
                "critic_loss": critic_loss,
                "skipped_updates": self.skipped,
                "lr": self.optimizer.param_groups[0]["lr"],
                "action_std": self.policy.log_std.detach().exp().mean().item(),
            }
            if on_iteration is not None and on_iteration(m):
                break
