"""PPO for batched environments, readable top to bottom (cleanrl's spirit, rsl_rl's defaults).

Per iteration: roll out ``n_steps`` over all envs, bootstrap time-limit truncations with the
value of the final observation, compute GAE, then ``epochs`` passes of clipped-surrogate
updates over ``minibatches`` shuffled minibatches, with an adaptive (KL-targeting) or linear
learning rate. With ``symmetry``, each minibatch also carries its mirror image under the task's
left-right symmetry (Mittal et al. 2024, as in rsl_rl), so that one rollout teaches both sides.
The update may run on more torch threads than the rollout: the simulator idles meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from embody.config import NonNeg, PosFloat, PosInt, Span, Unit

from .actor_critic import ActorCritic

if TYPE_CHECKING:
    from embody.scale import Rollout, RolloutWorkers
    from embody.sims.task import Mirror


@dataclass
class PPOConfig:
    """Rollout length, update passes, learning-rate schedule, GAE and loss settings of ``PPO``."""

    n_steps: PosInt = 32  # rollout length per env per iteration
    epochs: PosInt = 5
    minibatches: PosInt = 4
    lr: NonNeg = 1e-3
    lr_schedule: str = "adaptive"  # adaptive | linear | constant
    desired_kl: PosFloat = 0.01
    lr_bounds: Span = (1e-5, 1e-2)  # the adaptive schedule stays within these
    gamma: Unit = 0.99
    lam: Unit = 0.95
    clip: PosFloat = 0.2
    vf_coef: NonNeg = 1.0
    ent_coef: NonNeg = 0.0
    max_grad_norm: PosFloat = 1.0
    reward_scale: PosFloat = 1.0
    symmetry: bool = False  # augment each minibatch with its mirror image (the task's ``mirror()``)


class RolloutBuffer:
    """Tensors of shape (T, n, ...) for one iteration's rollout."""

    def __init__(self, T: int, n: int, obs: int, critic: int, act: int, device: torch.device, obs_dtype=torch.float32):
        z = lambda *s: torch.zeros(*s, device=device)  # noqa: E731
        self.obs = torch.zeros(T, n, obs, device=device, dtype=obs_dtype)  # uint8 images: a quarter of the memory
        self.critic_obs, self.actions = z(T, n, critic), z(T, n, act)
        self.logp, self.values, self.rewards, self.dones = z(T, n), z(T, n), z(T, n), z(T, n)
        self.returns, self.advantages = z(T, n), z(T, n)

    def compute_gae(self, last_value: torch.Tensor, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` (T, n) from rewards, values and dones; ``last_value``
        (n,) is the value of the observation after the last step."""
        gae = torch.zeros_like(last_value)
        for t in reversed(range(self.rewards.shape[0])):
            next_value = last_value if t == self.rewards.shape[0] - 1 else self.values[t + 1]
            not_done = 1.0 - self.dones[t]
            delta = self.rewards[t] + gamma * next_value * not_done - self.values[t]
            gae = delta + gamma * lam * not_done * gae
            self.advantages[t] = gae
        self.returns = self.advantages + self.values

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], device: torch.device) -> RolloutBuffer:
        """A filled buffer from (T, n, ...) arrays, one per attribute (a rollout gathered from workers)."""
        buf = cls.__new__(cls)
        for k, v in arrays.items():
            setattr(buf, k, torch.as_tensor(v, device=device))
        return buf

    def flat(self) -> dict[str, torch.Tensor]:
        """The tensors an update draws minibatches from, each flattened to (T * n, ...): ``obs``,
        ``critic_obs``, ``actions``, ``logp``, ``values``, ``returns``, ``advantages``."""
        keys = ("obs", "critic_obs", "actions", "logp", "values", "returns", "advantages")
        return {k: getattr(self, k).flatten(0, 1) for k in keys}


class _TorchMirror:
    """A task's ``Mirror`` as torch index/sign pairs for observations (n, o), critic inputs (n, o + p) and actions."""

    def __init__(self, mirror: Mirror, device: str):
        as_torch = lambda m: (  # noqa: E731
            torch.as_tensor(m.index, device=device),
            torch.as_tensor(m.sign, dtype=torch.float32, device=device),
        )
        self._obs, self._critic = as_torch(mirror.obs), as_torch(mirror.obs.then(mirror.privileged))
        self._action = as_torch(mirror.action)

    @staticmethod
    def _apply(x: torch.Tensor, m: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return x[..., m[0]] * m[1]

    def obs(self, x: torch.Tensor) -> torch.Tensor:
        return self._apply(x, self._obs)

    def critic(self, x: torch.Tensor) -> torch.Tensor:
        return self._apply(x, self._critic)

    def augment(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The minibatch and its mirror image: mirrored inputs and actions with the same log-probabilities,
        advantages and returns (rsl_rl's symmetry augmentation, which treats the old policy as symmetric)."""
        mirrored = {"obs": self.obs(b["obs"]), "critic_obs": self.critic(b["critic_obs"])}
        mirrored["actions"] = self._apply(b["actions"], self._action)
        return {k: torch.cat([v, mirrored.get(k, v)]) for k, v in b.items()}


class PPO:
    """Trains ``policy`` (moved to ``device``) on a batched env: ``learn`` loops ``collect`` then ``update``.

    The env is embody's batched ``Env`` (``reset`` → (obs, privileged_obs), ``step`` → (obs,
    reward, terminated, truncated, info), numpy arrays over ``n_envs``). ``env_steps`` and
    ``iteration`` count what has been done, across ``learn`` calls.
    """

    def __init__(
        self,
        env,
        policy: ActorCritic,
        config: PPOConfig,
        device: str = "cpu",
        update_threads: int = 0,
        mirror: Mirror | None = None,
        workers: RolloutWorkers | None = None,
    ):
        self.env, self.policy, self.config = env, policy.to(device), config
        self.workers = workers  # rollouts from Ray workers (embody.scale) instead of ``env``
        self.rollout: Rollout | None = None  # the last one the workers returned
        self._obs_dtype = torch.uint8 if policy.encoder is not None else torch.float32
        if config.symmetry and mirror is None:
            raise ValueError("ppo.symmetry needs a task with a mirror symmetry (Task.mirror() returned None)")
        if config.symmetry and policy.encoder is not None:
            raise ValueError("ppo.symmetry mirrors state observations, not images (pixels)")
        self.mirror = _TorchMirror(mirror, device) if config.symmetry else None
        self.update_threads = update_threads  # torch threads while updating (the simulator idles then); 0: unchanged
        self.device = torch.device(device)
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=config.lr)
        self.lr = config.lr
        self.env_steps = 0
        self.iteration = 0
        self._obs = self._critic_obs = None
        self.reward_terms: dict[str, float] = {}  # the last collect's mean per-step value of each reward term

    def _tensors(self, obs: np.ndarray, priv: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's input (images stay uint8) and the critic's, (n, o) and (n, critic_size)."""
        o = torch.as_tensor(obs, dtype=self._obs_dtype, device=self.device)
        p = torch.as_tensor(priv, dtype=torch.float32, device=self.device)
        return o, self.policy.critic_input(o, p)

    @torch.no_grad()
    def collect(
        self, buf: RolloutBuffer, episode_returns: list[float], episode_lengths: list[int] | None = None
    ) -> None:
        """Roll ``n_steps`` steps of every env into ``buf``, sampling actions and updating the
        normalizers, then compute GAE. Continues from the last observation (the env is reset on the
        first call only); appends each finished episode's return (and length) to the given lists."""
        cfg, env, pol = self.config, self.env, self.policy
        if self._obs is None:
            self._obs, self._critic_obs = self._tensors(*env.reset())
        terms: dict[str, float] = {}
        for t in range(cfg.n_steps):
            obs, critic_obs = self._obs, self._critic_obs
            pol.update_normalizers(obs, critic_obs)
            if self.mirror is not None:  # symmetric statistics, or the mirrored half sees skewed inputs
                pol.update_normalizers(self.mirror.obs(obs), self.mirror.critic(critic_obs))
            dist = pol.distribution(obs)
            action = dist.sample()
            buf.obs[t], buf.critic_obs[t], buf.actions[t] = obs, critic_obs, action
            buf.logp[t], buf.values[t] = dist.log_prob(action).sum(-1), pol.value(critic_obs)
            next_obs, reward, terminated, truncated, info = env.step(action.cpu().numpy())
            reward = torch.as_tensor(reward, device=self.device) * cfg.reward_scale
            if truncated.any():  # the episode did not end: bootstrap from its final state
                _, final_critic = self._tensors(info.final_obs, info.final_privileged_obs)
                idx = torch.as_tensor(np.flatnonzero(truncated), device=self.device)
                reward[idx] += cfg.gamma * pol.value(final_critic[idx])
            buf.rewards[t] = reward
            buf.dones[t] = torch.as_tensor(terminated | truncated, dtype=torch.float32, device=self.device)
            self._obs, self._critic_obs = self._tensors(next_obs, info.privileged_obs)
            episode_returns.extend(info.episode_return.tolist())
            if episode_lengths is not None:
                episode_lengths.extend(info.episode_length.tolist())
            for k, v in info.reward_terms.items():
                terms[k] = terms.get(k, 0.0) + v / cfg.n_steps
        self.reward_terms = terms
        self.env_steps += cfg.n_steps * env.n_envs
        buf.compute_gae(pol.value(self._critic_obs), cfg.gamma, cfg.lam)

    @torch.no_grad()
    def collect_remote(self, episode_returns: list[float], episode_lengths: list[int]) -> RolloutBuffer:
        """One rollout from the workers with the current weights (GAE computed there), folded into the normalizers
        as ``collect`` folds each step."""
        r = self.rollout = self.workers.collect(self.policy)
        buf = RolloutBuffer.from_arrays(r.arrays, self.device)
        obs, critic_obs = buf.obs.flatten(0, 1), buf.critic_obs.flatten(0, 1)
        self.policy.update_normalizers(obs, critic_obs)
        if self.mirror is not None:
            self.policy.update_normalizers(self.mirror.obs(obs), self.mirror.critic(critic_obs))
        episode_returns.extend(r.returns)
        episode_lengths.extend(r.lengths)
        self.reward_terms = r.reward_terms
        self.env_steps += buf.rewards.numel()
        return buf

    def update(self, buf: RolloutBuffer, progress: float) -> dict[str, float]:
        """``epochs`` × ``minibatches`` clipped-surrogate steps on ``buf``; ``progress`` in [0, 1] drives the
        linear learning-rate schedule. Returns the mean ``policy_loss``, ``value_loss``, ``entropy``, ``kl``."""
        cfg, pol = self.config, self.policy
        data = buf.flat()
        n = data["obs"].shape[0]
        mb = n // cfg.minibatches
        stats = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "kl": 0.0}
        if cfg.lr_schedule == "linear":
            self.set_lr(cfg.lr * max(1.0 - progress, 0.05))
        for _ in range(cfg.epochs):
            for idx in torch.randperm(n, device=self.device).split(mb):
                b = {k: v[idx] for k, v in data.items()}
                if self.mirror is not None:
                    b = self.mirror.augment(b)
                adv = (b["advantages"] - b["advantages"].mean()) / (b["advantages"].std() + 1e-8)
                dist = pol.distribution(b["obs"])
                logp = dist.log_prob(b["actions"]).sum(-1)
                log_ratio = logp - b["logp"]
                ratio = log_ratio.exp()
                policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv).mean()
                value_loss = (pol.value(b["critic_obs"]) - b["returns"]).pow(2).mean()
                entropy = dist.entropy().sum(-1).mean()
                loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(pol.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                with torch.no_grad():  # low-variance KL estimate over the rollout's own samples: a mirrored
                    # sample's old log-probability is its original's, so its ratio also reads the policy's asymmetry
                    own = log_ratio[: len(idx)]
                    kl = ((own.exp() - 1) - own).mean().item()
                if cfg.lr_schedule == "adaptive":
                    self._adapt_lr(kl)
                for k, v in zip(stats, (policy_loss.item(), value_loss.item(), entropy.item(), kl)):
                    stats[k] += v / (cfg.epochs * cfg.minibatches)
        return stats

    def _update_threaded(self, buf: RolloutBuffer, progress: float) -> dict[str, float]:
        collect_threads = torch.get_num_threads()
        if self.update_threads:
            torch.set_num_threads(self.update_threads)
        try:
            return self.update(buf, progress)
        finally:
            torch.set_num_threads(collect_threads)

    def _adapt_lr(self, kl: float) -> None:
        low, high = self.config.lr_bounds
        if kl > 2.0 * self.config.desired_kl:
            self.set_lr(max(low, self.lr / 1.5))
        elif 0.0 < kl < 0.5 * self.config.desired_kl:
            self.set_lr(min(high, self.lr * 1.5))

    def set_lr(self, lr: float) -> None:
        self.lr = lr
        for g in self.optimizer.param_groups:
            g["lr"] = lr

    def learn(self, total_steps: int, on_iteration: Callable[[dict], bool | None] | None = None) -> None:
        """Train until ``env_steps >= total_steps``. ``on_iteration(metrics)`` may return True to stop."""
        env, cfg = self.env, self.config
        buf = (
            None
            if self.workers is not None
            else RolloutBuffer(
                cfg.n_steps,
                env.n_envs,
                env.observation_size,
                self.policy.critic_size,
                env.action_size,
                self.device,
                self._obs_dtype,
            )
        )
        recent: list[float] = []
        recent_lengths: list[int] = []
        start_steps, start = self.env_steps, time.perf_counter()
        collect_s = update_s = 0.0  # where the wall-clock goes, for `embody bench learning`
        while self.env_steps < total_steps:
            returns: list[float] = []
            lengths: list[int] = []
            t0 = time.perf_counter()
            if self.workers is not None:
                buf = self.collect_remote(returns, lengths)
            else:
                self.collect(buf, returns, lengths)
            t1 = time.perf_counter()
            stats = self._update_threaded(buf, self.env_steps / total_steps)
            collect_s, update_s = collect_s + t1 - t0, update_s + time.perf_counter() - t1
            self.iteration += 1
            recent = (recent + returns)[-100:]
            recent_lengths = (recent_lengths + lengths)[-100:]
            elapsed = time.perf_counter() - start
            metrics = {
                "iteration": self.iteration,
                "env_steps": self.env_steps,
                "time_s": elapsed,
                "steps_per_s": (self.env_steps - start_steps) / max(elapsed, 1e-9),
                "time/collect_s": collect_s,
                "time/update_s": update_s,
                "episode_return": float(np.mean(recent)) if recent else float("nan"),
                "episode_length": float(np.mean(recent_lengths)) if recent_lengths else float("nan"),
                "episodes": len(returns),
                "lr": self.lr,
                "action_std": self.policy.log_std.exp().mean().item(),
                **stats,
                **{f"reward/{k}": v for k, v in self.reward_terms.items()},
            }
            if self.rollout is not None:
                r = self.rollout
                metrics.update(
                    {"workers": len(self.workers.workers), "nodes": len(r.nodes), "time/worker_s": r.worker_s}
                )
            if on_iteration is not None and on_iteration(metrics):
                break
