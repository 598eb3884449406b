"""The point-mass goal task of the offline-RL cross-check (``embody bench offline``), numpy only: the d3rlpy peer
script imports this file too, from its own virtual environment.

Position x in [-1.5, 1.5]², a velocity command a in [-2, 2]², x' = x + 0.25·a, reward −|x'|, episodes of 8
steps. The dataset mixes a good behavior policy a = clip(−4x) (reaches the origin in a step or two) and a bad one
a = clip(+4x) (flees it), a coin flip per episode, plus noise: the mean action is ~0 in every state, so behavior
cloning learns to stand still while offline RL (and a Decision Transformer asked for a high return) recovers the
good policy. Shapes: ``n`` envs or starts, ``N`` transitions.
"""

from __future__ import annotations

import numpy as np

LIMIT, DT, STEPS = 2.0, 0.25, 8


def step(x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x (n, 2), a (n, 2) → x' (n, 2), reward (n,)."""
    x2 = np.clip(x + DT * np.clip(a, -LIMIT, LIMIT), -1.5, 1.5).astype(np.float32)
    return x2, (-np.linalg.norm(x2, axis=-1)).astype(np.float32)


def good(x: np.ndarray) -> np.ndarray:
    return np.clip(-4 * x, -LIMIT, LIMIT)


def dataset(episodes: int, seed: int, noise: float = 0.2) -> dict[str, np.ndarray]:
    """Mixed-quality episodes, time-major per episode: observations, actions, rewards, next_observations (N, ·),
    terminals (N,) all False (episodes are cut by time), timeouts (N,) True at each episode's last step."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.2, 1.2, (episodes, 2)).astype(np.float32)
    sign = rng.choice([-1.0, 1.0], (episodes, 1))
    rows = []
    for _ in range(STEPS):
        a = np.clip(sign * good(x) + rng.normal(0, noise, x.shape), -LIMIT, LIMIT).astype(np.float32)
        x2, r = step(x, a)
        rows.append((x, a, r, x2))
        x = x2
    obs, act, rew, nxt = (np.stack(c, axis=1).reshape(episodes * STEPS, -1) for c in zip(*rows))
    timeouts = np.tile(np.arange(STEPS) == STEPS - 1, episodes)
    return {
        "observations": obs,
        "actions": act,
        "rewards": rew.reshape(-1),
        "next_observations": nxt,
        "terminals": np.zeros(len(obs), bool),
        "timeouts": timeouts,
    }


def evaluate(act, feedback=None, n: int = 256, seed: int = 123) -> np.ndarray:
    """Undiscounted returns (n,) of ``act`` (x (n, 2) → a (n, 2)) from fixed starts; ``feedback(rewards)`` is
    called after every step (return-conditioned agents)."""
    x = np.random.default_rng(seed).uniform(-1, 1, (n, 2)).astype(np.float32)
    total = np.zeros(n)
    for _ in range(STEPS):
        x, r = step(x, np.asarray(act(x), dtype=np.float32))
        if feedback is not None:
            feedback(r)
        total += r
    return total
