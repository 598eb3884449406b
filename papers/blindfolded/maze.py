"""Procedurally generated perfect mazes (a minigrid ``MiniGridEnv``) and experts at controlled information levels.

A task is a maze seed: ``reset(seed=s)`` carves a perfect maze (randomized depth-first search over
``cells × cells`` maze cells, so a ``2·cells+1`` square grid), places the agent's start
on a free square, the goal on a free square at least ``min_goal_distance`` moves away, and picks the start
direction. The learner sees only minigrid's egocentric partial view
(``agent_view_size²`` encoded squares, walls occlude) and its direction: the goal only when in view.

Experts, one algorithm (plus a wall follower): the expert knows the layout and a set of *candidate* goal squares; it walks the
shortest (turns count) path to the nearest candidate it has not yet seen, drops every square its view
reveals, and heads for the goal as soon as the goal is in view. The knowledge sets the candidates:

- ``informed`` (window 1): the goal square only, so the path is the shortest path to the goal;
- ``region-k``: the free squares of a k×k window that contains the goal at a random (seeded) offset;
- ``blind`` (no window): every free square: nearest-unseen exploration of the whole maze;
- ``blind-wall``: no knowledge either, but the left-hand rule until the goal is in view (memoryless).

Every level's I = log2(#goal squares possible a priori) − log2(#candidates), averaged over tasks
(information.py); a priori the goal is uniform over the free squares ``min_goal_distance`` or more moves
from the start (given the layout and start, which the learner can observe by exploring).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from embody.extras import require

from .information import average_discrete_information

N_ACTIONS = 3  # minigrid's left, right, forward
LEFT, RIGHT, FORWARD = 0, 1, 2
DIR_VEC = ((1, 0), (0, 1), (-1, 0), (0, -1))  # minigrid's DIR_TO_VEC: 0 east, 1 south, 2 west, 3 north
# minigrid object index → learner class: 0 unseen, 1 empty/floor/other, 2 wall, 3 goal
_OBJ_CLASS = np.ones(16, dtype=np.int64)
_OBJ_CLASS[0], _OBJ_CLASS[2], _OBJ_CLASS[8] = 0, 2, 3
N_OBJ_CLASSES = 4


def _minigrid():
    return require("minigrid", "games")


def carve(cells: int, rng: np.random.Generator) -> np.ndarray:
    """A perfect maze as a boolean free-square array indexed [x, y], shape (2·cells+1,)*2."""
    size = 2 * cells + 1
    free = np.zeros((size, size), dtype=bool)
    seen = np.zeros((cells, cells), dtype=bool)
    start = (int(rng.integers(cells)), int(rng.integers(cells)))
    stack = [start]
    seen[start] = True
    free[2 * start[0] + 1, 2 * start[1] + 1] = True
    while stack:
        cx, cy = stack[-1]
        options = [
            (cx + dx, cy + dy)
            for dx, dy in DIR_VEC
            if 0 <= cx + dx < cells and 0 <= cy + dy < cells and not seen[cx + dx, cy + dy]
        ]
        if not options:
            stack.pop()
            continue
        nx, ny = options[int(rng.integers(len(options)))]
        seen[nx, ny] = True
        free[2 * nx + 1, 2 * ny + 1] = True
        free[cx + nx + 1, cy + ny + 1] = True  # the passage between the two cells
        stack.append((nx, ny))
    return free


def path_distances(free: np.ndarray, start: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Moves (4-connected, through free squares) from ``start`` to every reachable free square."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in DIR_VEC:
            n = (x + dx, y + dy)
            if n not in dist and free[n]:
                dist[n] = dist[x, y] + 1
                queue.append(n)
    return dist


def make_env(cells: int = 4, max_steps: int = 100, view: int = 3, min_goal_distance: int = 4):
    """A ``MazeEnv`` (a minigrid ``MiniGridEnv``): the goal lies uniformly among the free squares at least
    ``min_goal_distance`` moves from the start (the farthest ones if none is that far). Needs the ``games`` extra."""
    return _env_class()(cells=cells, max_steps=max_steps, view=view, min_goal_distance=min_goal_distance)


_ENV_CLASS = None


def _env_class():
    global _ENV_CLASS
    if _ENV_CLASS is None:
        _minigrid()  # a clear error naming the games extra when minigrid is missing
        from minigrid.core.grid import Grid
        from minigrid.core.mission import MissionSpace
        from minigrid.core.world_object import Goal, Wall
        from minigrid.minigrid_env import MiniGridEnv

        class MazeEnv(MiniGridEnv):
            """A perfect maze; ``reset(seed=task)`` makes the task. After each observation ``visible`` holds
            the world squares in view (for the experts), ``free``/``goal_pos``/``start_pos`` the task."""

            def __init__(self, cells: int = 4, max_steps: int = 100, view: int = 3, min_goal_distance: int = 4):
                self.cells, self.min_goal_distance = cells, max(1, min_goal_distance)
                super().__init__(
                    mission_space=MissionSpace(mission_func=lambda: "reach the goal"),
                    grid_size=2 * cells + 1,
                    max_steps=max_steps,
                    see_through_walls=False,
                    agent_view_size=view,
                )

            def _gen_grid(self, width, height):
                rng = self.np_random
                self.free = carve(self.cells, rng)
                self.grid = Grid(width, height)
                for x in range(width):
                    for y in range(height):
                        if not self.free[x, y]:
                            self.grid.set(x, y, Wall())
                squares = [tuple(int(v) for v in p) for p in np.argwhere(self.free)]
                self.start_pos = squares[int(rng.integers(len(squares)))]
                dist = path_distances(self.free, self.start_pos)
                far = max(dist.values())
                self.goal_prior = sorted(p for p, d in dist.items() if d >= min(self.min_goal_distance, far))
                self.goal_pos = self.goal_prior[int(rng.integers(len(self.goal_prior)))]
                self.put_obj(Goal(), *self.goal_pos)
                self.agent_pos = self.start_pos
                self.agent_dir = int(rng.integers(4))
                self.mission = "reach the goal"

            def gen_obs(self):
                grid, vis = self.gen_obs_grid()
                image = grid.encode(vis)
                vs, hs = self.agent_view_size, self.agent_view_size // 2
                (dx, dy), (rx, ry) = DIR_VEC[self.agent_dir], DIR_VEC[(self.agent_dir + 1) % 4]
                ax, ay = self.agent_pos
                vx, vy = np.nonzero(vis)
                wx = ax + dx * (vs - 1 - vy) + rx * (vx - hs)
                wy = ay + dy * (vs - 1 - vy) + ry * (vx - hs)
                ok = (wx >= 0) & (wx < self.width) & (wy >= 0) & (wy < self.height)
                self.visible = set(zip(wx[ok].tolist(), wy[ok].tolist()))
                return {"image": image, "direction": self.agent_dir, "mission": self.mission}

        _ENV_CLASS = MazeEnv
    return _ENV_CLASS


# ---- information levels and experts -------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """An expert's knowledge: ``window`` 1 = the goal square (informed), k = a k×k window, None = nothing;
    ``explore``: "nearest" (nearest unseen candidate first) or "wall" (``blind-wall``: the left-hand rule,
    a memoryless exploration of a perfect maze, until the goal is in view)."""

    name: str
    window: int | None
    explore: str = "nearest"

    @staticmethod
    def parse(name: str) -> Level:
        """The level named ``name``: ``informed``, ``region-K`` (K ≥ 1), ``blind`` or ``blind-wall``; ValueError
        otherwise."""
        if name == "informed":
            return Level(name, 1)
        if name == "blind":
            return Level(name, None)
        if name == "blind-wall":
            return Level(name, None, "wall")
        if name.startswith("region-") and name[7:].isdigit() and int(name[7:]) >= 1:
            return Level(name, int(name[7:]))
        raise ValueError(f"unknown information level {name!r}; valid: informed, region-K (K >= 1), blind, blind-wall")


def candidates(env, level: Level, task: int) -> set[tuple[int, int]]:
    """The goal squares consistent with the expert's knowledge on the task ``env`` was reset to."""
    free = set(env.goal_prior)  # the goal's prior support: free squares far enough from the start
    if level.window is None:
        return free
    k = min(level.window, env.width - 2)
    gx, gy = env.goal_pos
    rng = np.random.default_rng([task, k, 7919])  # the window's offset: seeded by the task, not the layout RNG
    lo_x, hi_x = max(1, gx - k + 1), min(gx, env.width - 1 - k)
    lo_y, hi_y = max(1, gy - k + 1), min(gy, env.height - 1 - k)
    x0, y0 = int(rng.integers(lo_x, hi_x + 1)), int(rng.integers(lo_y, hi_y + 1))
    cands = {(x, y) for x, y in free if x0 <= x < x0 + k and y0 <= y < y0 + k}
    assert env.goal_pos in cands
    return cands


class Expert:
    """Walks to the nearest unseen candidate square (shortest path on the known layout), then to the goal."""

    def __init__(self, env, cands: set[tuple[int, int]], explore: str = "nearest"):
        self.cands = set(cands)
        self.goal_seen = False
        self.explore = explore
        self.turned_left = False
        self.observe(env)

    def observe(self, env) -> None:
        """Drop the squares now in view from the candidates; note whether the goal is seen."""
        self.cands -= env.visible
        self.goal_seen = self.goal_seen or env.goal_pos in env.visible

    def act(self, env) -> int:
        """The next minigrid action: the first move of a shortest path to the goal once seen, else to the nearest
        candidate (or, ``wall`` exploration, the left-hand rule)."""
        if self.explore == "wall" and not self.goal_seen:
            return self._follow_left_wall(env)
        targets = {env.goal_pos} if self.goal_seen else self.cands
        free = env.free
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
        first = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            x, y, d = state
            if (x, y) in targets:
                return first[state]
            dx, dy = DIR_VEC[d]
            for action, nxt in (
                (FORWARD, (x + dx, y + dy, d)),
                (LEFT, (x, y, (d - 1) % 4)),
                (RIGHT, (x, y, (d + 1) % 4)),
            ):
                if nxt not in first and free[nxt[0], nxt[1]]:
                    first[nxt] = action if first[state] is None else first[state]
                    queue.append(nxt)
        raise RuntimeError("no path to any candidate square: the maze is not connected")

    def _follow_left_wall(self, env) -> int:
        x, y, d = int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir)
        lx, ly = DIR_VEC[(d - 1) % 4]
        fx, fy = DIR_VEC[d]
        if not self.turned_left and env.free[x + lx, y + ly]:
            action = LEFT
        elif env.free[x + fx, y + fy]:
            action = FORWARD
        else:
            action = RIGHT
        self.turned_left = action == LEFT
        return action


@dataclass
class Episode:
    """One expert episode: (T,) steps of the learner's view before each action, the actions, and the outcome on
    ``task``."""

    image: np.ndarray  # (T, v, v, 3) uint8: the observation before each action
    direction: np.ndarray  # (T,) int8
    action: np.ndarray  # (T,) int8
    success: bool
    task: int
    n_candidates: int = 0
    n_prior: int = 0


def run_expert(env, level: Level, task: int) -> Episode:
    """Run the expert with ``level``'s knowledge on maze seed ``task`` until it reaches the goal or the step limit."""
    obs, _ = env.reset(seed=task)
    cands = candidates(env, level, task)
    expert = Expert(env, cands, level.explore)
    images, dirs, actions = [], [], []
    success = False
    while True:
        action = expert.act(env)
        images.append(obs["image"])
        dirs.append(obs["direction"])
        actions.append(action)
        obs, _, terminated, truncated, _ = env.step(action)
        expert.observe(env)
        if terminated or truncated:
            success = bool(terminated)
            break
    return Episode(
        np.asarray(images, np.uint8),
        np.asarray(dirs, np.int8),
        np.asarray(actions, np.int8),
        success,
        task,
        len(cands),
        len(env.goal_prior),
    )


def level_information(env, level: Level, tasks) -> float:
    """I in bits for ``level`` over ``tasks`` (maze seeds): H(goal | layout, start) − H(goal | knowledge)."""
    pairs = []
    for task in tasks:
        env.reset(seed=task)
        pairs.append((len(env.goal_prior), len(candidates(env, level, task))))
    return average_discrete_information(pairs)


# ---- learner observations -----------------------------------------------------------------------------


def features(image: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """(..., v, v, 3) images and (...) directions → (..., v·v·4 + 4) float32: one-hot object class per
    square (unseen / empty / wall / goal) and one-hot direction."""
    cls = _OBJ_CLASS[np.asarray(image)[..., 0]]
    onehot = np.eye(N_OBJ_CLASSES, dtype=np.float32)[cls]
    lead = onehot.shape[:-3]
    d = np.eye(4, dtype=np.float32)[np.asarray(direction, dtype=np.int64)]
    return np.concatenate([onehot.reshape(*lead, -1), d], axis=-1)


@dataclass
class Rollouts:
    """Evaluation episodes of a learner, one per task."""

    success: np.ndarray  # (n,) bool
    steps: np.ndarray  # (n,) int: steps taken (max_steps when it failed)
    tasks: list[int] = field(default_factory=list)


def evaluate(
    policy,
    tasks: list[int],
    cells: int = 4,
    max_steps: int = 100,
    view: int = 3,
    seed: int = 0,
    sample: bool = True,
    min_goal_distance: int = 4,
) -> Rollouts:
    """Run ``policy`` (a ``history_bc.HistoryPolicy``, or None for uniformly random actions) once on each
    task, all episodes in lockstep so the policy steps as one batch."""
    import torch

    envs = [make_env(cells, max_steps, view, min_goal_distance) for _ in tasks]
    obs = [env.reset(seed=t)[0] for env, t in zip(envs, tasks)]
    n = len(tasks)
    active = np.ones(n, dtype=bool)
    success = np.zeros(n, dtype=bool)
    steps = np.full(n, max_steps, dtype=np.int64)
    gen = torch.Generator().manual_seed(seed)
    state = policy.initial_state(n) if policy is not None else None
    prev = np.full(n, -1, dtype=np.int64)
    for t in range(max_steps):
        if not active.any():
            break
        if policy is None:
            actions = torch.randint(N_ACTIONS, (n,), generator=gen).numpy()
        else:
            x = features(np.stack([o["image"] for o in obs]), np.array([o["direction"] for o in obs]))
            with torch.no_grad():
                logits, state = policy.step(torch.from_numpy(x), torch.from_numpy(prev), state)
            if sample:
                actions = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)[:, 0].numpy()
            else:
                actions = logits.argmax(-1).numpy()
        for i in np.nonzero(active)[0]:
            obs[i], _, terminated, truncated, _ = envs[i].step(int(actions[i]))
            if terminated or truncated:
                active[i] = False
                success[i] = bool(terminated)
                steps[i] = t + 1 if terminated else max_steps
        prev = np.asarray(actions, dtype=np.int64)
    return Rollouts(success, steps, list(tasks))


# ---- the study's domain interface (study.DOMAINS) -----------------------------------------------------


class MazeDomain:
    """What the study needs from a domain: levels, I, expert demonstrations, features and evaluation."""

    name = "maze"
    n_actions = N_ACTIONS

    def __init__(self, cfg):  # a config.MazeConfig
        self.cfg = cfg
        self._env = None

    @property
    def env(self):
        if self._env is None:
            self._env = make_env(self.cfg.cells, self.cfg.max_steps, self.cfg.view, self.cfg.min_goal_distance)
        return self._env

    @property
    def obs_spec(self) -> dict[str, tuple[int, ...]]:
        """Observation parts and their shapes: ``direction`` () and ``image`` (v, v, 3)."""
        v = self.cfg.view
        return {"direction": (), "image": (v, v, 3)}

    def levels(self) -> list[str]:
        """The configured level names (ValueError for an unknown one)."""
        return [Level.parse(name).name for name in self.cfg.levels]

    def information(self, level: str, tasks) -> float:
        """I in bits of ``level`` over ``tasks`` (see ``level_information``)."""
        return level_information(self.env, Level.parse(level), tasks)

    def expert_episodes(self, level: str, tasks) -> list[Episode]:
        """One expert episode per task at ``level``."""
        lv = Level.parse(level)
        return [run_expert(self.env, lv, t) for t in tasks]

    def collect(self, level: str, tasks, information_bits: float | None = None):
        """Expert demonstrations on ``tasks`` as a ``demos.Demos``; refuses an expert failure."""
        from .demos import from_episodes

        eps = self.expert_episodes(level, tasks)
        failed = [e.task for e in eps if not e.success]
        if failed:
            raise RuntimeError(f"the {level} expert failed on maze(s) {failed} within {self.cfg.max_steps} steps")
        meta = {
            "domain": self.name,
            "level": level,
            "tasks": [int(t) for t in tasks],
            "information_bits": information_bits,
            "maze": {
                "cells": self.cfg.cells,
                "view": self.cfg.view,
                "max_steps": self.cfg.max_steps,
                "min_goal_distance": self.cfg.min_goal_distance,
            },
            "expert_steps": [len(e.action) for e in eps],
        }
        return from_episodes([{"image": e.image, "direction": e.direction} for e in eps], [e.action for e in eps], meta)

    def features(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The learner's features (..., v·v·4 + 4) of an observation dict (see ``features``)."""
        return features(obs["image"], obs["direction"])

    def evaluate(self, policy, tasks, seed: int = 0) -> Rollouts:
        """One episode of ``policy`` per task, actions sampled or greedy per ``sample``."""
        return evaluate(
            policy,
            list(tasks),
            self.cfg.cells,
            self.cfg.max_steps,
            self.cfg.view,
            seed,
            self.cfg.sample,
            self.cfg.min_goal_distance,
        )
