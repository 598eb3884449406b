"""A bird's-eye camera for end-to-end driving policies: any DrivingSim whose observations carry a
stack of the latest grayscale BEV frames.

``BEVCamera(sim)`` renders the sim's own bird's-eye view (``sim.render``: highway-env's drawing of
road, lane markings and vehicles; CARLA's overhead camera) after every reset and step, supersampled
and box-filtered to ``size`` in grayscale (the ego is always the centre, so colour adds little; as
highway-env's own GrayscaleObservation), and keeps the last ``frames`` of them: one frame shows
where the vehicles are, two show how they move. ``Observation.image`` is then (H, W, frames) uint8,
oldest first. The frame history is part of the state, so ``clone_state``/``restore_state`` branch
it with the sim (counterfactual rollouts see the frames they would have seen).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .base import Observation, StepResult

GRAY = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R 601 luma


@dataclass
class BEVSettings:
    """The camera: ``frames`` grayscale frames of ``size`` (W, H) pixels at ``scale`` px/m, rendered at
    ``supersample``× the resolution and averaged down (vehicles a few pixels long keep sub-pixel positions)."""

    frames: int = 2
    size: tuple[int, int] = (128, 32)  # (W, H): ±64 m along the road and ±16 m across at 1 px/m
    scale: float = 1.0
    supersample: int = 2

    def shape(self) -> tuple[int, int, int]:
        """(C, H, W) of the image as a CNN reads it (channels = frames)."""
        return self.frames, self.size[1], self.size[0]


class BEVCamera:
    """``sim`` with ``Observation.image`` = the last ``settings.frames`` BEV frames (H, W, frames) uint8 (module
    docstring). Everything else is the wrapped sim's (attribute access falls through to it)."""

    def __init__(self, sim, settings: BEVSettings | None = None):
        self.sim, self.settings = sim, settings or BEVSettings()
        self._frames: np.ndarray | None = None

    def __getattr__(self, name: str):
        return getattr(self.sim, name)

    def frame(self) -> np.ndarray:
        """The BEV now: (H, W) uint8 grayscale."""
        s = self.settings
        k = s.supersample
        rgb = self.sim.render((s.size[0] * k, s.size[1] * k), s.scale * k).astype(np.float32)
        gray = rgb @ GRAY
        return gray.reshape(s.size[1], k, s.size[0], k).mean((1, 3)).round().astype(np.uint8)

    def _observe(self, obs: Observation, fresh: bool) -> Observation:
        f = self.frame()
        if fresh or self._frames is None:
            self._frames = np.repeat(f[:, :, None], self.settings.frames, axis=2)
        else:
            self._frames = np.concatenate([self._frames[:, :, 1:], f[:, :, None]], axis=2)
        return replace(obs, image=self._frames.copy())

    def reset(self, seed: int | None = None) -> Observation:
        return self._observe(self.sim.reset(seed), fresh=True)

    def step(self, action) -> StepResult:
        r = self.sim.step(action)
        return replace(r, obs=self._observe(r.obs, fresh=False))

    def observe(self, image: bool = False) -> Observation:
        """The wrapped sim's observation with the current frame stack (``image`` is always on)."""
        return replace(self.sim.observe(), image=None if self._frames is None else self._frames.copy())

    def clone_state(self):
        return self.sim.clone_state(), None if self._frames is None else self._frames.copy()

    def restore_state(self, state) -> None:
        inner, frames = state
        self.sim.restore_state(inner)
        self._frames = None if frames is None else frames.copy()


__all__ = ["BEVCamera", "BEVSettings"]
