"""Pixel observations for any env that renders: the last ``frames`` RGB images of ``size``² from its camera, channels
stacked, as the observation (DrQ-v2's input). ``embody train TASK --algo sac --set pixels=64`` wraps the task in
it; the policy sees uint8 values laid flat, (n, frames · 3 · size²), and reshapes them to (frames · 3, size, size).

The env resets finished episodes within the step, so the image after an episode's last step is never rendered: a
finished episode's final observation repeats its last rendered stack (only truncated episodes bootstrap from it).
Pixel envs step at the renderer's rate (MuJoCo's tiles every env into one offscreen buffer, sims/mujoco/render.py).
"""

from __future__ import annotations

import numpy as np


class _PixelTask:
    """The wrapped task, with the pixel observation's size (what checkpoints are checked against)."""

    def __init__(self, task, observation_size: int):
        self._task, self.observation_size = task, observation_size

    def __getattr__(self, name):
        return getattr(self._task, name)


class PixelEnv:
    """``env`` (native or Gymnasium) with rendered, frame-stacked observations (module docstring)."""

    def __init__(self, env, size: int = 64, frames: int = 3):
        self.env, self.size, self.frames = env, size, frames
        config = getattr(getattr(env, "sim", None), "config", None)
        if config is not None:  # render at the observation's size rather than resizing
            config.render_height = config.render_width = size
        self.pixel_shape = (3 * frames, size, size)
        self.observation_size = int(np.prod(self.pixel_shape))
        self.n_envs, self.action_size, self.privileged_size = env.n_envs, env.action_size, env.privileged_size
        self.task = _PixelTask(env.task, self.observation_size)
        self.dt = env.dt
        self._stack: np.ndarray | None = None  # (n, frames, size, size, 3)

    def _images(self) -> np.ndarray:
        """(n, size, size, 3) uint8, block-averaged when the renderer gives larger frames."""
        img = self.env.render()
        h, w = img.shape[1:3]
        if (h, w) != (self.size, self.size):
            fy, fx = h // self.size, w // self.size
            img = img[:, : fy * self.size, : fx * self.size].reshape(len(img), self.size, fy, self.size, fx, 3)
            img = img.mean((2, 4)).astype(np.uint8)
        return img

    def _flat(self, stack: np.ndarray) -> np.ndarray:
        """(n, frames, H, W, 3) → (n, frames · 3 · H · W) uint8, channels first."""
        return np.ascontiguousarray(stack.transpose(0, 1, 4, 2, 3)).reshape(len(stack), -1)

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        _, priv = self.env.reset()
        self._stack = np.repeat(self._images()[:, None], self.frames, axis=1)
        return self._flat(self._stack), priv

    def step(self, action: np.ndarray):
        _, reward, terminated, truncated, info = self.env.step(action)
        done = terminated | truncated
        final = self._flat(self._stack)  # see the module docstring
        img = self._images()
        self._stack = np.concatenate([self._stack[:, 1:], img[:, None]], axis=1)
        self._stack[done] = img[done, None]  # a new episode starts from its first image
        info.final_obs = final
        return self._flat(self._stack), reward, terminated, truncated, info

    def render(self, env_ids=None) -> np.ndarray:
        return self.env.render(env_ids)

    def close(self) -> None:
        self.env.close()
