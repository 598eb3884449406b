"""h1_2-stand: the legs keep the H1-2 up on the spot while the waist and arms play motion clips (the seed
of ALMI's lower-body task). They step in place (the gait clock runs under the zero command, as in
unitree_rl_gym's H1 tasks): a robot already stepping catches a push that one with both feet planted does not.

The upper body's PD targets come from a motion library (``motion.library``: a folder of clip
files, or the procedural default of waves, reaches, swings and twists); each episode starts a
random clip at a random frame and plays clips back to back. The policy commands the 12 leg
joints only. Its observation is h1_2-velocity's 47 values (the command is always zero) plus
the upper body's joint positions relative to the default pose (15) and velocities ·0.05 (15),
so that it can counter the arms' and torso's motion: 77 values, all from RobotState.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.robots import RobotSpec, RobotState
from embody.robots.motion import DEFAULT_FAMILIES, MotionClip, MotionError, generate_library, load, load_library

from ..base import SimConfig
from ..task import Mirror, TaskConfig
from .h1_2_velocity import REWARD_WEIGHTS, Commands, H1_2Velocity, Legged, PenaltyCurriculum, Randomization


@dataclass
class Motion:
    """Upper-body motion clips the H1-2 tracks while it stands."""

    library: str | None = None  # folder of .safetensors clips; None: the procedural library's ``families``
    families: list[str] = field(default_factory=lambda: list(DEFAULT_FAMILIES))  # embody.robots.motion.FAMILIES
    clip: str | None = None  # one .safetensors clip played over and over (deploy, demos); before library/families
    amplitude: float = 1.0  # targets q0 + amplitude·(clip − q0): 0 holds the default pose, 1 plays the clips


@dataclass
class H1_2StandConfig(TaskConfig):
    """h1_2-stand settings: h1_2-velocity's with a zero command and upper-body motion clips."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(physics_dt=0.005, decimation=4, armature="motors"))
    max_episode_steps: int = 1000  # 20 s
    # issue 19, eleventh round: stepping in place (the gait clock and feet_phase) survives where both feet down did
    # not (80 % of 20 s episodes at 2.9 M env steps against 40 % at 7.5 M); no swing-height term, feet_phase has it
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {
            **{k: w for k, w in REWARD_WEIGHTS.items() if k != "feet_swing_height"},
            "feet_phase": 1.0,
        }
    )
    commands: Commands = field(default_factory=lambda: Commands((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), 1.0))
    legged: Legged = field(default_factory=lambda: Legged(step_in_place=True))
    randomization: Randomization = field(default_factory=Randomization)
    penalty_curriculum: PenaltyCurriculum = field(default_factory=lambda: PenaltyCurriculum(enabled=True))
    motion: Motion = field(default_factory=Motion)


class H1_2Stand(H1_2Velocity):
    """The H1-2 stays on the spot, stepping in place, while its upper body plays motion clips back to back (PD
    targets from the clip)."""

    name = "h1_2-stand"
    learning_bar = ("length", 5.0)
    config_class = H1_2StandConfig

    def __init__(self, config: H1_2StandConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        self.upper = robot.group("upper_body")
        self.frames, self.lengths = clip_table(self._clips(), robot, self.upper, self.dt)
        self.clip = np.zeros(n_envs, dtype=np.int64)
        self.frame = np.zeros(n_envs, dtype=np.int64)

    def _clips(self) -> list[MotionClip]:
        m = self.config.motion
        if m.clip:
            return [load(m.clip)]
        clips = load_library(m.library) if m.library else generate_library(self.robot, families=tuple(m.families))
        if not clips:
            raise MotionError(f"{m.library}: the motion library holds no .safetensors clips")
        return clips

    @property
    def observation_size(self) -> int:
        return super().observation_size + 2 * len(self.upper)

    def on_reset(self, env_ids: np.ndarray) -> None:
        """Also start each env at a random frame of a random clip."""
        super().on_reset(env_ids)
        self.clip[env_ids] = self.draw_clips(len(env_ids))
        self.frame[env_ids] = self.rng.integers(0, self.lengths[self.clip[env_ids]])

    def draw_clips(self, k: int) -> np.ndarray:
        """``k`` clip indices for envs starting a clip: uniform over the library."""
        return self.rng.integers(0, len(self.lengths), k)

    def after_step(self, action: np.ndarray) -> None:
        """Also advance each env's clip by one frame, drawing a new clip at the end of one."""
        super().after_step(action)
        self.frame += 1
        done = np.flatnonzero(self.frame >= self.lengths[self.clip])  # clips play back to back
        self.clip[done] = self.draw_clips(done.size)
        self.frame[done] = 0

    def upper_targets(self) -> np.ndarray:
        """PD targets of all joints (n, j) before the legs are set: the upper body at each env's clip frame."""
        targets = super().upper_targets()
        up, a = self.upper, self.config.motion.amplitude
        targets[:, up] = self.q0[up] + a * (self.frames[self.clip, self.frame] - self.q0[up])
        return targets

    def mirror(self) -> Mirror | None:
        """h1_2-velocity's mirror, then the upper body's joints mirrored (the clips' mirror images are as
        plausible as the clips)."""
        base = super().mirror()
        if base is None:
            return None
        upper = self.joint_mirror(self.upper)
        return Mirror(base.obs.then(upper).then(upper), base.privileged, base.action)

    def observe(self, state: RobotState) -> np.ndarray:
        """h1_2-velocity's observation, then upper-body q − q0 and 0.05 · q̇."""
        up = self.upper
        return np.concatenate(
            [super().observe(state), state.joint_pos[:, up] - self.q0[up], 0.05 * state.joint_vel[:, up]], axis=1
        ).astype(np.float32)


def clip_table(
    clips: list[MotionClip], robot: RobotSpec, columns: np.ndarray, dt: float
) -> tuple[np.ndarray, np.ndarray]:
    """Clips resampled at the control period: frames (c, T_max, len(columns)) padded with each
    clip's last frame, and lengths (c,). Refuses clips that leave the joints' ranges."""
    tables = []
    for clip in clips:
        q = clip.to_robot(robot)
        if not np.isin(columns, [robot.joint_names.index(n) for n in clip.joint_names]).any():
            raise MotionError(
                f"motion {clip.label!r} moves none of the joints this task plays ({robot.name} "
                f"{[robot.joint_names[i] for i in columns][:3]}...)"
            )
        frames = q.sample(np.arange(0.0, q.duration + 1e-9, dt))[:, columns]
        lo, hi = robot.lower[columns], robot.upper[columns]
        outside = (frames < lo - 1e-6) | (frames > hi + 1e-6)
        if outside.any():
            j = columns[np.flatnonzero(outside.any(axis=0))[0]]
            raise MotionError(
                f"motion {clip.label!r} takes {robot.joint_names[j]} outside its range "
                f"[{robot.lower[j]:g}, {robot.upper[j]:g}] rad"
            )
        tables.append(frames)
    lengths = np.array([len(t) for t in tables])
    out = np.stack([np.concatenate([t, np.repeat(t[-1:], lengths.max() - len(t), axis=0)]) for t in tables])
    return out, lengths
