"""Offline RL from a fixed dataset of transitions: TD3+BC, IQL, CQL, and behavior cloning as their baseline.

``train_offline`` learns a deterministic policy from (obs, action, reward, next_obs, done)
tuples recorded by some behavior policy, without ever acting in the environment:

- TD3+BC (Fujimoto & Gu 2021): TD3's twin critics, target networks, target policy smoothing and
  delayed actor updates, with the actor loss ``-λ·Q(s, π(s)) + (π(s) - a)²``, ``λ = α / mean|Q|``
  so that ``α`` weighs return against staying on the data whatever the reward scale
  (``α → 0`` is plain behavior cloning).
- IQL (Kostrikov et al. 2021): a value ``V(s)`` regressed on the expectile of ``Q(s, a)`` over the
  dataset's actions, ``Q`` regressed on ``r + γ·V(s')`` (never querying an unseen action), and a
  deterministic actor fitted by advantage-weighted regression: MSE to the dataset action weighted
  by ``min(exp(β·A), max_weight)``.
- CQL (Kumar et al. 2020, CQL(H) on SAC): a tanh-Gaussian actor with a learned entropy temperature, twin
  critics regressed on ``r + γ·min Q'(s', a' ~ π)``, plus the conservative penalty
  ``cql_alpha · (logsumexp_a Q(s, a) − Q(s, a_data))`` with the log-sum-exp estimated from ``cql_samples``
  uniform, current-policy and next-state-policy actions per state (importance-weighted by their densities),
  which pushes Q down on actions the data does not hold. It acts with the Gaussian's mean.
- BC: the same deterministic actor fitted by MSE to the dataset's actions, no critics (the baseline every
  offline-RL method must beat on mixed-quality data).

Observations are normalized by the dataset mean/std and actions scaled to [-1, 1] from
``action_low``/``action_high``; the ``OfflineAgent`` holds both, so it acts and scores in the
original units. It saves as an embody checkpoint (``save_offline``/``load_offline``).

Shapes: ``N`` transitions, ``B`` batch, ``O`` observation size, ``A`` action size.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from embody.config import PosInt

from .networks import Normalizer, mlp
from .trajectory import Array, SavedModel, as_tensor, check_rows, fit_normalizer, like_input, load_model, save_model

ALGOS = ("td3bc", "iql", "cql", "bc")


@dataclass
class OfflineRLConfig:
    """Settings of ``train_offline``: the algorithm (``td3bc`` | ``iql`` | ``cql`` | ``bc``), networks, optimizer and
    each algorithm's own hyperparameters (fields marked TD3+BC or IQL apply to that one only)."""

    algo: str = "td3bc"  # td3bc | iql | cql | bc
    hidden: list[PosInt] = field(default_factory=lambda: [256, 256])
    activation: str = "relu"
    lr: float = 3e-4
    batch_size: int = 256
    steps: int = 100_000  # gradient steps (critic updates)
    gamma: float = 0.99
    tau: float = 0.005  # Polyak rate of the target networks
    alpha: float = 2.5  # TD3+BC: weight of the Q term against the BC term
    policy_noise: float = 0.2  # TD3+BC: target policy smoothing noise, in [-1, 1] action units
    noise_clip: float = 0.5
    policy_delay: int = 2  # TD3+BC: critic updates per actor (and target) update
    expectile: float = 0.7  # IQL: τ of the expectile regression of V
    beta: float = 3.0  # IQL: inverse temperature of the advantage weights
    max_weight: float = 100.0  # IQL: clip of exp(β·A)
    cql_alpha: float = 5.0  # CQL: weight of the conservative penalty
    cql_samples: int = 10  # CQL: actions per state of each kind in the log-sum-exp
    normalize_obs: bool = True
    log_every: int = 1000  # steps between history entries (and progress updates)
    seed: int = 0
    device: str = "cpu"
    progress: bool = True  # a progress line on stderr (rate, ETA, losses)


class OfflineAgent(SavedModel):
    """A deterministic actor with its critics: obs (B, O) → action (B, A), both in data units.

    The state dict holds everything acting and scoring need: the observation normalizer, the
    action bounds, the actor, the twin critics (and IQL's value net). Target networks are
    training-only and not saved.
    """

    MODEL, CONFIG, SIZES = "offline_rl", OfflineRLConfig, ("obs_size", "action_size")

    def __init__(self, obs_size: int, action_size: int, config: OfflineRLConfig | None = None):
        super().__init__()
        self.config = config = config or OfflineRLConfig()
        if config.algo not in ALGOS:
            raise ValueError(f"unknown offline RL algo {config.algo!r}; valid: {list(ALGOS)}")
        self.obs_size, self.action_size = obs_size, action_size
        self.obs_norm = Normalizer(obs_size)  # mean 0, var 1 (identity) unless fitted
        self.register_buffer("action_low", -torch.ones(action_size))
        self.register_buffer("action_high", torch.ones(action_size))
        hidden, act = config.hidden, config.activation
        stochastic = config.algo == "cql"  # the actor's outputs: mean, and log std for a tanh-Gaussian
        self.actor = mlp([obs_size, *hidden, action_size * (2 if stochastic else 1)], act)
        self.log_temperature = nn.Parameter(torch.zeros(())) if stochastic else None  # CQL: SAC's entropy weight
        critics = config.algo != "bc"
        self.critic1 = mlp([obs_size + action_size, *hidden, 1], act) if critics else None
        self.critic2 = mlp([obs_size + action_size, *hidden, 1], act) if critics else None
        self.value = mlp([obs_size, *hidden, 1], act) if config.algo == "iql" else None
        self.history: list[dict] = []
        self.summary: dict = {}

    # -- in normalized units: obs_n (B, O) normalized, a (B, A) in [-1, 1] -----------------------
    def pi(self, obs_n: torch.Tensor) -> torch.Tensor:
        """The actor's action (B, A) in [-1, 1] (CQL: its Gaussian's mean, squashed)."""
        return torch.tanh(self.actor(obs_n)[..., : self.action_size])

    def sample(self, obs_n: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """CQL's stochastic actor: a reparameterized tanh-Gaussian action (B, A) and its log density (B,)."""
        mean, log_std = self.actor(obs_n).split(self.action_size, -1)
        std = log_std.clamp(-5.0, 2.0).exp()
        u = mean + std * torch.randn(mean.shape, generator=gen, device=mean.device)
        logp = (-0.5 * ((u - mean) / std).pow(2) - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        return torch.tanh(u), logp - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)

    def qs(self, obs_n: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics' Q (B,) each."""
        x = torch.cat([obs_n, a], -1)
        return self.critic1(x).squeeze(-1), self.critic2(x).squeeze(-1)

    def scale(self, actions: torch.Tensor) -> torch.Tensor:
        """Actions (B, A) in data units → [-1, 1]."""
        return 2 * (actions - self.action_low) / self._width() - 1

    def unscale(self, a: torch.Tensor) -> torch.Tensor:
        """[-1, 1] → data units (a constant action dim, low == high, always gives that constant)."""
        return (a + 1) / 2 * (self.action_high - self.action_low) + self.action_low

    def _width(self) -> torch.Tensor:
        width = self.action_high - self.action_low
        return torch.where(width > 0, width, torch.ones_like(width))  # a constant action dim scales to -1

    # -- in data units -------------------------------------------------------------------------
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (B, O) → action (B, A) in data units."""
        return self.unscale(self.pi(self.obs_norm(obs)))

    @torch.no_grad()
    def act(self, obs: Array, deterministic: bool = True) -> Array:
        """obs (B, O) or (O,) → action (B, A) or (A,) in data units; numpy in, numpy out
        (a tensor in, a tensor out)."""
        o = as_tensor(obs, self.action_low.device)
        out = self(o.reshape(-1, self.obs_size))
        return like_input(out.reshape(*o.shape[:-1], self.action_size), obs)

    @torch.no_grad()
    def features(self, obs: Array) -> torch.Tensor:
        """obs (B, O) → the actor's last hidden layer (B, H): the learned features backdoor defences inspect."""
        o = as_tensor(obs, self.action_low.device).reshape(-1, self.obs_size)
        return self.actor[:-1](self.obs_norm(o))

    @torch.no_grad()
    def q_value(self, obs: Array, actions: Array) -> Array:
        """obs (B, O), actions (B, A) in data units → Q (B,), the smaller of the twin critics
        (IQL's Q estimate too: its V is regressed on the same minimum). BC has no critics: ValueError."""
        if self.critic1 is None:
            raise ValueError(f"a {self.config.algo} agent has no critics to score actions with")
        device = self.action_low.device
        o, a = as_tensor(obs, device).reshape(-1, self.obs_size), as_tensor(actions, device)
        q1, q2 = self.qs(self.obs_norm(o), self.scale(a.reshape(-1, self.action_size)))
        return like_input(torch.minimum(q1, q2), obs)

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        pass

    def reward(self, rewards: Array) -> None:
        """The offline agents' acting interface (``offline_agents``): a memoryless actor ignores rewards."""


# -- input checks ---------------------------------------------------------------------------------
def _check_inputs(
    obs: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor, next_obs: torch.Tensor, dones: torch.Tensor
) -> None:
    """Raise a ValueError naming the array unless all are non-empty, finite and of matching shapes."""
    arrays = {"obs": obs, "actions": actions, "rewards": rewards, "next_obs": next_obs, "dones": dones}
    dims = {"obs": 2, "actions": 2, "rewards": 1, "next_obs": 2, "dones": 1}
    for name, x in arrays.items():
        if x.numel() == 0:
            raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
        if x.ndim != dims[name]:
            expected = "(N,)" if dims[name] == 1 else "(N, size)"
            raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {expected}")
    for name, x in arrays.items():
        check_rows(name, x, len(obs), tuple(obs.shape[1:]) if name == "next_obs" else None)
    if not ((dones == 0) | (dones == 1)).all():
        raise ValueError("dones holds values other than 0 and 1")


def _action_bounds(
    actions: torch.Tensor, low: Array | float | None, high: Array | float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(A,) bounds: the given ones (scalars broadcast) or the data's min/max."""
    size = actions.shape[1]
    lo = actions.min(0).values if low is None else as_tensor(low, actions.device).expand(size).clone()
    hi = actions.max(0).values if high is None else as_tensor(high, actions.device).expand(size).clone()
    for name, b in (("action_low", lo), ("action_high", hi)):
        if not torch.isfinite(b).all():
            raise ValueError(f"{name} holds NaN or infinite values")
    if (lo > hi).any():
        raise ValueError(f"action_low {lo.tolist()} exceeds action_high {hi.tolist()}")
    slack = 1e-5 * (hi - lo).clamp(min=1.0)  # float round-off of data clipped to the bounds
    if ((actions < lo - slack) | (actions > hi + slack)).any():
        raise ValueError(f"actions fall outside [action_low, action_high] = [{lo.tolist()}, {hi.tolist()}]")
    return lo, hi


# -- training -------------------------------------------------------------------------------------
def train_offline(
    obs: Array,
    actions: Array,
    rewards: Array,
    next_obs: Array,
    dones: Array,
    cfg: OfflineRLConfig | None = None,
    action_low: Array | float | None = None,
    action_high: Array | float | None = None,
) -> OfflineAgent:
    """Learn a policy from transitions: obs (N, O), actions (N, A), rewards (N,), next_obs (N, O),
    dones (N,) (bool or 0/1: the episode ended at next_obs, no bootstrapping past it).

    Actions are scaled to [-1, 1] from ``action_low``/``action_high`` (scalars or (A,); default:
    the data's min/max). The returned agent carries ``history`` (every ``cfg.log_every`` steps:
    step, critic_loss, actor_loss, q_mean — window means — and time_s) and ``summary``.
    """
    cfg = cfg or OfflineRLConfig()
    if cfg.algo not in ALGOS:
        raise ValueError(f"unknown offline RL algo {cfg.algo!r}; valid: {list(ALGOS)}")
    if min(cfg.steps, cfg.batch_size, cfg.policy_delay, cfg.log_every) < 1 or not 0 < cfg.expectile < 1:
        raise ValueError(f"need steps, batch_size, policy_delay, log_every ≥ 1 and 0 < expectile < 1: {cfg}")
    o, a, r, o2, d = (as_tensor(x, cfg.device) for x in (obs, actions, rewards, next_obs, dones))
    _check_inputs(o, a, r, o2, d)
    lo, hi = _action_bounds(a, action_low, action_high)
    with torch.random.fork_rng(devices=[]):  # seeded initial weights, the global generator untouched
        torch.manual_seed(cfg.seed)
        agent = OfflineAgent(o.shape[1], a.shape[1], cfg).to(cfg.device)
    agent.action_low.copy_(lo)
    agent.action_high.copy_(hi)
    if cfg.normalize_obs:
        fit_normalizer(agent.obs_norm, o)
    with torch.no_grad():  # normalize once: every step then only indexes
        data = (agent.obs_norm(o), agent.scale(a).clamp(-1, 1), r, agent.obs_norm(o2), d)
    agent.history = _fit(agent, data, cfg)
    agent.summary = _summary(agent, data, cfg)
    return agent.eval()


def _fit(agent: OfflineAgent, data: tuple[torch.Tensor, ...], cfg: OfflineRLConfig) -> list[dict]:
    """Run ``cfg.steps`` gradient steps on uniformly drawn minibatches; returns the history."""
    from embody.progress import Progress

    step_fn = {"td3bc": _td3bc_step, "iql": _iql_step, "cql": _cql_step, "bc": _bc_step}[cfg.algo]
    opts = {"actor": torch.optim.Adam(agent.actor.parameters(), lr=cfg.lr)}
    if agent.critic1 is not None:
        critics = [*agent.critic1.parameters(), *agent.critic2.parameters()]
        opts["critic"] = torch.optim.Adam(critics, lr=cfg.lr)
    if agent.value is not None:
        opts["value"] = torch.optim.Adam(agent.value.parameters(), lr=cfg.lr)
    if agent.log_temperature is not None:
        opts["temperature"] = torch.optim.Adam([agent.log_temperature], lr=cfg.lr)
    names = {"td3bc": ("actor", "critic1", "critic2"), "bc": ()}.get(cfg.algo, ("critic1", "critic2"))
    targets = {k: copy.deepcopy(getattr(agent, k)).requires_grad_(False) for k in names}
    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
    bar = Progress(cfg.steps, label=f"offline {cfg.algo}", unit="steps") if cfg.progress else None
    if bar is not None:
        bar.update(0)  # counts the rate from step 0
    history, window, start = [], [], time.perf_counter()
    agent.train()
    for step in range(1, cfg.steps + 1):
        idx = torch.randint(0, len(data[0]), (cfg.batch_size,), generator=gen, device=cfg.device)
        batch = tuple(x[idx] for x in data)
        window.append(step_fn(agent, targets, opts, batch, step, cfg, gen))
        if step % cfg.log_every == 0 or step == cfg.steps:
            history.append(_log_entry(step, window, start))
            window = []
            if bar is not None:
                bar.update(step, **_bar_metrics(history[-1]))
    if bar is not None:
        bar.close(**_bar_metrics(history[-1]))
    return history


def _bar_metrics(entry: dict) -> dict:
    return {k.removesuffix("_loss"): v for k, v in entry.items() if k not in ("step", "time_s")}


def _log_entry(step: int, window: list[dict], start: float) -> dict:
    """Means over the window's steps (the actor's over the steps that updated it)."""
    entry: dict = {"step": step}
    for key in window[-1]:
        values = [w[key] for w in window if key in w]
        entry[key] = sum(values) / len(values)
    actor = [w["actor_loss"] for w in window if "actor_loss" in w]
    entry["actor_loss"] = sum(actor) / len(actor) if actor else float("nan")
    return entry | {"time_s": time.perf_counter() - start}


def _update(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


@torch.no_grad()
def _soft_update(agent: OfflineAgent, targets: dict[str, nn.Module], tau: float) -> None:
    for name, target in targets.items():
        for p_t, p in zip(target.parameters(), getattr(agent, name).parameters()):
            p_t.lerp_(p, tau)


def _target_q(targets: dict[str, nn.Module], obs_n: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """min of the target critics, (B,)."""
    x = torch.cat([obs_n, a], -1)
    return torch.minimum(targets["critic1"](x), targets["critic2"](x)).squeeze(-1)


def _critic_loss(agent: OfflineAgent, s: torch.Tensor, a: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The twin critics' summed MSE to the target y (B,), and their mean Q for the log."""
    q1, q2 = agent.qs(s, a)
    return (q1 - y).pow(2).mean() + (q2 - y).pow(2).mean(), torch.minimum(q1, q2).mean().item()


def _bc_step(
    agent: OfflineAgent,
    targets: dict[str, nn.Module],
    opts: dict[str, torch.optim.Optimizer],
    batch: tuple[torch.Tensor, ...],
    step: int,
    cfg: OfflineRLConfig,
    gen: torch.Generator,
) -> dict:
    """One behavior-cloning update: the actor's MSE to the batch's actions."""
    actor_loss = (agent.pi(batch[0]) - batch[1]).pow(2).mean()
    _update(opts["actor"], actor_loss)
    return {"actor_loss": actor_loss.item()}


def _td3bc_step(
    agent: OfflineAgent,
    targets: dict[str, nn.Module],
    opts: dict[str, torch.optim.Optimizer],
    batch: tuple[torch.Tensor, ...],
    step: int,
    cfg: OfflineRLConfig,
    gen: torch.Generator,
) -> dict:
    """One TD3+BC update on a normalized batch (s, a, r, s', d); returns its losses."""
    s, a, r, s2, d = batch
    with torch.no_grad():  # target policy smoothing: a clipped noisy target action
        noise = torch.randn(a.shape, generator=gen, device=a.device) * cfg.policy_noise
        a2 = (torch.tanh(targets["actor"](s2)) + noise.clamp(-cfg.noise_clip, cfg.noise_clip)).clamp(-1, 1)
        y = r + cfg.gamma * (1 - d) * _target_q(targets, s2, a2)
    critic_loss, q_mean = _critic_loss(agent, s, a, y)
    _update(opts["critic"], critic_loss)
    out = {"critic_loss": critic_loss.item(), "q_mean": q_mean}
    if step % cfg.policy_delay == 0:
        pi = agent.pi(s)
        q = agent.critic1(torch.cat([s, pi], -1)).squeeze(-1)
        lam = cfg.alpha / q.abs().mean().detach().clamp(min=1e-6)  # scale-free trade-off of Q against BC
        actor_loss = -lam * q.mean() + (pi - a).pow(2).mean()
        _update(opts["actor"], actor_loss)
        _soft_update(agent, targets, cfg.tau)
        out["actor_loss"] = actor_loss.item()
    return out


def _iql_step(
    agent: OfflineAgent,
    targets: dict[str, nn.Module],
    opts: dict[str, torch.optim.Optimizer],
    batch: tuple[torch.Tensor, ...],
    step: int,
    cfg: OfflineRLConfig,
    gen: torch.Generator,
) -> dict:
    """One IQL update on a normalized batch (s, a, r, s', d); returns its losses."""
    s, a, r, s2, d = batch
    with torch.no_grad():
        q_t = _target_q(targets, s, a)
    v = agent.value(s).squeeze(-1)
    diff = q_t - v  # expectile regression: under-estimates weigh τ, over-estimates 1 - τ
    value_loss = ((cfg.expectile - (diff < 0).float()).abs() * diff.pow(2)).mean()
    _update(opts["value"], value_loss)
    with torch.no_grad():  # Q's target uses V(s'): no action outside the data is ever queried
        y = r + cfg.gamma * (1 - d) * agent.value(s2).squeeze(-1)
        weight = torch.exp(cfg.beta * (q_t - v.detach())).clamp(max=cfg.max_weight)
    critic_loss, q_mean = _critic_loss(agent, s, a, y)
    _update(opts["critic"], critic_loss)
    actor_loss = (weight * (agent.pi(s) - a).pow(2).sum(-1)).mean()
    _update(opts["actor"], actor_loss)
    _soft_update(agent, targets, cfg.tau)
    return {
        "critic_loss": critic_loss.item(),
        "actor_loss": actor_loss.item(),
        "value_loss": value_loss.item(),
        "q_mean": q_mean,
    }


def _cql_step(
    agent: OfflineAgent,
    targets: dict[str, nn.Module],
    opts: dict[str, torch.optim.Optimizer],
    batch: tuple[torch.Tensor, ...],
    step: int,
    cfg: OfflineRLConfig,
    gen: torch.Generator,
) -> dict:
    """One CQL(H) update on a normalized batch (s, a, r, s', d): actor and temperature (SAC), then the critics'
    TD loss plus the conservative penalty; returns its losses."""
    s, a, r, s2, d = batch
    a_pi, logp = agent.sample(s, gen)
    temperature = agent.log_temperature.exp().detach()
    actor_loss = (temperature * logp - torch.minimum(*agent.qs(s, a_pi))).mean()
    _update(opts["actor"], actor_loss)
    temperature_loss = -(agent.log_temperature * (logp.detach() - agent.action_size)).mean()  # target entropy −A
    _update(opts["temperature"], temperature_loss)
    with torch.no_grad():
        y = r + cfg.gamma * (1 - d) * _target_q(targets, s2, agent.sample(s2, gen)[0])
        n, (B, A) = cfg.cql_samples, a.shape
        s_rep, s2_rep = s.repeat_interleave(n, 0), s2.repeat_interleave(n, 0)
        uniform = torch.rand((B * n, A), generator=gen, device=a.device) * 2 - 1
        a_now, logp_now = agent.sample(s_rep, gen)
        a_next, logp_next = agent.sample(s2_rep, gen)
    q1, q2 = agent.qs(s, a)
    td = (q1 - y).pow(2).mean() + (q2 - y).pow(2).mean()
    # log-sum-exp over actions, importance-weighted: uniform density 2^−A, the policy's its own
    proposals = ((uniform, A * math.log(2.0)), (a_now, -logp_now), (a_next, -logp_next))
    penalty = 0.0
    for i, q_data in enumerate((q1, q2)):
        qs = [agent.qs(s_rep, x)[i] + w for x, w in proposals]
        lse = torch.logsumexp(torch.cat([q.reshape(B, n) for q in qs], 1), 1)
        penalty = penalty + (lse - q_data).mean()
    critic_loss = td + cfg.cql_alpha * penalty
    _update(opts["critic"], critic_loss)
    _soft_update(agent, targets, cfg.tau)
    return {
        "critic_loss": critic_loss.item(),
        "actor_loss": actor_loss.item(),
        "cql_penalty": penalty.item(),
        "q_mean": torch.minimum(q1, q2).mean().item(),
    }


@torch.no_grad()
def _summary(
    agent: OfflineAgent, data: tuple[torch.Tensor, ...], cfg: OfflineRLConfig, max_samples: int = 10_000
) -> dict:
    """Final losses plus, over (up to) ``max_samples`` transitions: the mean Q of the dataset's and
    the policy's actions and the policy's mean squared distance to the data in [-1, 1] units."""
    agent.eval()
    s, a = data[0][:max_samples], data[1][:max_samples]
    pi = agent.pi(s)
    last = agent.history[-1]
    out = {"algo": cfg.algo, "steps": cfg.steps, "time_s": last["time_s"], "actor_loss": last["actor_loss"]}
    if agent.critic1 is not None:
        q_data, q_pi = (torch.minimum(*agent.qs(s, x)) for x in (a, pi))
        out |= {
            "critic_loss": last["critic_loss"],
            "q_data_mean": q_data.mean().item(),
            "q_policy_mean": q_pi.mean().item(),
        }
    return out | {"bc_mse": (pi - a).pow(2).mean().item()}


# -- checkpoints ------------------------------------------------------------------------------------
def save_offline(directory: str | Path, agent: OfflineAgent, meta: dict | None = None) -> Path:
    """Write ``agent`` as an embody checkpoint directory, atomically (see ``trajectory.save_model``)."""
    return save_model(directory, agent, meta)


def load_offline(directory: str | Path, device: str = "cpu") -> OfflineAgent:
    """Load an agent saved by ``save_offline`` (eval mode); anything else raises ``CheckpointError``."""
    return load_model(directory, OfflineAgent, device)
