"""Pixel observations for any env that renders: the last ``frames`` RGB images of ``size``² from its camera, channels
stacked, as the observation (DrQ-v2's input). ``embody train TASK --algo sac --set pixels=64`` wraps the task in
it; the policy sees uint8 values laid flat, (n, frames · 3 · size²), and reshapes them to (frames · 3, size, size).
The task's own observation becomes privileged, ahead of its privileged observation: (n, o + p), for a critic that
reads the state while the actor sees images (PPO and SHAC from pixels).

The env resets finished episodes within the step, so the image after an episode's last step is never rendered: a
finished episode's final observation repeats its last rendered stack (only truncated episodes bootstrap from it).
Pixel envs step at the renderer's rate (MuJoCo's tiles every env into one offscreen buffer, sims/mujoco/render.py).

Where the images come from is a *pixel source*, registered by name in ``PIXEL_SOURCES`` (``TrainConfig.pixel_source``;
plugins add theirs with ``api.pixel_source``): ``render``, the simulator's renderer, is the default. A source that can
draw differentiable images of simulator states (``images_of``) lets a gradient pass through its rendering
(``DifferentiableFrames``: D.VA's ablation).
"""

from __future__ import annotations

import numpy as np
import torch

from embody.registry import Registry

from .base import UnsupportedTask

PIXEL_SOURCES: Registry[type] = Registry("pixel source")
PIXEL_SOURCES.register("render", "embody.sims.pixels:PixelEnv")


class _PixelTask:
    """The wrapped task, with the pixel observation's size (what checkpoints are checked against)."""

    def __init__(self, task, observation_size: int, privileged_size: int):
        self._task, self.observation_size, self.privileged_size = task, observation_size, privileged_size

    def __getattr__(self, name):
        return getattr(self._task, name)


class PixelEnv:
    """``env`` (native or Gymnasium) with rendered, frame-stacked observations (module docstring). A subclass may
    draw its own images (``_images``) and offer ``images_of(x)``: images (n, H, W, 3) as a differentiable float
    tensor in [0, 255] of diff states x (n, d) (sims/diff.py), the same numbers ``_images`` rounds."""

    images_of = None

    def __init__(self, env, size: int = 64, frames: int = 3):
        self.env, self.size, self.frames = env, size, frames
        config = getattr(getattr(env, "sim", None), "config", None)
        if config is not None:  # render at the observation's size rather than resizing
            config.render_height = config.render_width = size
        self.pixel_shape = (3 * frames, size, size)
        self.observation_size = int(np.prod(self.pixel_shape))
        self.n_envs, self.action_size = env.n_envs, env.action_size
        self.state_observation_size = env.observation_size
        self.privileged_size = env.observation_size + env.privileged_size
        self.sim = getattr(env, "sim", None)
        self.task = _PixelTask(env.task, self.observation_size, self.privileged_size)
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
        obs, priv = self.env.reset()
        self._stack = np.repeat(self._images()[:, None], self.frames, axis=1)
        return self._flat(self._stack), np.concatenate([obs, priv], axis=-1)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = self.env.step(action)
        info.privileged_obs = np.concatenate([obs, info.privileged_obs], axis=-1)
        info.final_privileged_obs = np.concatenate([info.final_obs, info.final_privileged_obs], axis=-1)
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


class DifferentiableFrames:
    """A pixel source's frame stack drawn from diff states with gradients, laid out as ``PixelEnv``'s observation:
    ``frames(x, fresh)`` → (n, frames · 3 · H · W) float, for SHAC's ``actor_input``. ``fresh`` (n,) bool: envs
    whose x starts an episode (their stack is that image repeated). A detached x starts a gradient window: the
    stack kept from the previous window is detached then. Values are rounded straight-through, so the actor sees
    the numbers the env's uint8 frames hold."""

    def __init__(self, env: PixelEnv):
        if getattr(env, "images_of", None) is None:
            raise UnsupportedTask(
                f"{type(env).__name__} cannot draw differentiable images (a pixel source with images_of, e.g. "
                "cartpole-raster), so no gradient can pass through its rendering"
            )
        self.env, self._stack = env, None  # (n, frames, 3, H, W)

    def __call__(self, x: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        img = self.env.images_of(x).permute(0, 3, 1, 2).float()
        img = img + (img.round() - img).detach()
        if self._stack is not None and not x.requires_grad:
            self._stack = self._stack.detach()
        frames = img[:, None].expand(-1, self.env.frames, -1, -1, -1)
        if self._stack is not None:
            rolled = torch.cat([self._stack[:, 1:], img[:, None]], dim=1)
            frames = torch.where(fresh.to(img.device)[:, None, None, None, None], frames, rolled)
        self._stack = frames
        return frames.reshape(len(x), -1)


def make_pixel_env(env, source: str = "render", size: int = 64, frames: int = 3) -> PixelEnv:
    """``env`` observed through pixel source ``source`` (``PIXEL_SOURCES``)."""
    return PIXEL_SOURCES.get(source)(env, size, frames)
