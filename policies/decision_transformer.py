"""Decision Transformer (Chen et al. 2021): offline RL as return-conditioned sequence modelling.

A causal transformer reads the last ``context`` steps of (return-to-go, observation, action) tokens and predicts
each step's action from its observation token; trained by MSE to the dataset's actions in [-1, 1]. Acting, it is
told the return it should collect (``target_return``) and keeps, per env, the history of what happened: call
``reward(r)`` after every step with the rewards received, so that the return still to go is decremented, and
``reset(env_ids)`` where episodes end. Observations are normalized by the dataset's statistics, returns scaled by
``return_scale``, actions mapped to [-1, 1] from the data's bounds (acted in data units).

Shapes: ``E`` episodes, ``B`` batch, ``K`` context, ``O`` observation size, ``A`` action size, ``n`` envs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .networks import Normalizer
from .trajectory import Array, SavedModel, as_tensor, fit_normalizer, load_model, save_model


@dataclass
class DecisionTransformerConfig:
    """Settings of ``train_decision_transformer`` and of acting."""

    context: int = 20  # K: steps the transformer sees
    embed: int = 128
    layers: int = 3
    heads: int = 1
    dropout: float = 0.1
    max_episode_steps: int = 1000  # the timestep embedding's size
    return_scale: float = 1.0  # returns-to-go are divided by this before embedding
    target_return: float = 0.0  # acting: the return asked for (in reward units)
    lr: float = 1e-4
    weight_decay: float = 1e-4
    batch_size: int = 64
    steps: int = 10_000
    warmup_steps: int = 1000
    seed: int = 0
    device: str = "cpu"
    progress: bool = True


class DecisionTransformer(SavedModel):
    """(rtg (B, K), obs (B, K, O), actions (B, K, A), timesteps (B, K)) → actions (B, K, A) in [-1, 1]; also a
    Policy over ``n`` envs through ``act``/``reward``/``reset`` (see the module docstring)."""

    MODEL, CONFIG, SIZES = "decision_transformer", DecisionTransformerConfig, ("obs_size", "action_size")

    def __init__(self, obs_size: int, action_size: int, config: DecisionTransformerConfig | None = None):
        super().__init__()
        self.config = c = config or DecisionTransformerConfig()
        self.obs_size, self.action_size = obs_size, action_size
        self.obs_norm = Normalizer(obs_size)
        self.register_buffer("action_low", -torch.ones(action_size))
        self.register_buffer("action_high", torch.ones(action_size))
        self.embed_rtg, self.embed_obs = nn.Linear(1, c.embed), nn.Linear(obs_size, c.embed)
        self.embed_action, self.embed_time = nn.Linear(action_size, c.embed), nn.Embedding(c.max_episode_steps, c.embed)
        self.norm = nn.LayerNorm(c.embed)
        layer = nn.TransformerEncoderLayer(c.embed, c.heads, 4 * c.embed, c.dropout, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, c.layers, enable_nested_tensor=False)
        self.head = nn.Sequential(nn.Linear(c.embed, action_size), nn.Tanh())
        self._history: dict | None = None
        self.history_log: list[dict] = []

    def forward(self, rtg, obs_n, actions, timesteps) -> torch.Tensor:
        """Tokens ordered (R₁, s₁, a₁, R₂, …) under a causal mask; each action predicted from its s token."""
        B, K = obs_n.shape[:2]
        t = self.embed_time(timesteps.clamp(0, self.config.max_episode_steps - 1))
        tokens = torch.stack(
            [self.embed_rtg(rtg.unsqueeze(-1)) + t, self.embed_obs(obs_n) + t, self.embed_action(actions) + t], 2
        ).reshape(B, 3 * K, -1)
        mask = torch.triu(torch.full((3 * K, 3 * K), float("-inf"), device=obs_n.device), 1)
        h = self.transformer(self.norm(tokens), mask=mask)
        return self.head(h.reshape(B, K, 3, -1)[:, :, 1])

    # -- acting ------------------------------------------------------------------------------------
    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        """Forget the history of ``env_ids`` (all envs when None): their next step is an episode's first."""
        if self._history is None or env_ids is None:
            self._history = None
            return
        for i in np.asarray(env_ids.cpu() if torch.is_tensor(env_ids) else env_ids).reshape(-1):
            for key in ("rtg", "obs", "actions", "timesteps"):
                self._history[key][i] = []

    @torch.no_grad()
    def act(self, obs: Array, deterministic: bool = True) -> Array:
        """obs (n, O) → action (n, A) in data units, given each env's history and return still to go."""
        o = self.obs_norm(as_tensor(obs, self.action_low.device).reshape(-1, self.obs_size))
        n, K = len(o), self.config.context
        if self._history is None or len(self._history["obs"]) != n:
            self._history = {k: [[] for _ in range(n)] for k in ("rtg", "obs", "actions", "timesteps")}
            self._history["to_go"] = [self.config.target_return] * n
        h = self._history
        for i in range(n):  # per-env histories differ in length: padded on the left
            h["rtg"][i].append(h["to_go"][i] / self.config.return_scale)
            h["obs"][i].append(o[i])
            h["actions"][i].append(torch.zeros(self.action_size, device=o.device))
            h["timesteps"][i].append(len(h["timesteps"][i]))
        batch = [_window(h, i, K, self.obs_size, self.action_size, o.device) for i in range(n)]
        rtg, obs_w, act_w, ts = (torch.stack(x) for x in zip(*batch))
        a = self(rtg, obs_w, act_w, ts)[:, -1]
        for i in range(n):
            h["actions"][i][-1] = a[i]
        out = (a + 1) / 2 * (self.action_high - self.action_low) + self.action_low
        return out.cpu().numpy() if isinstance(obs, np.ndarray) else out

    def reward(self, rewards: Array) -> None:
        """The rewards (n,) the last actions earned: the return still to go drops by them."""
        if self._history is not None:
            for i, r in enumerate(np.asarray(rewards, dtype=np.float64).reshape(-1)):
                self._history["to_go"][i] -= float(r)


def _window(h: dict, i: int, K: int, O: int, A: int, device) -> tuple[torch.Tensor, ...]:
    """Env ``i``'s last K steps, zero-padded on the left."""
    obs, acts = h["obs"][i][-K:], h["actions"][i][-K:]
    pad = K - len(obs)
    rtg = torch.tensor([0.0] * pad + h["rtg"][i][-K:], device=device)
    obs_w = torch.cat([torch.zeros(pad, O, device=device), torch.stack(obs)])
    act_w = torch.cat([torch.zeros(pad, A, device=device), torch.stack(acts)])
    ts = torch.tensor([0] * pad + h["timesteps"][i][-K:], device=device)
    return rtg, obs_w, act_w, ts


def episodes_from_transitions(obs: Array, actions: Array, rewards: Array, dones: Array) -> list[tuple[np.ndarray, ...]]:
    """Split transitions (N rows, in episode order) at ``dones`` (and at the end) into (obs, actions, rewards)."""
    ends = np.flatnonzero(np.asarray(dones).reshape(-1)) + 1
    bounds = zip(np.concatenate([[0], ends]), np.concatenate([ends, [len(obs)]]))
    return [(np.asarray(obs)[a:b], np.asarray(actions)[a:b], np.asarray(rewards)[a:b]) for a, b in bounds if b > a]


def train_decision_transformer(
    episodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]], cfg: DecisionTransformerConfig | None = None
) -> DecisionTransformer:
    """Fit a DT on ``episodes``, each (obs (T, O), actions (T, A), rewards (T,)). Windows of ``context`` steps are
    drawn uniformly over the dataset's steps; the returned model carries ``history_log`` (step, loss, time_s)."""
    cfg = cfg or DecisionTransformerConfig()
    if not episodes:
        raise ValueError("no episodes to train on")
    obs = np.concatenate([e[0] for e in episodes]).astype(np.float32)
    acts = np.concatenate([e[1] for e in episodes]).astype(np.float32)
    if not (np.isfinite(obs).all() and np.isfinite(acts).all()):
        raise ValueError("observations or actions hold NaN or infinite values")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = DecisionTransformer(obs.shape[1], acts.shape[1], cfg).to(cfg.device)
    lo, hi = torch.as_tensor(acts.min(0)), torch.as_tensor(acts.max(0))
    model.action_low.copy_(lo)
    model.action_high.copy_(torch.where(hi > lo, hi, lo + 1))  # a constant action dim maps to −1
    fit_normalizer(model.obs_norm, torch.as_tensor(obs))
    data = _sequences(model, episodes, cfg)
    model.history_log = _fit_dt(model, data, cfg)
    return model.eval()


def _sequences(model: DecisionTransformer, episodes, cfg) -> tuple[torch.Tensor, ...]:
    """Every episode padded into (E, T_max) tensors: rtg, normalized obs, actions in [-1, 1], valid mask."""
    T = max(len(e[0]) for e in episodes)
    E, O, A = len(episodes), model.obs_size, model.action_size
    rtg, obs, act, valid = (
        torch.zeros(E, T),
        torch.zeros(E, T, O),
        torch.zeros(E, T, A),
        torch.zeros(E, T, dtype=torch.bool),
    )
    width = model.action_high - model.action_low
    for i, (o, a, r) in enumerate(episodes):
        n = len(o)
        rtg[i, :n] = torch.as_tensor(np.cumsum(np.asarray(r, dtype=np.float64)[::-1])[::-1].copy()) / cfg.return_scale
        obs[i, :n] = model.obs_norm(torch.as_tensor(o, dtype=torch.float32))
        act[i, :n] = (2 * (torch.as_tensor(a, dtype=torch.float32) - model.action_low) / width - 1).clamp(-1, 1)
        valid[i, :n] = True
    return rtg, obs.detach(), act, valid


def _fit_dt(model: DecisionTransformer, data, cfg) -> list[dict]:
    from embody.progress import Progress

    rtg, obs, act, valid = data
    K = cfg.context
    ends = valid.nonzero()  # every (episode, step) a window may end at: left-padded, as acting sees it
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(cfg.warmup_steps, 1)))
    gen = torch.Generator().manual_seed(cfg.seed)
    bar = Progress(cfg.steps, label="decision transformer", unit="steps") if cfg.progress else None
    log, start = [], time.perf_counter()
    model.train()
    for step in range(1, cfg.steps + 1):
        pick = ends[torch.randint(0, len(ends), (cfg.batch_size,), generator=gen)]
        idx = pick[:, 1:2] - (K - 1) + torch.arange(K)
        pad, rows, at = idx < 0, pick[:, 0:1].expand(-1, K), idx.clamp(min=0)
        mask = valid[rows, at] & ~pad
        keep = mask.unsqueeze(-1)
        pred = model(rtg[rows, at] * mask, obs[rows, at] * keep, act[rows, at] * keep, torch.where(pad, 0, idx))
        loss = ((pred - act[rows, at]).pow(2).sum(-1) * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        sched.step()
        if step % max(cfg.steps // 20, 1) == 0 or step == cfg.steps:
            log.append({"step": step, "loss": loss.item(), "time_s": time.perf_counter() - start})
            if bar is not None:
                bar.update(step, loss=loss.item())
    if bar is not None:
        bar.close()
    return log


def save_decision_transformer(directory, model: DecisionTransformer, meta: dict | None = None):
    """Write ``model`` as an embody checkpoint directory, atomically."""
    return save_model(directory, model, meta)


def load_decision_transformer(directory, device: str = "cpu") -> DecisionTransformer:
    """Load a model saved by ``save_decision_transformer`` (eval mode); anything else raises CheckpointError."""
    return load_model(directory, DecisionTransformer, device)
