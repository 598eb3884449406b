"""A Gymnasium env whose ``step`` raises after 40 steps of one instance: the rollout-worker failure in test_scale.py.
Imported by name in ``gym.make("raising_env:Raising-v0")`` on the Ray workers (the test puts this folder on their
PYTHONPATH)."""

import gymnasium as gym
import numpy as np


class RaisingEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, render_mode=None):
        self.render_mode, self.steps = render_mode, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps > 40:
            raise RuntimeError("the injected rollout failure")
        return np.zeros(3, np.float32), -float(np.abs(action).sum()), False, False, {}

    def render(self):
        return np.zeros((8, 8, 3), np.uint8)


gym.register("Raising-v0", entry_point=RaisingEnv, max_episode_steps=20)
