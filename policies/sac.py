"""Soft Actor-Critic (Haarnoja et al. 2018, with the learned temperature of the second paper), batched over envs.

Every vector step adds ``n_envs`` transitions to a replay buffer; once ``learning_starts`` env steps are in
(taken with uniform random actions), each vector step is followed by ``utd · n_envs`` gradient steps (``utd``:
the update-to-data ratio, gradient steps per env step, fractions carried over). A gradient step updates the twin
critics on ``r + γ (1 − terminal) (min Q'(s', a') − α log π(a'|s'))``, then the tanh-Gaussian actor on
``α log π − min Q``, then ``log α`` towards the target entropy (−action size by default), then the target
critics by Polyak averaging. Truncated episodes bootstrap from their final observation; terminated ones do not.

One Adam holds three parameter groups (actor, critics, temperature): each loss's gradient is applied to its own
group only, and the one optimizer state saves with the policy in the run's checkpoint. The replay buffer saves
beside it as safetensors with a JSON header (``ReplayBuffer.save``/``load``), never pickle, so a run resumes
exactly where it stopped.

Shapes: ``n`` envs, ``B`` batch, ``o`` observation size, ``a`` action size, ``C`` buffer capacity.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

from embody import exits
from embody.config import Count, NonNeg, PosFloat, PosInt, Unit
from embody.files import load_arrays, save_arrays

from .networks import EnsembleMLP, Normalizer, PixelEncoder, mlp

LOG_STD = (-5.0, 2.0)
LOSSES = ("critic_loss", "actor_loss", "alpha", "q_mean")  # every metrics row has them (nan before learning)


@dataclass
class SACConfig:
    """SAC's settings (see the module docstring); ``hidden`` is also the policy's saved layout."""

    hidden: list[PosInt] = field(default_factory=lambda: [256, 256])
    activation: str = "relu"
    lr: NonNeg = 3e-4  # actor and critics
    alpha_lr: NonNeg = 3e-4
    gamma: Unit = 0.99
    tau: Unit = 0.005
    batch_size: PosInt = 256
    buffer_size: PosInt = 1_000_000  # transitions
    learning_starts: Count = 5_000  # env steps of uniform random actions first
    utd: PosFloat = 0.25  # gradient steps per env step
    init_alpha: PosFloat = 1.0  # the temperature a new policy starts from
    init: str = "orthogonal"  # a new policy's weights: orthogonal | torch (networks.INITS; SB3's SAC: torch)
    target_entropy: float | None = None  # None: −action size
    her: str = "none"  # none | future | final: hindsight relabelling (goal environments, policies/her.py)
    her_k: Count = 4  # relabelled goals per real one: a share k / (k + 1) of each batch is relabelled
    normalize_obs: bool = True  # running mean/std of the observations collected (in the policy, saved with it)
    log_every: PosInt = 5_000  # env steps between metrics rows (checkpoint_every counts these)
    worker_steps: PosInt = 8  # with --workers: vector steps each worker collects per round (then their updates)


class SACPolicy(nn.Module):
    """The tanh-Gaussian actor, twin critics, their targets and log α, on features of the observation: the
    normalized state, or a ``PixelEncoder``'s output for image observations (``pixels``: (C, H, W)), which the
    critics' loss trains and the actor reads detached (DrQ-v2).

    Actor: features (n, f) → mean and log std (n, a) each; actions tanh(u) in [-1, 1]. Critics: (features,
    action) → (n,) each. ``act``, ``sample`` and ``q`` take observations (n, o).
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden: list[int] | None = None,
        activation: str = "relu",
        normalize_obs: bool = True,
        init_alpha: float = 1.0,
        pixels: list[int] | None = None,
        pixel_precision: str = "float32",
        init: str = "orthogonal",
    ):
        super().__init__()
        self.obs_size, self.action_size, self.pixels = obs_size, action_size, list(pixels) if pixels else None
        self.pixel_precision = pixel_precision
        self.normalize_obs = normalize_obs and not pixels
        self.hidden, self.activation, self.init = list(hidden or [256, 256]), activation, init
        self.obs_norm = Normalizer(obs_size) if self.normalize_obs else nn.Identity()
        self.encoder = PixelEncoder(tuple(self.pixels), precision=pixel_precision) if self.pixels else None
        size = PixelEncoder.FEATURES if self.pixels else obs_size
        self.actor = mlp([size, *self.hidden, 2 * action_size], activation, init=init)
        self.critics = EnsembleMLP([size + action_size, *self.hidden, 1], 2, activation, init)
        self.targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.init_alpha = init_alpha
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init_alpha)))

    def init_kwargs(self) -> dict:
        return {
            "obs_size": self.obs_size,
            "action_size": self.action_size,
            "hidden": self.hidden,
            "activation": self.activation,
            "normalize_obs": self.normalize_obs,
            "init_alpha": self.init_alpha,
            "pixels": self.pixels,
            "pixel_precision": self.pixel_precision,
            "init": self.init,
        }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> SACPolicy:
        return cls(**kwargs)

    def features(self, obs: torch.Tensor, augment: bool = False) -> torch.Tensor:
        """obs (n, o) → what the actor and critics read (n, f); ``augment``: random shifts of pixels."""
        return self.encoder(obs, augment) if self.encoder is not None else self.obs_norm(obs)

    def sample_features(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action (n, a) and its log density (n,) (tanh-corrected) from features (n, f)."""
        mean, log_std = self.actor(f).chunk(2, -1)
        std = log_std.clamp(*LOG_STD).exp()
        u = mean + std * torch.randn_like(mean)
        logp = (-0.5 * ((u - mean) / std).pow(2) - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        return torch.tanh(u), logp - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)

    def q_features(self, f: torch.Tensor, action: torch.Tensor, target: bool = False):
        """Both critics' (or target critics') Q (n,) each, from features (n, f)."""
        return (self.targets if target else self.critics)(torch.cat([f, action], -1)).unbind(0)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sample_features(self.features(obs))

    def q(self, obs: torch.Tensor, action: torch.Tensor, target: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q_features(self.features(obs), action, target)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a) in [-1, 1]: tanh of the mean, or a sample."""
        f = self.features(obs)
        if deterministic:
            return torch.tanh(self.actor(f).chunk(2, -1)[0])
        return self.sample_features(f)[0]

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass

    def reset_critics(self) -> None:
        """Fresh critics and targets (PEBBLE, once the reward it learned replaces the exploration reward)."""
        c = self.critics
        self.critics.load_state_dict(EnsembleMLP(c.sizes, c.members, c.activation, c.init).state_dict())
        self.targets.load_state_dict(self.critics.state_dict())

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """The parameters each loss trains: actor, critics, alpha."""
        return {
            "actor": list(self.actor.parameters()),
            "critic": [*self.critics.parameters(), *(self.encoder.parameters() if self.encoder else [])],
            "alpha": [self.log_alpha],
        }


class ReplayBufferError(ValueError):
    """A replay-buffer file that is missing, damaged or of another shape."""

    exit_code = exits.INPUT


class ReplayBuffer:
    """A ring of transitions in numpy: obs (C, o), actions (C, a), rewards (C,), next_obs (C, o), terminal (C,);
    observations as ``obs_dtype`` (uint8 for pixels: a quarter of the memory, the pages filled as the ring is)."""

    KEYS = ("obs", "actions", "rewards", "next_obs", "terminal")

    def __init__(self, capacity: int, obs_size: int, action_size: int, obs_dtype=np.float32):
        self.capacity, self.size, self.ptr = capacity, 0, 0
        self.data = {
            "obs": np.zeros((capacity, obs_size), obs_dtype),
            "actions": np.zeros((capacity, action_size), np.float32),
            "rewards": np.zeros(capacity, np.float32),
            "next_obs": np.zeros((capacity, obs_size), obs_dtype),
            "terminal": np.zeros(capacity, np.float32),
        }

    def add(self, **rows: np.ndarray) -> None:
        """Append k rows of every key (overwriting the oldest once full)."""
        k = len(rows["obs"])
        idx = (self.ptr + np.arange(k)) % self.capacity
        for key in self.KEYS:
            self.data[key][idx] = rows[key]
        self.ptr, self.size = int((self.ptr + k) % self.capacity), min(self.size + k, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator, device) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, self.size, batch)
        return {k: torch.as_tensor(v[idx], device=device) for k, v in self.data.items()}

    def relabel(self, reward: Callable[[np.ndarray, np.ndarray], np.ndarray], chunk: int = 65_536) -> None:
        """Replace every stored reward by ``reward(obs (k, o), actions (k, a)) → (k,)``, ``chunk`` rows at a time."""
        for i in range(0, self.size, chunk):
            j = min(i + chunk, self.size)
            self.data["rewards"][i:j] = reward(self.data["obs"][i:j], self.data["actions"][i:j])

    def save(self, path: Path) -> None:
        """The filled rows (in ring order) as safetensors with a JSON header, written atomically."""
        meta = {"format": "embody.replay", "version": "1", "capacity": str(self.capacity), "ptr": str(self.ptr)}
        save_arrays(path, {k: v[: self.size] for k, v in self.data.items()}, meta)

    def restore(self, path: Path) -> ReplayBuffer:
        """Fill this buffer from a file written by ``save`` (its capacity kept, its shapes checked); anything else
        raises ``ReplayBufferError`` naming the file. Episodes a HER buffer had not finished are not in the file."""
        meta, arrays = load_arrays(path, "embody.replay", self.KEYS, ReplayBufferError, "replay buffer")
        n, ptr = len(arrays["obs"]), int(meta["ptr"])
        for k in self.KEYS:
            if arrays[k].shape[1:] != self.data[k].shape[1:] or len(arrays[k]) != n:
                expected = ", ".join(map(str, self.data[k].shape[1:]))
                raise ReplayBufferError(f"{path}: {k} has shape {arrays[k].shape}, expected (N, {expected})")
        full = n == int(meta["capacity"])
        keep = (np.r_[ptr:n, 0:ptr] if full else np.arange(n))[-self.capacity :]  # oldest first, the newest kept
        for k in self.KEYS:
            self.data[k][: len(keep)] = arrays[k][keep]
        self.size, self.ptr = len(keep), len(keep) % self.capacity
        return self


class RewardLearner(Protocol):
    """A reward learned while SAC trains (``policies/preference.py``) in place of the env's."""

    def observe(self, sac: SAC, rows: dict[str, np.ndarray], done: np.ndarray) -> None:
        """Sees each vector step before it is stored (``rows["rewards"]``: the env's, (n,)); replaces those rewards
        in place, and may relabel ``sac.buffer`` or reset its critics."""

    def batch_rewards(self, sac: SAC, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Rewards (B,) for a sampled batch computed at update time (an exploration reward), or None: the stored."""

    def metrics(self) -> dict[str, float]:
        """Values for every metrics row (the same keys in each)."""


class SAC:
    """Trains a ``SACPolicy`` on a batched env (embody's ``VecEnv``): ``learn`` alternates vector steps and
    gradient steps; ``env_steps`` and ``updates`` count across calls."""

    def __init__(self, env, policy: SACPolicy, config: SACConfig, device: str = "cpu", seed: int = 0, workers=None):
        self.env, self.policy, self.config = env, policy.to(device), config
        self.workers = workers  # embody.scale.RolloutWorkers collecting instead of ``env`` (no HER, no preferences)
        self.device = torch.device(device)
        groups = policy.param_groups()
        self.optimizer = torch.optim.Adam(
            fused=True,  # one kernel per group and step, the least per-update overhead on CPU
            params=[
                {"params": groups["actor"], "lr": config.lr},
                {"params": groups["critic"], "lr": config.lr},
                {"params": groups["alpha"], "lr": config.alpha_lr},
            ],
        )
        self.target_entropy = -float(policy.action_size) if config.target_entropy is None else config.target_entropy
        self.buffer = self._buffer(env, seed)
        self.rng = np.random.default_rng(seed)
        self.env_steps = self.updates = 0
        self._debt = 0.0  # gradient steps owed (fractions of utd carried over)
        self._obs: np.ndarray | None = None
        self.reward_learner: RewardLearner | None = None

    def reset_critics(self) -> None:
        """Fresh critics (``SACPolicy.reset_critics``) with their Adam state cleared."""
        self.policy.reset_critics()
        for p in self.policy.param_groups()["critic"]:
            self.optimizer.state.pop(p, None)

    def _buffer(self, env, seed: int) -> ReplayBuffer:
        """A plain ring, or a HER buffer on a goal environment (``obs_parts`` and ``compute_reward``)."""
        cfg, pol = self.config, self.policy
        dtype = np.uint8 if pol.pixels else np.float32
        if cfg.her == "none":
            return ReplayBuffer(cfg.buffer_size, pol.obs_size, pol.action_size, dtype)
        from .her import HERBuffer

        if not hasattr(env, "compute_reward"):
            raise ValueError(f"sac.her={cfg.her!r} needs a goal environment (a gym: id with goal observations)")
        return HERBuffer(
            cfg.buffer_size,
            pol.obs_size,
            pol.action_size,
            env.n_envs,
            env.task.obs_parts,
            env.compute_reward,
            cfg.her,
            cfg.her_k,
        )

    def _grad_step(self, *terms: tuple[torch.Tensor, list[nn.Parameter]]) -> None:
        """One Adam step applying each (loss, params) term's gradient to its params alone (the other groups keep
        no gradient, so Adam skips them)."""
        self.optimizer.zero_grad(set_to_none=True)
        for loss, params in terms:
            for p, g in zip(params, torch.autograd.grad(loss, params)):
                p.grad = g
        self.optimizer.step()

    def update(self) -> dict[str, float]:
        """One gradient step on a sampled batch; its losses."""
        cfg, pol, groups = self.config, self.policy, self.policy.param_groups()
        b = self.buffer.sample(cfg.batch_size, self.rng, self.device)
        if self.reward_learner is not None and (r := self.reward_learner.batch_rewards(self, b)) is not None:
            b["rewards"] = r
        alpha = pol.log_alpha.exp().detach()
        f = pol.features(b["obs"], augment=True)  # the critics' loss trains a pixel encoder through these
        with torch.no_grad():
            f2 = pol.features(b["next_obs"], augment=True)
            a2, logp2 = pol.sample_features(f2)
            q_next = torch.minimum(*pol.q_features(f2, a2, target=True)) - alpha * logp2
            y = b["rewards"] + cfg.gamma * (1 - b["terminal"]) * q_next
        q1, q2 = pol.q_features(f, b["actions"])
        critic_loss = (q1 - y).pow(2).mean() + (q2 - y).pow(2).mean()
        self._grad_step((critic_loss, groups["critic"]))
        f = f.detach()
        a, logp = pol.sample_features(f)
        actor_loss = (alpha * logp - torch.minimum(*pol.q_features(f, a))).mean()
        alpha_loss = -(pol.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self._grad_step((actor_loss, groups["actor"]), (alpha_loss, groups["alpha"]))  # neither reads the other
        with torch.no_grad():
            torch._foreach_lerp_(list(pol.targets.parameters()), list(pol.critics.parameters()), cfg.tau)
        self.updates += 1
        return {
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "alpha": alpha.item(),
            "q_mean": q1.mean().item(),
        }

    @torch.no_grad()
    def _act(self, obs: np.ndarray) -> np.ndarray:
        if self.env_steps < self.config.learning_starts:
            return self.rng.uniform(-1, 1, (len(obs), self.policy.action_size)).astype(np.float32)
        o = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return self.policy.act(o, deterministic=False).cpu().numpy()

    def step(self, returns: list[float], losses: list[dict]) -> None:
        """One vector step (with workers: ``worker_steps`` of them on every worker), its transitions stored, then the
        gradient steps it pays for."""
        if self.workers is not None:
            return self._step_remote(returns, losses)
        if self._obs is None:
            self._obs = self.env.reset()[0]
        self._normalize(self._obs)
        action = self._act(self._obs)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated | truncated
        final = np.where(done[:, None], info.final_obs, next_obs)
        self._store(
            dict(obs=self._obs, actions=action, rewards=reward, next_obs=final, terminal=terminated), done, losses
        )
        self._obs = next_obs
        returns.extend(info.episode_return.tolist())

    def _step_remote(self, returns: list[float], losses: list[dict]) -> None:
        r = self.workers.collect(
            self.policy, steps=self.config.worker_steps, random=self.env_steps < self.config.learning_starts
        )
        a = r.arrays
        for t in range(len(a["obs"])):
            self._normalize(a["obs"][t])
            rows = {k: a[k][t] for k in ("obs", "actions", "rewards", "next_obs", "terminal")}
            self._store(rows, a["done"][t], losses)
        returns.extend(r.returns)

    def _normalize(self, obs: np.ndarray) -> None:
        """Fold a vector step's observations (n, o) into the policy's normalizer (before acting on them)."""
        if self.policy.normalize_obs:
            self.policy.obs_norm.update(torch.as_tensor(obs, device=self.device))

    def _store(self, rows: dict[str, np.ndarray], done: np.ndarray, losses: list[dict]) -> None:
        """Put one vector step's transitions in the buffer, then pay its gradient steps."""
        if self.reward_learner is not None:
            self.reward_learner.observe(self, rows, done)
        if self.config.her == "none":
            self.buffer.add(**rows)
        else:
            self.buffer.add_step(done, **rows)
        self.env_steps += len(rows["actions"])
        if self.env_steps > self.config.learning_starts:  # as SB3: after the step that passes it
            self._debt += self.config.utd * len(rows["actions"])
            while self._debt >= 1.0:
                losses.append(self.update())
                self._debt -= 1.0

    def learn(self, total_steps: int, on_log: Callable[[dict], bool | None] | None = None) -> None:
        """Run until ``total_steps`` env steps; every ``log_every`` env steps ``on_log(metrics)`` (return True to
        stop): env_steps, updates, episode_return (mean of the episodes ended since the last row), losses,
        alpha, time_s (since this call)."""
        start, returns, losses, next_log = time.perf_counter(), [], [], self.env_steps + self.config.log_every
        while self.env_steps < total_steps:
            self.step(returns, losses)
            if self.env_steps >= next_log or self.env_steps >= total_steps:
                row = {
                    "env_steps": self.env_steps,
                    "updates": self.updates,
                    "time_s": time.perf_counter() - start,
                    "episode_return": float(np.mean(returns)) if returns else float("nan"),
                }
                row |= {k: float(np.mean([x[k] for x in losses])) if losses else float("nan") for k in LOSSES}
                row |= self.reward_learner.metrics() if self.reward_learner is not None else {}
                returns, losses, next_log = [], [], next_log + self.config.log_every
                if on_log is not None and on_log(row):
                    return
