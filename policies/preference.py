"""Preference-based reward learning as PEBBLE does it (Lee et al. 2021), beside SAC.

The env's reward is never given to the agent. After ``learning_starts`` random steps, SAC explores for
``unsup_steps`` on a state-entropy reward (each next state's distance to its k-th nearest neighbour among states in
the replay buffer, over the running std). Then, every ``every`` env steps until ``budget`` queries are spent, a
feedback session: draw ``candidates × per_session`` pairs of ``segment``-step windows from recent experience,
keep the ``per_session`` the reward ensemble disagrees on most (``selection``), ask a teacher which of each pair
is better (first, second, equal, or skip), fit the ensemble by Bradley–Terry on every label so far, and relabel
the whole replay buffer with its mean reward. The first session also resets SAC's critics (they had learned the
exploration reward).

Foresight (PRIMT): trajectories synthesized outside the agent's experience (``PreferenceLearner.add_foresight``,
e.g. a planner's waypoints tracked by a controller) warm-start the query buffer, not the replay buffer: they are
cut into segments, the newest ``foresight_pool`` kept, and each candidate segment of a session is drawn from them
with probability P / (P + H) (P pool segments, H the segments the recent history holds), so the agent's own
experience displaces them as it grows. Queries early on then compare purposeful behaviour with random.

Labels: 0 the first segment is better, 1 the second, 0.5 equal (a soft target), NaN skipped/unsure (not kept).
Teachers implement ``Teacher``; ``ScriptedTeacher`` reads the env's true reward with B-Pref's noise models (Lee et
al. 2021b): ``beta`` (rationality of a Bradley–Terry choice; inf: always the larger return), ``gamma`` (myopia:
step t of L weighs gamma^(L−1−t)), ``mistake`` (flip probability), ``skip`` and ``equal`` (thresholds as shares
of the session's mean |segment return|).

Shapes: ``E`` ensemble members, ``k`` pairs, ``L`` segment length, ``o`` observation, ``a`` action size.
"""

from __future__ import annotations

import math
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

from .networks import EnsembleMLP, Normalizer


@dataclass
class PreferenceConfig:
    """Preference reward learning's settings (``--set preference.teacher=scripted`` turns it on with SAC)."""

    teacher: str = "none"  # none | scripted (the env's true reward, B-Pref noise below)
    budget: Count = 1000  # queries in all
    per_session: PosInt = 50  # queries per feedback session (PRIMT's)
    every: PosInt = 5_000  # env steps between sessions (PRIMT's)
    unsup_steps: Count = 9_000  # env steps of state-entropy exploration after learning_starts (PEBBLE's; 0: none)
    segment: PosInt = 50  # steps per segment
    selection: str = "disagreement"  # disagreement | uniform
    candidates: PosInt = 10  # pairs drawn per query kept (disagreement)
    history: PosInt = 100_000  # recent transitions segments are drawn from
    ensemble: PosInt = 3
    hidden: list[PosInt] = field(default_factory=lambda: [256, 256])
    lr: NonNeg = 3e-4
    epochs: PosInt = 50  # passes over the labels per session, at most
    stop_accuracy: Unit = 0.97  # a session's training stops once the ensemble fits this share of the labels
    batch: PosInt = 128  # pairs per gradient step
    entropy_k: PosInt = 5  # k-th nearest neighbour of the exploration reward
    entropy_refs: PosInt = 10_000  # buffer states it measures distances to
    foresight_pool: Count = 300  # foresight segments kept in the query buffer (PRIMT's size)
    # the scripted teacher (B-Pref): perfectly rational and far-sighted by default
    beta: PosFloat = math.inf
    gamma: Unit = 1.0
    mistake: Unit = 0.0
    skip: Unit = 0.0
    equal: Unit = 0.0


class PreferenceError(ValueError):
    """A preference dataset file that is missing, damaged or of another shape."""

    exit_code = exits.INPUT


class Teacher(Protocol):
    """Answers queries: ``pairs`` holds ``obs`` (k, 2, L, o), ``actions`` (k, 2, L, a) and ``rewards`` (k, 2, L) (the
    env's, which only a scripted teacher may read); returns labels (k,): 0, 1, 0.5 or NaN (see the module). A
    teacher may also have ``aux_loss(model, obs (B, 2, L, o), actions, labels (B,)) → scalar``, added to the reward
    model's loss (e.g. PRIMT's hindsight), and ``foresight``: trajectories obs (N, T, o), actions (N, T, a) and
    the env's rewards (N, T) for the query buffer (``PreferenceLearner.add_foresight``)."""

    def label(self, pairs: dict[str, np.ndarray]) -> np.ndarray: ...


@dataclass
class ScriptedTeacher:
    """B-Pref's simulated teacher over the env's reward (the module docstring)."""

    beta: float = math.inf
    gamma: float = 1.0
    mistake: float = 0.0
    skip: float = 0.0
    equal: float = 0.0
    seed: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    @classmethod
    def from_config(cls, c: PreferenceConfig, seed: int = 0) -> ScriptedTeacher:
        return cls(c.beta, c.gamma, c.mistake, c.skip, c.equal, seed)

    def label(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        r = pairs["rewards"]  # (k, 2, L)
        total = r.sum(-1)
        weights = self.gamma ** np.arange(r.shape[-1] - 1, -1, -1)
        seen = (r * weights).sum(-1)  # (k, 2) as the myopic teacher weighs them
        margin = np.abs(total).mean()
        if math.isinf(self.beta):
            labels = (seen[:, 1] > seen[:, 0]).astype(np.float64)
        else:
            p_second = 1 / (1 + np.exp(-np.clip(self.beta * (seen[:, 1] - seen[:, 0]), -50, 50)))
            labels = (self.rng.random(len(r)) < p_second).astype(np.float64)
        flip = self.rng.random(len(r)) < self.mistake
        labels[flip] = 1 - labels[flip]
        labels[np.abs(total[:, 1] - total[:, 0]) < self.equal * margin] = 0.5
        if self.skip > 0:  # B-Pref's guard: with no threshold, pairs of negative returns are still asked
            labels[total.max(1) < self.skip * margin] = np.nan
        return labels


class RewardModel(nn.Module):
    """An ensemble of E reward networks over (normalized obs, action) → (E, B), tanh outputs (PEBBLE's). Saved as an
    embody checkpoint (class ``RewardModel``), the observation statistics with it."""

    def __init__(self, obs_size: int, action_size: int, hidden: list[int] | None = None, ensemble: int = 3):
        super().__init__()
        self.obs_size, self.action_size, self.hidden = obs_size, action_size, list(hidden or [256, 256])
        self.obs_norm = Normalizer(obs_size)
        self.nets = EnsembleMLP([obs_size + action_size, *self.hidden, 1], ensemble, "relu")

    def init_kwargs(self) -> dict:
        return {
            "obs_size": self.obs_size,
            "action_size": self.action_size,
            "hidden": self.hidden,
            "ensemble": self.nets.members,
        }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> RewardModel:
        return cls(**kwargs)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """obs (..., o), action (..., a) → every member's reward (E, ...)."""
        lead = obs.shape[:-1]
        x = torch.cat([self.obs_norm(obs.float()), action.float()], -1).reshape(-1, self.obs_size + self.action_size)
        return torch.tanh(self.nets(x)).reshape(-1, *lead)

    @torch.no_grad()
    def reward(self, obs: np.ndarray, action: np.ndarray) -> np.ndarray:
        """The ensemble's mean reward (k,) for obs (k, o) and actions (k, a)."""
        return self(torch.as_tensor(obs), torch.as_tensor(action)).mean(0).numpy()

    def preference_logits(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """For pairs obs (k, 2, L, o), actions (k, 2, L, a): each member's segment-return difference second − first
        (E, k), the Bradley–Terry logit of preferring the second."""
        returns = self(obs, action).sum(-1)  # (E, k, 2)
        return returns[..., 1] - returns[..., 0]


def bradley_terry_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of P(second preferred) = sigmoid(logit) (E, k) against labels (k,) in {0, 0.5, 1}, summed over
    members (each member is its own model) and averaged over pairs."""
    return (
        nn.functional.binary_cross_entropy_with_logits(logits, labels.expand_as(logits), reduction="none").mean(1).sum()
    )


class SegmentHistory:
    """The last ``T`` vector steps of every env, a ring over time: obs (T, n, o), actions (T, n, a), the env's reward
    (T, n), done (T, n) after the step. Segments are windows of one env that no episode end interrupts."""

    def __init__(self, steps: int, n_envs: int, obs_size: int, action_size: int):
        self.T, self.n, self.t, self.filled = steps, n_envs, 0, 0
        self.obs = np.zeros((steps, n_envs, obs_size), np.float32)
        self.actions = np.zeros((steps, n_envs, action_size), np.float32)
        self.rewards = np.zeros((steps, n_envs), np.float32)
        self.done = np.zeros((steps, n_envs), bool)

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, done: np.ndarray) -> None:
        i = self.t % self.T
        self.obs[i], self.actions[i], self.rewards[i], self.done[i] = obs, actions, rewards, done
        self.t, self.filled = self.t + 1, min(self.filled + 1, self.T)

    def sample(self, k: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """Time rows (k, L) and env columns (k, 1) of k segments drawn uniformly among those whose first L − 1
        steps end no episode; None when there are none yet."""
        if self.filled < length:
            return None
        start = np.arange(self.t - self.filled, self.t - length + 1)  # absolute steps
        rows = (start[:, None] + np.arange(length - 1)) % self.T
        valid = ~self.done[rows].any(1)  # (starts, n)
        s, e = np.nonzero(valid)
        if s.size == 0:
            return None
        pick = rng.integers(0, s.size, k)
        return (start[s[pick], None] + np.arange(length)) % self.T, e[pick, None]

    def pairs(self, k: int, length: int, rng: np.random.Generator) -> dict[str, np.ndarray] | None:
        """k random pairs of segments: obs (k, 2, L, o), actions (k, 2, L, a), rewards (k, 2, L)."""
        seg = self.sample(2 * k, length, rng)
        if seg is None:
            return None
        rows, cols = seg
        out = {"obs": self.obs[rows, cols], "actions": self.actions[rows, cols], "rewards": self.rewards[rows, cols]}
        return {key: v.reshape(k, 2, *v.shape[1:]) for key, v in out.items()}


class PreferenceDataset:
    """The labelled pairs so far: obs (N, 2, L, o), actions (N, 2, L, a), the env's rewards (N, 2, L) (for
    evaluation only, never for training) and labels (N,). Saved as safetensors, atomically."""

    KEYS = ("obs", "actions", "rewards", "labels")

    def __init__(self):
        self.data: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.data.get("labels", ()))

    def add(self, pairs: dict[str, np.ndarray], labels: np.ndarray) -> None:
        keep = ~np.isnan(labels)
        new = {**{k: pairs[k][keep] for k in self.KEYS[:3]}, "labels": labels[keep].astype(np.float32)}
        self.data = {k: np.concatenate([self.data[k], v]) if self.data else v for k, v in new.items()}

    def agreement(self) -> float:
        """The share of strict labels (0 or 1) on the side of the larger env return (NaN with none)."""
        if not len(self):
            return float("nan")
        labels, returns = self.data["labels"], self.data["rewards"].sum(-1)
        strict = (labels != 0.5) & (returns[:, 0] != returns[:, 1])
        truth = (returns[strict, 1] > returns[strict, 0]).astype(np.float32)
        return float((labels[strict] == truth).mean()) if strict.any() else float("nan")

    def save(self, path: Path) -> None:
        save_arrays(path, self.data, {"format": "embody.prefs"})

    @classmethod
    def load(cls, path: Path, obs_size: int, action_size: int) -> PreferenceDataset:
        """A dataset written by ``save`` whose shapes fit the task; anything else raises ``PreferenceError``."""
        _, data = load_arrays(path, "embody.prefs", cls.KEYS, PreferenceError, "preference dataset")
        n = len(data["labels"])
        if data["obs"].shape[::3] != (n, obs_size) or data["actions"].shape[::3] != (n, action_size):
            raise PreferenceError(
                f"{path}: pairs of obs {data['obs'].shape} and actions {data['actions'].shape} do not fit this task "
                f"(obs size {obs_size}, action size {action_size})"
            )
        out = cls()
        out.data = data
        return out


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties share their mean rank); NaN when either side is constant."""

    def ranks(v: np.ndarray) -> np.ndarray:
        _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
        return (np.cumsum(counts) - (counts - 1) / 2)[inverse]

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


class PreferenceLearner:
    """PEBBLE's reward learning as SAC's ``RewardLearner`` (the module docstring): owns the reward model, its
    optimizer, the labelled pairs and the recent history segments are drawn from."""

    def __init__(
        self, config: PreferenceConfig, teacher: Teacher, obs_size: int, action_size: int, n_envs: int, seed: int = 0
    ):
        c = self.config = config
        if c.selection not in ("disagreement", "uniform"):
            raise ValueError(f"unknown preference.selection {c.selection!r}; valid: disagreement, uniform")
        self.teacher = teacher
        self.model = RewardModel(obs_size, action_size, c.hidden, c.ensemble)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=c.lr)
        self.history = SegmentHistory(max(c.history // n_envs, 2 * c.segment), n_envs, obs_size, action_size)
        self.dataset = PreferenceDataset()
        self.rng = np.random.default_rng(seed)
        self.queries = self.sessions = 0  # queries asked (skipped ones count against the budget too)
        self.foresight_queries = 0  # queries with a foresight segment in them
        self.next_session = 0  # env steps
        self.accuracy = float("nan")
        self.entropy_scale = Normalizer(1)
        # an extra term of the reward model's loss, from the teacher when it has one (see ``Teacher``)
        self.aux_loss: Callable[..., torch.Tensor] | None = getattr(teacher, "aux_loss", None)
        self.pool: dict[str, np.ndarray] = {}  # foresight segments: obs (P, L, o), actions (P, L, a), rewards (P, L)
        if (trajectories := getattr(teacher, "foresight", None)) is not None:
            self.add_foresight(trajectories)

    def add_foresight(self, trajectories: dict[str, np.ndarray]) -> None:
        """Cut trajectories obs (N, T, o), actions (N, T, a), rewards (N, T) into segments of ``segment`` steps
        (T // L per trajectory, the remainder dropped) and add them to the query buffer's foresight pool, keeping
        the newest ``foresight_pool``."""
        L = self.config.segment
        n, t = trajectories["rewards"].shape
        if t < L:
            raise ValueError(f"foresight trajectories of {t} steps are shorter than preference.segment={L}")
        cut = {}
        for key in ("obs", "actions", "rewards"):
            v = np.asarray(trajectories[key][:, : t // L * L], np.float32)
            cut[key] = v.reshape(n * (t // L), L, *v.shape[2:])
        merged = {k: np.concatenate([self.pool[k], v]) if self.pool else v for k, v in cut.items()}
        self.pool = {k: v[-self.config.foresight_pool :] for k, v in merged.items()}

    # -- SAC's RewardLearner ------------------------------------------------------------------
    def observe(self, sac, rows: dict[str, np.ndarray], done: np.ndarray) -> None:
        self.history.add(rows["obs"], rows["actions"], rows["rewards"], done)
        c, steps = self.config, sac.env_steps
        due = steps >= max(sac.config.learning_starts + c.unsup_steps, self.next_session)
        if due and self.queries < c.budget and self.session():
            if self.sessions == 1:  # the critics had learned the exploration reward
                sac.reset_critics()
            sac.buffer.relabel(self.model.reward)
            self.next_session = steps + c.every
        if self.sessions:
            rows["rewards"] = self.model.reward(rows["obs"], rows["actions"])

    @torch.no_grad()
    def batch_rewards(self, sac, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Before the first session, the state-entropy reward of the batch's next states; after it, None."""
        if self.sessions:
            return None
        buf = sac.buffer
        refs = buf.data["next_obs"][self.rng.integers(0, buf.size, min(self.config.entropy_refs, buf.size))]
        f = sac.policy.features(batch["next_obs"])
        f_refs = sac.policy.features(torch.as_tensor(refs, device=f.device))
        k = min(self.config.entropy_k + 1, len(refs))  # +1: a state is its own nearest neighbour when drawn
        dist = torch.cdist(f, f_refs).kthvalue(k, dim=1).values
        self.entropy_scale.update(dist[:, None])
        return dist / self.entropy_scale.var.sqrt().clamp_min(1e-6)

    def metrics(self) -> dict[str, float]:
        """Labels kept so far, the share of strict ones that agree with the env's reward (the teacher's accuracy),
        the ensemble's accuracy on them, the Spearman correlation of its segment returns with the env's on 256
        fresh segments from recent history (NaN before the first session), and the queries that held a foresight
        segment."""
        rho = float("nan")
        seg = self.history.sample(256, self.config.segment, self.rng) if self.sessions else None
        if seg is not None:
            rows, cols = seg
            learned = self.model.reward(
                self.history.obs[rows, cols].reshape(-1, self.model.obs_size),
                self.history.actions[rows, cols].reshape(-1, self.model.action_size),
            )
            rho = spearman(learned.reshape(rows.shape).sum(1), self.history.rewards[rows, cols].sum(1))
        return {
            "feedback": float(len(self.dataset)),
            "label_agreement": self.dataset.agreement(),
            "reward_accuracy": self.accuracy,
            "reward_spearman": rho,
            "foresight_queries": float(self.foresight_queries),
        }

    # -- feedback sessions ------------------------------------------------------------------
    def session(self) -> bool:
        """Ask the teacher about this session's queries and refit the model; False when no segments exist yet."""
        c = self.config
        k = min(c.per_session, c.budget - self.queries)
        pairs = self.history.pairs(k * (c.candidates if c.selection == "disagreement" else 1), c.segment, self.rng)
        if pairs is None:
            return False
        foresight = self.mix_foresight(pairs) if self.pool else np.zeros(pairs["rewards"].shape[:2], bool)
        if c.selection == "disagreement":
            keep = np.argsort(-self.disagreement(pairs))[:k]
            pairs, foresight = {key: v[keep] for key, v in pairs.items()}, foresight[keep]
        self.foresight_queries += int(foresight.any(1).sum())
        self.dataset.add(pairs, np.asarray(self.teacher.label(pairs), dtype=np.float64))
        self.queries += k
        self.sessions += 1
        self.fit()
        return True

    def mix_foresight(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        """Replace each candidate segment of ``pairs`` by a random foresight segment with probability P / (P + H)
        (the module docstring), in place; which ones were (k, 2)."""
        size = len(self.pool["rewards"])
        share = size / (size + self.history.filled * self.history.n / self.config.segment)
        take = self.rng.random(pairs["rewards"].shape[:2]) < share  # (k, 2)
        pick = self.rng.integers(0, size, int(take.sum()))
        for key in ("obs", "actions", "rewards"):
            pairs[key][take] = self.pool[key][pick]
        return take

    @torch.no_grad()
    def disagreement(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        """(k,) the std over members of P(second preferred)."""
        logits = self.model.preference_logits(torch.as_tensor(pairs["obs"]), torch.as_tensor(pairs["actions"]))
        return torch.sigmoid(logits).std(0).numpy()

    def fit(self) -> None:
        """Refit the ensemble on every label so far (Bradley–Terry), at most ``epochs`` passes, stopping once the
        mean logit's sign agrees with ``stop_accuracy`` of the strict labels."""
        c, d = self.config, self.dataset.data
        if not len(self.dataset):
            return
        obs = torch.as_tensor(d["obs"])
        with torch.no_grad():  # the model's input statistics: those of the labelled segments
            flat = obs.reshape(-1, obs.shape[-1])
            self.model.obs_norm.mean.copy_(flat.mean(0))
            self.model.obs_norm.var.copy_(flat.var(0, unbiased=False))
        actions, labels = torch.as_tensor(d["actions"]), torch.as_tensor(d["labels"])
        for _ in range(c.epochs):
            for idx in torch.randperm(len(labels)).split(c.batch):
                loss = bradley_terry_loss(self.model.preference_logits(obs[idx], actions[idx]), labels[idx])
                if self.aux_loss is not None:
                    loss = loss + self.aux_loss(self.model, obs[idx], actions[idx], labels[idx])
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
            self.accuracy = self.label_accuracy(obs, actions, labels)
            if self.accuracy >= c.stop_accuracy:
                break

    @torch.no_grad()
    def label_accuracy(self, obs: torch.Tensor, actions: torch.Tensor, labels: torch.Tensor) -> float:
        """The share of strict labels (0 or 1) whose side the ensemble's mean logit takes."""
        strict = labels != 0.5
        if not strict.any():
            return float("nan")
        logit = self.model.preference_logits(obs[strict], actions[strict]).mean(0)
        return float(((logit > 0).float() == labels[strict]).float().mean())
