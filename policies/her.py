"""Hindsight experience replay (Andrychowicz et al. 2017) for goal-conditioned environments, as a replay buffer.

Transitions are held per env until their episode ends; then the episode enters the ring as it happened plus ``k``
relabelled copies of every transition, whose desired goal is replaced by a goal the episode did achieve: with the
``future`` strategy the achieved goal of a random later step of the same episode (that transition's next state
included), with ``final`` the episode's last achieved goal. Rewards are recomputed with the environment's own
``compute_reward(achieved, desired)``; terminals are kept (goal tasks end by time). Relabelling happens once, as
episodes are stored, so sampling stays uniform over the ring.

``layout`` names the flat observation's slices (``observation``, ``achieved_goal``, ``desired_goal``: the
``obs_parts`` of a Gymnasium goal environment). Shapes: ``n`` envs, ``T`` an episode's steps, ``o`` observation
size.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .sac import ReplayBuffer

STRATEGIES = ("future", "final")


class HERBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` whose ``add`` takes one vector step and stores whole episodes, relabelled (docstring)."""

    def __init__(
        self,
        capacity: int,
        obs_size: int,
        action_size: int,
        n_envs: int,
        layout: dict[str, tuple[int, int]],
        compute_reward: Callable[[np.ndarray, np.ndarray], np.ndarray],
        strategy: str = "future",
        k: int = 4,
        seed: int = 0,
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown HER strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
        missing = {"achieved_goal", "desired_goal"} - set(layout)
        if missing:
            raise ValueError(f"HER needs a goal-conditioned observation; it has no {', '.join(sorted(missing))}")
        super().__init__(capacity, obs_size, action_size)
        self.achieved, self.desired = (slice(*layout[k]) for k in ("achieved_goal", "desired_goal"))
        self.compute_reward, self.strategy, self.k = compute_reward, strategy, k
        self.rng = np.random.default_rng(seed)
        self.n_envs = n_envs
        # each env's unfinished episode, time-major (T, n, ...); T doubles when an episode outgrows it
        self.pending = {k: np.zeros((0, n_envs, *v.shape[1:]), v.dtype) for k, v in self.data.items()}
        self.lengths = np.zeros(n_envs, np.int64)  # steps of each env's unfinished episode

    def add_step(self, done: np.ndarray, **rows: np.ndarray) -> None:
        """One vector step: rows of every key (n, ...); ``done`` (n,) marks envs whose episode ended with it. The
        step is written for all envs at once; only the envs that finished are visited."""
        if self.lengths.max() >= len(self.pending["obs"]):
            grow = max(len(self.pending["obs"]), 64)
            self.pending = {
                k: np.concatenate([v, np.zeros_like(v, shape=(grow, *v.shape[1:]))]) for k, v in self.pending.items()
            }
        envs = np.arange(self.n_envs)
        for k, v in rows.items():
            self.pending[k][self.lengths, envs] = v
        self.lengths += 1
        for i in np.flatnonzero(done):
            episode = {k: v[: self.lengths[i], i].copy() for k, v in self.pending.items()}
            self.add(**episode)
            if self.k:
                self.add(**self.relabel(episode))
            self.lengths[i] = 0

    def relabel(self, ep: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``k`` copies of the episode's T transitions with achieved goals as desired ones, rewards recomputed."""
        T = len(ep["obs"])
        t = np.repeat(np.arange(T), self.k)
        if self.strategy == "future":
            pick = t + (self.rng.random(len(t)) * (T - t)).astype(np.int64)  # uniform over t..T−1
        else:
            pick = np.full(len(t), T - 1)
        goals = ep["next_obs"][pick, self.achieved]
        out = {k: v[t].copy() for k, v in ep.items()}
        out["obs"][:, self.desired] = goals
        out["next_obs"][:, self.desired] = goals
        out["rewards"] = np.asarray(self.compute_reward(out["next_obs"][:, self.achieved], goals), np.float32)
        return out
