"""Gymnasium facades over the native VecEnv (for users and libraries that speak gymnasium).

``GymVectorEnv`` is a ``gymnasium.vector.VectorEnv`` with ``AutoresetMode.SAME_STEP``: a
finished env is reset inside the same ``step``, its last observation is in
``info["final_obs"]`` (rows valid where ``info["_final_obs"]``). ``GymEnv`` is a single env.
Importing this module registers every task as ``embody/<task>-v0``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from .tasks import TASKS
from .vec_env import make_env


def _spaces(env) -> tuple[gym.spaces.Box, gym.spaces.Box]:
    obs = gym.spaces.Box(-np.inf, np.inf, (env.observation_size,), np.float32)
    act = gym.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)
    return obs, act


class GymVectorEnv(VectorEnv):
    """A registered task as a Gymnasium VectorEnv (same-step autoreset; ``infos["final_obs"]`` holds the finished
    episodes' last observations)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": ["rgb_array"]}

    def __init__(self, task: str, num_envs: int = 1, sim: str = "mujoco", seed: int = 0, render_mode=None):
        self.env = make_env(task, sim, num_envs, seed)
        self.num_envs, self.render_mode = num_envs, render_mode
        self.single_observation_space, self.single_action_space = _spaces(self.env)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def reset(self, *, seed=None, options=None):
        """Reset all envs; ``seed`` reseeds the task's sampler. Info: ``{"privileged_obs": (num_envs, p)}``."""
        if seed is not None:
            self.env.task.reseed(seed)
        obs, priv = self.env.reset()
        return obs, {"privileged_obs": priv}

    def step(self, actions):
        """Step all envs; finished ones reset in the same step. Info keys: ``privileged_obs``, ``diverged``,
        ``final_obs``, ``_final_obs``."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        infos = {
            "privileged_obs": info.privileged_obs,
            "diverged": info.diverged,
            "final_obs": info.final_obs,
            "_final_obs": done,
        }
        return obs, reward.astype(np.float64), terminated, truncated, infos

    def render(self):
        """RGB frame (H, W, 3) uint8 of env 0."""
        return self.env.render(np.array([0]))[0]

    def close_extras(self, **kwargs):
        self.env.close()


class GymEnv(gym.Env):
    """One env of a task as a plain ``gymnasium.Env`` (reset by the caller, as gymnasium expects)."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, task: str, sim: str = "mujoco", seed: int = 0, render_mode=None):
        self.env = make_env(task, sim, 1, seed)
        self.observation_space, self.action_space = _spaces(self.env)
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        """Reset; ``seed`` reseeds the task's sampler. Info: ``{"privileged_obs": (p,)}``."""
        super().reset(seed=seed)
        if seed is not None:
            self.env.task.reseed(seed)
        obs, priv = self.env.reset()
        return obs[0], {"privileged_obs": priv[0]}

    def step(self, action):
        """One step; at an episode's end the returned observation is the final one (call ``reset`` next)."""
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action, dtype=np.float64)[None])
        done = bool(terminated[0] or truncated[0])
        obs = info.final_obs if done else obs  # the native env already reset: report the final state
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self):
        return self.env.render(np.array([0]))[0]

    def close(self):
        self.env.close()


def register_all() -> None:
    """Register every task as ``embody/<task>-v0`` with Gymnasium (single and vector entry points); idempotent."""
    for task in TASKS.names():
        env_id = f"embody/{task}-v0"
        if env_id not in gym.registry:
            gym.register(
                env_id,
                entry_point="embody.sims.gym:GymEnv",
                kwargs={"task": task},
                vector_entry_point="embody.sims.gym:GymVectorEnv",
            )


register_all()
