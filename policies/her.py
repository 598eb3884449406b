"""Hindsight experience replay (Andrychowicz et al. 2017) for goal-conditioned environments, as a replay buffer.

Transitions are held per env until their episode ends; then the episode enters the ring as it happened, each row
with its distance to the episode's last row. Relabelling happens as batches are sampled, as in the paper and in
Stable-Baselines3's ``HerReplayBuffer``: a share k / (k + 1) of the rows drawn get, each time, a goal the episode
did achieve — with the ``future`` strategy the achieved goal after a random step from that row to the episode's
end (its own next state included), with ``final`` the episode's last — so a transition is seen with a fresh goal
whenever it is drawn. Rewards are recomputed with the environment's own ``compute_reward(achieved, desired)``;
terminals are kept (goal tasks end by time).

``layout`` names the flat observation's slices (``observation``, ``achieved_goal``, ``desired_goal``: the
``obs_parts`` of a Gymnasium goal environment). Shapes: ``n`` envs, ``T`` an episode's steps, ``o`` observation
size, ``B`` a batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .sac import ReplayBuffer

STRATEGIES = ("future", "final")


class HERBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` whose ``add_step`` takes one vector step and stores whole episodes, and whose ``sample``
    relabels goals (module docstring). ``to_end`` (C,): steps from each row to its episode's last row."""

    KEYS = (*ReplayBuffer.KEYS, "to_end")

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
    ):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown HER strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
        missing = {"achieved_goal", "desired_goal"} - set(layout)
        if missing:
            raise ValueError(f"HER needs a goal-conditioned observation; it has no {', '.join(sorted(missing))}")
        super().__init__(capacity, obs_size, action_size)
        self.data["to_end"] = np.zeros(capacity, np.int64)
        self.achieved, self.desired = (slice(*layout[k]) for k in ("achieved_goal", "desired_goal"))
        self.compute_reward, self.strategy, self.k = compute_reward, strategy, k
        self.n_envs = n_envs
        # each env's unfinished episode, time-major (T, n, ...); T doubles when an episode outgrows it
        self.pending = {k: np.zeros((0, n_envs, *v.shape[1:]), v.dtype) for k, v in self.data.items() if k != "to_end"}
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
            T = self.lengths[i]
            self.add(**{k: v[:T, i] for k, v in self.pending.items()}, to_end=np.arange(T - 1, -1, -1))
            self.lengths[i] = 0

    def sample(self, batch: int, rng: np.random.Generator, device) -> dict[str, torch.Tensor]:
        """``batch`` rows drawn uniformly, a share k / (k + 1) of them with an achieved goal as the desired one."""
        idx = rng.integers(0, self.size, batch)
        out = {k: self.data[k][idx] for k in ReplayBuffer.KEYS}  # copies: relabelling leaves the ring as it is
        her = np.flatnonzero(rng.random(batch) < self.k / (self.k + 1))
        if len(her):
            to_end = self.data["to_end"][idx[her]]
            ahead = to_end if self.strategy == "final" else (rng.random(len(her)) * (to_end + 1)).astype(np.int64)
            # an episode's rows are consecutive in the ring (mod its capacity); the ring overwrites oldest first,
            # so the rows after a stored row, up to its episode's end, are still there
            goals = self.data["next_obs"][(idx[her] + ahead) % self.capacity, self.achieved]
            out["obs"][her, self.desired] = goals
            out["next_obs"][her, self.desired] = goals
            out["rewards"][her] = self.compute_reward(out["next_obs"][her, self.achieved], goals)
        return {k: torch.as_tensor(v, device=device) for k, v in out.items()}
