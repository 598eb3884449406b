"""almi-lower: the H1-2's legs follow velocity commands while the upper body plays ever harder motion clips.

ALMI's lower stage (papers.md, methods.md). The upper body's PD targets are q₀ + amplitude·(clip − q₀); clips are
drawn from the easiest ``slice`` share of the library, sorted by difficulty: how often a clip was playing when an
episode ended in a fall (an exponential average, re-sorted at every reset). Both levels rise by ``up`` while the
legs survive (the share of ended episodes that were not falls ≥ ``survive``) and fall by ``down`` when they do
not — ALMI's "adversarial" curriculum, a game between the legs and the motions rather than a learned adversary.
Evaluation plays the whole library at full amplitude.

Observation, actions and rewards are h1_2-stand's with velocity commands: 77 observations (h1_2-velocity's 47 and
the upper body's q − q₀ and 0.05·q̇), 12 leg actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.robots import RobotSpec, RobotState
from embody.robots.motion import DEFAULT_FAMILIES
from embody.sims.base import SimConfig
from embody.sims.task import TaskConfig
from embody.sims.tasks.h1_2_stand import H1_2Stand, Motion
from embody.sims.tasks.h1_2_velocity import VELOCITY_REWARD_WEIGHTS, Commands, Legged, PenaltyCurriculum, Randomization

# the families a policy trains on; the rest of embody.robots.motion.FAMILIES are held out for evaluation
TRAIN_FAMILIES = (*DEFAULT_FAMILIES, "wave both", "point")


@dataclass
class ClipCurriculum:
    """ALMI's survival-driven curricula over the upper body's clips (amplitude and difficulty slice)."""

    enabled: bool = True
    amplitude: float = 0.1  # starting amplitude, in (0, 1]
    slice: float = 0.1  # starting share of the difficulty-sorted library that clips are drawn from
    up: float = 0.005  # ALMI's steps
    down: float = 0.01
    survive: float = 0.8  # share of ended episodes that were not falls, above which the levels rise
    difficulty_memory: float = 0.95  # weight of a clip's past fall rate when an episode ends on it


@dataclass
class AlmiLowerConfig(TaskConfig):
    """almi-lower settings (ALMI's command ranges and resampling; h1_2-velocity's rewards and randomization)."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(physics_dt=0.005, decimation=4))
    max_episode_steps: int = 1000  # 20 s
    reward_weights: dict[str, float] = field(default_factory=lambda: dict(VELOCITY_REWARD_WEIGHTS))
    commands: Commands = field(
        default_factory=lambda: Commands(
            lin_vel_x=(-0.7, 0.7), lin_vel_y=(-0.3, 0.3), yaw_rate=(-0.5, 0.5), resample_s=8.0
        )
    )
    legged: Legged = field(default_factory=Legged)
    randomization: Randomization = field(default_factory=Randomization)
    penalty_curriculum: PenaltyCurriculum = field(default_factory=lambda: PenaltyCurriculum(enabled=True))
    motion: Motion = field(default_factory=lambda: Motion(families=list(TRAIN_FAMILIES)))
    clips: ClipCurriculum = field(default_factory=ClipCurriculum)


class AlmiLower(H1_2Stand):
    """Legs (12 actions) under velocity commands while the upper body plays clips through ALMI's curricula."""

    name = "almi-lower"
    config_class = AlmiLowerConfig
    train_defaults = dict(H1_2Stand.train_defaults, n_envs=256, **{"ppo.symmetry": True})

    def __init__(self, config: AlmiLowerConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        c = config.clips
        self.amplitude = c.amplitude if c.enabled else 1.0
        self.slice = c.slice if c.enabled else 1.0
        self.difficulty = np.zeros(len(self.lengths))  # per clip: exponential average of "an episode fell on it"
        self.order = np.arange(len(self.lengths))  # clips, easiest first
        self.fell = np.zeros(n_envs, dtype=bool)

    def curriculum_levels(self) -> dict[str, float]:
        return {**super().curriculum_levels(), "amplitude": self.clip_amplitude, "slice": self.clip_slice}

    @property
    def clip_amplitude(self) -> float:
        return self.amplitude if self.training else 1.0

    @property
    def clip_slice(self) -> float:
        return self.slice if self.training else 1.0

    def terminated(self, state: RobotState) -> np.ndarray:
        """h1_2-velocity's falls, remembered for the curricula of the resets that follow."""
        self.fell = super().terminated(state)
        return self.fell

    def on_reset(self, env_ids: np.ndarray) -> None:
        """Also score the clips the ended episodes were playing, move the levels and re-sort the library."""
        ended = env_ids[self.steps[env_ids] > 0]  # the first reset ends no episode
        if ended.size and self.config.clips.enabled:
            self._score(self.clip[ended], self.fell[ended])
        self.fell[env_ids] = False
        super().on_reset(env_ids)

    def _score(self, clips: np.ndarray, fell: np.ndarray) -> None:
        c = self.config.clips
        for clip, f in zip(clips, fell):  # a handful of episodes end per step
            self.difficulty[clip] = c.difficulty_memory * self.difficulty[clip] + (1 - c.difficulty_memory) * f
        self.order = np.argsort(self.difficulty, kind="stable")
        step = c.up if 1.0 - fell.mean() >= c.survive else -c.down
        self.amplitude = float(np.clip(self.amplitude + step, c.amplitude, 1.0))
        self.slice = float(np.clip(self.slice + step, c.slice, 1.0))

    def draw_clips(self, k: int) -> np.ndarray:
        """``k`` clips from the easiest ``slice`` share of the library."""
        n = max(1, int(np.ceil(self.clip_slice * len(self.order))))
        return self.order[self.rng.integers(0, n, k)]

    def upper_targets(self) -> np.ndarray:
        """The upper body at q₀ + amplitude·(clip frame − q₀)."""
        targets = super().upper_targets()
        up = self.upper
        targets[:, up] = self.q0[up] + self.clip_amplitude * (targets[:, up] - self.q0[up])
        return targets
