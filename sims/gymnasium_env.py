"""Any Gymnasium environment id through the policy layer: ``embody train gym:ID``, ``embody eval``, ``embody video``.

``GymnasiumEnv`` batches ``n_envs`` copies of ``gym.make(ID, **kwargs)`` in Gymnasium's own ``SyncVectorEnv``
(same-step autoreset) and speaks the native ``VecEnv``'s interface, so PPO, SAC and the evaluator drive it
unchanged. Observations: a Box is flattened; a Dict of Boxes is laid side by side in key order, goal-conditioned
ones (observation, achieved_goal, desired_goal) in that order, with ``obs_parts`` naming each slice for HER.
Actions: a Box with finite bounds, reached from the policy's [-1, 1] by an affine map. Anything else (images,
discrete actions, nested spaces) is refused naming the space. Gymnasium-Robotics ids load its registry (with the
joint-type shim, ``robotics_shim``); ``dm_control/DOMAIN-TASK-v0`` ids are the DeepMind Control Suite's through
Shimmy (extra ``dmc``), their dict observations laid side by side.

Shapes: ``n`` envs, ``o`` flat observation size, ``a`` action size.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field

import numpy as np

from embody import exits
from embody.extras import require

from .vec_env import StepInfo

PREFIX = "gym:"
GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


class GymnasiumError(ValueError):
    """An unknown id, an environment that cannot be made, or a space the policy layer cannot use."""

    exit_code = exits.INPUT


class UnsupportedSpace(GymnasiumError):
    """An observation or action space the policy layer cannot use."""


def _load_registries(env_id: str):
    import gymnasium as gym

    if env_id.rpartition(":")[2].startswith("dm_control/"):  # DeepMind Control Suite tasks through Shimmy
        require("dm_control", "dmc")
        require("shimmy", "dmc")  # importing it registers the dm_control/* ids
    try:
        import gymnasium_robotics
    except ImportError:
        return gym
    from .robotics_shim import apply

    apply()
    gym.register_envs(gymnasium_robotics)
    return gym


def _check_id(gym, env_id: str) -> None:
    """``ID`` or Gymnasium's ``module:ID`` (the module registers ID when imported: a user's own environments)."""
    module, _, env_id = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise GymnasiumError(f"Gymnasium id {module}:{env_id}: cannot import {module!r} ({e})") from e
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=5, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise GymnasiumError(f"unknown Gymnasium id {env_id!r}{hint}")


def obs_layout(space, env_id: str) -> dict[str, tuple[int, int]]:
    """{part: (start, stop)} of the flat observation; UnsupportedSpace for what cannot be flattened as numbers."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box) and space.dtype != np.uint8:
        return {"obs": (0, int(np.prod(space.shape)))}
    if isinstance(space, spaces.Dict) and all(
        isinstance(s, spaces.Box) and s.dtype != np.uint8 for s in space.spaces.values()
    ):
        keys = list(GOAL_KEYS) if set(GOAL_KEYS) == set(space.spaces) else sorted(space.spaces)
        layout, start = {}, 0
        for k in keys:
            size = int(np.prod(space.spaces[k].shape))
            layout[k], start = (start, start + size), start + size
        return layout
    raise UnsupportedSpace(
        f"{env_id}: observation space {space} is not a Box or a Dict of Boxes of numbers "
        "(images and discrete observations are not supported by the policy layer)"
    )


@dataclass
class GymnasiumTask:
    """What trainers and evaluators read from ``env.task`` for a Gymnasium environment."""

    name: str
    observation_size: int
    action_size: int
    privileged_size: int = 0
    max_episode_return: float | None = None
    terminations_are_falls: bool = False
    training: bool = True
    obs_parts: dict = field(default_factory=dict)
    robot: None = None

    def mirror(self):
        return None

    def curriculum_levels(self) -> dict[str, float]:
        return {}

    def curriculum_state(self) -> dict:
        return {}

    def restore_curriculum(self, state: dict) -> None:
        pass


class GymnasiumEnv:
    """``n_envs`` copies of a Gymnasium environment with the native ``VecEnv``'s interface (module docstring)."""

    def __init__(self, env_id: str, n_envs: int = 1, seed: int = 0, kwargs: dict | None = None):
        gym = _load_registries(env_id)
        _check_id(gym, env_id)
        from gymnasium.vector import AutoresetMode, SyncVectorEnv

        make = lambda: gym.make(env_id, render_mode="rgb_array", **(kwargs or {}))  # noqa: E731
        try:
            self.vec = SyncVectorEnv([make for _ in range(n_envs)], autoreset_mode=AutoresetMode.SAME_STEP)
        except (gym.error.Error, TypeError) as e:  # a missing dependency; keyword arguments it does not take
            raise GymnasiumError(f"{env_id}: {str(e).splitlines()[0]}") from None
        single = self.vec.single_action_space
        if not isinstance(single, gym.spaces.Box) or not np.isfinite([single.low, single.high]).all():
            raise UnsupportedSpace(f"{env_id}: action space {single} is not a bounded Box")
        self.layout = obs_layout(self.vec.single_observation_space, env_id)
        self.low, self.high = single.low.astype(np.float64), single.high.astype(np.float64)
        self.n_envs, self.seed = n_envs, seed
        size = max(stop for _, stop in self.layout.values())
        self.task = GymnasiumTask(PREFIX + env_id, size, int(np.prod(single.shape)), obs_parts=self.layout)
        self.observation_size, self.action_size, self.privileged_size = size, self.task.action_size, 0
        self.dt = 1.0 / (self.vec.metadata.get("render_fps") or 20)  # the video's frame period [s]
        self._returns, self._lengths, self._seeded = np.zeros(n_envs), np.zeros(n_envs, np.int64), False

    def flat(self, obs) -> np.ndarray:
        """A batch of observations (an array, or a dict of arrays) → (n, o) float32."""
        if isinstance(obs, dict):
            return np.concatenate([np.asarray(obs[k]).reshape(len(obs[k]), -1) for k in self.layout], 1).astype(
                np.float32
            )
        return np.asarray(obs, np.float32).reshape(len(obs), -1)

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        obs, _ = self.vec.reset(seed=None if self._seeded else self.seed)
        self._seeded = True
        self._returns[:], self._lengths[:] = 0.0, 0
        return self.flat(obs), np.zeros((self.n_envs, 0), np.float32)

    def step(self, action: np.ndarray):
        """action (n, a) in [-1, 1] → obs (n, o), reward (n,), terminated (n,), truncated (n,), StepInfo."""
        a = self.low + (np.clip(action, -1, 1) + 1) / 2 * (self.high - self.low)
        obs, reward, terminated, truncated, info = self.vec.step(a.astype(self.vec.single_action_space.dtype))
        reward = np.asarray(reward, np.float64)
        self._returns += reward
        self._lengths += 1
        done = np.flatnonzero(terminated | truncated)
        flat = self.flat(obs)
        final = flat.copy()
        if done.size:
            finals = info["final_obs"]
            for i in done:
                final[i] = self.flat(
                    {k: [v] for k, v in finals[i].items()}
                    if isinstance(finals[i], dict)
                    else np.asarray(finals[i])[None]
                )[0]
        success = info.get("final_info", {}).get("is_success") if done.size else None  # the last step's
        step_info = StepInfo(
            np.zeros((self.n_envs, 0), np.float32),
            final,
            np.zeros((self.n_envs, 0), np.float32),
            self._returns[done].copy(),
            self._lengths[done].copy(),
            None if success is None else np.asarray(success, bool)[done],
            {},
            np.zeros(self.n_envs, bool),
        )
        self._returns[done], self._lengths[done] = 0.0, 0
        return flat, reward, np.asarray(terminated), np.asarray(truncated), step_info

    def compute_reward(self, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
        """The environment's own reward for goals (k, g) achieved against (k, g) desired (HER's relabelling);
        only goal environments have it."""
        fn = getattr(self.vec.envs[0].unwrapped, "compute_reward", None)
        if fn is None:
            raise AttributeError(f"{self.task.name} has no compute_reward (not a goal environment)")
        return np.asarray(fn(achieved, desired, {}), np.float64).reshape(len(achieved))

    def render(self, env_ids=None) -> np.ndarray:
        frames = self.vec.render()
        ids = range(self.n_envs) if env_ids is None else env_ids
        return np.stack([frames[i] for i in ids])

    def close(self) -> None:
        self.vec.close()
