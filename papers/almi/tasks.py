"""ALMI's tasks on the H1-2: almi (the whole body), almi-lower (legs) and almi-upper (waist and arms).

The upper body is ALMI's: the waist and four joints per arm (``TRACKED``: shoulder pitch, roll, yaw and elbow
pitch) follow a motion clip's reference q₀ + amplitude·(clip − q₀). The forearm twist and the wrists are held at
the reference (the default pose in every procedural and retargeted clip): ALMI's H1-2 has no wrists, and neither
the procedural families nor BVH retargeting determine them.

Clips come from the easiest ``slice`` share of the library, sorted by difficulty: how often a clip was playing
when an episode ended in a fall (an exponential average, re-sorted at every reset). The amplitude and the slice
rise by ``up`` while the robot survives (the share of ended episodes that were not falls ≥ ``survive``) and
fall by ``down`` when it does not: ALMI's "adversarial" curricula, a game between the legs and the motions
rather than a learned adversary. Evaluation plays the whole library at full amplitude.

* ``almi``: 21 actions, the legs' 12 (PD targets q₀ + 0.25·a, as h1_2-velocity's) then the tracked joints' 9
  (q₀ + 0.25·a). It observes the lower observation followed by the upper one; its reward is both parts' (the
  single whole-body policy is ALMI's main baseline; the composite ALMI policy acts on it too, each part reading
  its own columns).
* ``almi-lower``: the legs (12 actions) under velocity commands; the lower observation (77: h1_2-velocity's 47
  and the upper body's q − q₀ and 0.05·q̇). The upper body plays the reference open loop, or, given
  ``upper_policy`` (a run directory), a frozen almi-upper policy tracks it.
* ``almi-upper``: the tracked joints (9 actions); the upper observation (80): 0.25·pelvis angular velocity (3),
  projected gravity (3), the tracked joints' reference − q₀ (9), every joint's q − q₀ (27) and 0.05·q̇ (27), the
  last upper action (9), sin and cos of the gait phase (2). Given ``lower_policy`` (a run directory) a frozen
  almi-lower policy walks the legs under the commands, whose ranges are wider than the lower stage's; without
  one the legs hold their default pose by PD.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embody.robots import RobotSpec, RobotState
from embody.robots.h1_2.observations import pelvis_ang_vel, projected_gravity
from embody.robots.motion import DEFAULT_FAMILIES
from embody.sims.base import SimConfig
from embody.sims.task import Mirror, TaskConfig
from embody.sims.tasks.h1_2_stand import H1_2Stand, Motion
from embody.sims.tasks.h1_2_velocity import VELOCITY_REWARD_WEIGHTS, Commands, Legged, PenaltyCurriculum, Randomization

TRACKED = ("torso_joint",) + tuple(
    f"{s}_{j}_joint"
    for s in ("left", "right")
    for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch")
)
# the families a policy trains on; the rest of embody.robots.motion.FAMILIES are held out for evaluation
TRAIN_FAMILIES = (*DEFAULT_FAMILIES, "wave both", "point")
UPPER_REWARD_WEIGHTS = {"upper_tracking": 2.0, "action_rate": -0.01, "alive": 0.15, "orientation": -1.0}


@dataclass
class ClipCurriculum:
    """ALMI's survival-driven curricula over the clips (amplitude and difficulty slice)."""

    enabled: bool = True
    amplitude: float = 0.1  # starting amplitude, in (0, 1]
    slice: float = 0.1  # starting share of the difficulty-sorted library that clips are drawn from
    up: float = 0.005  # ALMI's lower-stage steps
    down: float = 0.01
    survive: float = 0.8  # share of ended episodes that were not falls, above which the levels rise
    difficulty_memory: float = 0.95  # weight of a clip's past fall rate when an episode ends on it


def _commands(vx: float) -> Commands:
    return Commands(lin_vel_x=(-vx, vx), lin_vel_y=(-0.3, 0.3), yaw_rate=(-0.5, 0.5), resample_s=8.0)  # ALMI's


@dataclass
class AlmiConfig(TaskConfig):
    """Settings of the three ALMI tasks (each its own defaults; see ``AlmiLower``, ``AlmiUpper``)."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(physics_dt=0.005, decimation=4))
    max_episode_steps: int = 1000  # 20 s
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {**VELOCITY_REWARD_WEIGHTS, **UPPER_REWARD_WEIGHTS}
    )
    commands: Commands = field(default_factory=lambda: _commands(0.7))
    legged: Legged = field(default_factory=Legged)
    randomization: Randomization = field(default_factory=Randomization)
    penalty_curriculum: PenaltyCurriculum = field(default_factory=lambda: PenaltyCurriculum(enabled=True))
    motion: Motion = field(default_factory=lambda: Motion(families=list(TRAIN_FAMILIES)))
    clips: ClipCurriculum = field(default_factory=ClipCurriculum)
    upper_action_scale: float = 0.25  # rad per unit action
    tracking_sigma: float = 0.5  # rad², of the mean squared tracking error (ALMI's)
    lower_policy: str | None = None  # almi-upper: an almi-lower run whose policy walks the legs
    upper_policy: str | None = None  # almi-lower: an almi-upper run whose policy tracks the clips


@dataclass
class AlmiLowerConfig(AlmiConfig):
    """almi-lower's defaults: the lower stage's rewards."""

    reward_weights: dict[str, float] = field(default_factory=lambda: dict(VELOCITY_REWARD_WEIGHTS))


@dataclass
class AlmiUpperConfig(AlmiConfig):
    """almi-upper's defaults: upper rewards, commands to ±1 m/s, ALMI's slow upper-stage amplitude curriculum."""

    reward_weights: dict[str, float] = field(default_factory=lambda: dict(UPPER_REWARD_WEIGHTS))
    commands: Commands = field(default_factory=lambda: _commands(1.0))
    penalty_curriculum: PenaltyCurriculum = field(default_factory=PenaltyCurriculum)
    clips: ClipCurriculum = field(
        default_factory=lambda: ClipCurriculum(amplitude=0.5, slice=1.0, up=0.001, down=0.001)
    )


class AlmiWholeBody(H1_2Stand):
    """The whole body: 12 leg actions, then the 9 tracked upper joints' (see the module docstring)."""

    name = "almi"
    config_class = AlmiConfig
    train_defaults = dict(H1_2Stand.train_defaults, **{"ppo.symmetry": False})

    def __init__(self, config: AlmiConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        self.restart_curricula()
        self.fell = np.zeros(n_envs, dtype=bool)
        self.tracked = np.array([robot.joint_names.index(n) for n in TRACKED])
        self.reference = np.tile(self.q0, (n_envs, 1))  # this step's upper-body reference (all joints)
        self.leg_action = np.zeros((n_envs, len(self.legs)))  # what the legs and the upper body last did,
        self.upper_action = np.zeros((n_envs, len(self.tracked)))  # whoever decided it
        self.last_action = np.zeros((n_envs, self.action_size))
        self.state: RobotState | None = None  # the last observed state, which frozen parts act on
        self.pinned = np.full(n_envs, -1)  # a clip an env plays over and over (datasets); -1: drawn as usual
        self.hands = None  # teleoperation: a person's hand targets replace the clips (``teleop``)
        self.teleop_reference: np.ndarray | None = None  # (n_joints,)
        # a clip's intensity: its upper joints' mean speed [rad/s] (the difficulty axis of the evaluation)
        speeds = np.abs(np.diff(self.frames, axis=1)) / self.dt
        self.intensity = np.array([speeds[c, : n - 1].mean() if n > 1 else 0.0 for c, n in enumerate(self.lengths)])

    # -- sizes ---------------------------------------------------------------------------
    @property
    def lower_observation_size(self) -> int:
        return super().observation_size

    @property
    def upper_observation_size(self) -> int:
        return 6 + len(self.tracked) + 2 * self.robot.n_joints + len(self.tracked) + 2

    @property
    def observation_size(self) -> int:
        return self.lower_observation_size + self.upper_observation_size

    @property
    def action_size(self) -> int:
        return len(self.legs) + len(self.tracked)

    def mirror(self) -> Mirror | None:
        return None  # the whole-body and upper policies train without symmetry augmentation

    # -- curricula -----------------------------------------------------------------------
    def restart_curricula(self) -> None:
        """Amplitude and slice at their starting levels, every clip equally (un)known."""
        c = self.config.clips
        self.amplitude, self.slice = (c.amplitude, c.slice) if c.enabled else (1.0, 1.0)
        self.difficulty = np.zeros(len(self.lengths))  # per clip: exponential average of "an episode fell on it"
        self.order = np.arange(len(self.lengths))  # clips, easiest first

    def reseed(self, seed: int) -> None:
        """Also restart the clip curricula."""
        super().reseed(seed)
        self.restart_curricula()

    def curriculum_levels(self) -> dict[str, float]:
        return {**super().curriculum_levels(), "amplitude": self.clip_amplitude, "slice": self.clip_slice}

    def curriculum_state(self) -> dict:
        levels = {"amplitude": self.amplitude, "slice": self.slice, "difficulty": self.difficulty.tolist()}
        return {**super().curriculum_state(), **levels}

    def restore_curriculum(self, state: dict) -> None:
        super().restore_curriculum(state)
        self.amplitude = float(state.get("amplitude", self.amplitude))
        self.slice = float(state.get("slice", self.slice))
        if len(state.get("difficulty", ())) == len(self.difficulty):  # the same clip library
            self.difficulty = np.asarray(state["difficulty"], dtype=np.float64)
            self.order = np.argsort(self.difficulty, kind="stable")

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
        self.leg_action[env_ids], self.upper_action[env_ids] = 0.0, 0.0
        super().on_reset(env_ids)

    def _score(self, clips: np.ndarray, fell: np.ndarray) -> None:
        c, n = self.config.clips, len(self.difficulty)
        ended = np.bincount(clips, minlength=n)  # k episodes ending on a clip: k steps of its average at once
        falls = np.bincount(clips, weights=fell.astype(np.float64), minlength=n)
        keep = c.difficulty_memory**ended
        self.difficulty = keep * self.difficulty + (1 - keep) * falls / np.maximum(ended, 1)
        self.order = np.argsort(self.difficulty, kind="stable")
        step = c.up if 1.0 - fell.mean() >= c.survive else -c.down
        self.amplitude = float(np.clip(self.amplitude + step, c.amplitude, 1.0))
        self.slice = float(np.clip(self.slice + step, c.slice, 1.0))

    def draw_clips(self, k: int) -> np.ndarray:
        """``k`` clips from the easiest ``slice`` share of the library."""
        n = max(1, int(np.ceil(self.clip_slice * len(self.order))))
        return self.order[self.rng.integers(0, n, k)]

    def pin(self, env_ids: np.ndarray, clips: np.ndarray) -> None:
        """Play ``clips[k]`` at ``env_ids[k]`` from its start, over and over (until pinned again)."""
        self.pinned[env_ids] = clips
        self.clip[env_ids], self.frame[env_ids] = clips, 0

    def after_step(self, action: np.ndarray) -> None:
        """Also keep pinned envs on their clip."""
        super().after_step(action)
        p = self.pinned >= 0
        self.clip[p] = self.pinned[p]

    def teleop(self, move: np.ndarray, buttons: set[str]) -> None:
        """One tick of a person's input (``embody deploy --teleop``): hand targets become the reference."""
        from .teleop import HandTargets

        if self.hands is None:
            self.hands = HandTargets(self.robot, self.dt)
        self.teleop_reference = self.hands.update(move, buttons)

    def upper_targets(self) -> np.ndarray:
        """The upper body at the reference q₀ + amplitude·(clip frame − q₀), or the teleoperated reference."""
        targets = super().upper_targets()
        up = self.upper
        if self.teleop_reference is not None:
            targets[:, up] = self.teleop_reference[up]
            return targets
        targets[:, up] = self.q0[up] + self.clip_amplitude * (targets[:, up] - self.q0[up])
        return targets

    # -- observations --------------------------------------------------------------------
    def leg_last_action(self) -> np.ndarray:
        return self.leg_action

    def observe(self, state: RobotState) -> np.ndarray:
        """The lower observation, then the upper one (remembering ``state`` for frozen parts)."""
        self.state = state
        return np.concatenate([self.lower_observe(state), self.upper_observe(state)], axis=1)

    def lower_observe(self, state: RobotState) -> np.ndarray:
        """(n, 77): almi-lower's observation."""
        return super().observe(state)

    def upper_observe(self, state: RobotState) -> np.ndarray:
        """(n, 80): almi-upper's observation (module docstring)."""
        phase = self.gait_phase(state)[:, 0]
        return np.concatenate(
            [
                0.25 * pelvis_ang_vel(state, self.mount),
                projected_gravity(state, self.mount),
                self.reference[:, self.tracked] - self.q0[self.tracked],
                state.joint_pos - self.q0,
                0.05 * state.joint_vel,
                self.upper_action,
                np.sin(2 * np.pi * phase)[:, None],
                np.cos(2 * np.pi * phase)[:, None],
            ],
            axis=1,
        ).astype(np.float32)

    # -- actions -------------------------------------------------------------------------
    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        """Legs as h1_2-velocity's; tracked joints at q₀ + scale·a; the rest of the upper body at the reference."""
        return self.whole_body_command(action[:, : len(self.legs)], action[:, len(self.legs) :])

    def whole_body_command(self, legs: np.ndarray, upper: np.ndarray | None) -> np.ndarray:
        """PD targets from the legs' and the upper body's actions; ``upper`` None: the reference, open loop."""
        self.reference = self.upper_targets()
        self.leg_action = np.asarray(legs, dtype=np.float64)
        targets = super().action_to_command(self.leg_action)
        if upper is not None:
            self.upper_action = np.clip(upper, -10.0, 10.0)
            up = self.q0[self.tracked] + self.config.upper_action_scale * self.upper_action
            targets[:, self.tracked] = np.clip(up, self.robot.lower[self.tracked], self.robot.upper[self.tracked])
        return targets

    def frozen(self, run: str | None, task: str, obs_size: int, action_size: int):
        """The policy of run directory ``run`` (None: None), refused unless trained on ``task`` with these sizes."""
        if run is None:
            return None
        from embody.policies.checkpoint import load_checkpoint

        spec = {
            "task": task,
            "robot": self.robot.name,
            "joints": list(self.robot.joint_names),
            "obs_size": obs_size,
            "privileged_size": self.privileged_size,
            "action_size": action_size,
        }
        return load_checkpoint(Path(run) / "checkpoint", expect_spec=spec).policy

    def act_frozen(self, policy, obs: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return policy.act(torch.as_tensor(obs), deterministic=True).numpy().astype(np.float64)

    # -- rewards and metrics -------------------------------------------------------------
    def reward_upper_tracking(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """exp(−mean over tracked joints of (reference − q)² / σ)."""
        err = np.mean((self.reference[:, self.tracked] - state.joint_pos[:, self.tracked]) ** 2, axis=1)
        return np.exp(-err / self.config.tracking_sigma)

    def step_metrics(self, state: RobotState) -> dict[str, np.ndarray]:
        """Also ``upper_tracking_error``: the tracked joints' RMS error from the reference [rad]; ``power``: the
        motors' mechanical power Σ|τ·q̇| [W]; ``clip_intensity``: the playing clip's intensity × amplitude [rad/s]."""
        err = self.reference[:, self.tracked] - state.joint_pos[:, self.tracked]
        return {
            **super().step_metrics(state),
            "upper_tracking_error": np.sqrt(np.mean(err**2, axis=1)),
            "power": np.sum(np.abs(state.joint_torque * state.joint_vel), axis=1),
            "clip_intensity": self.intensity[self.clip] * self.clip_amplitude,
        }


class AlmiLower(AlmiWholeBody):
    """ALMI's lower stage: 12 leg actions; the upper body open loop or a frozen almi-upper policy."""

    name = "almi-lower"
    config_class = AlmiLowerConfig
    train_defaults = dict(AlmiWholeBody.train_defaults, **{"ppo.symmetry": True})
    learning_bar = ("length", 5.0)

    @classmethod
    def rollout_variants(cls, tmp: Path) -> dict[str, list[str]]:
        """The upper body open loop, and driven by a frozen (untrained) almi-upper policy: the frozen part's cost."""
        from .train import untrained_run

        return {"one policy": [], "two policies": [f"env.upper_policy={untrained_run('almi-upper', tmp / 'upper')}"]}

    def __init__(self, config: AlmiConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        self.upper_policy = self.frozen(
            config.upper_policy, "almi-upper", self.upper_observation_size, len(self.tracked)
        )

    @property
    def observation_size(self) -> int:
        return self.lower_observation_size

    @property
    def action_size(self) -> int:
        return len(self.legs)

    def mirror(self) -> Mirror | None:
        return H1_2Stand.mirror(self)

    def observe(self, state: RobotState) -> np.ndarray:
        self.state = state
        return self.lower_observe(state)

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        upper = None
        if self.upper_policy is not None and self.state is not None:
            self.reference = self.upper_targets()  # the upper policy sees this step's reference
            upper = self.act_frozen(self.upper_policy, self.upper_observe(self.state))
        return self.whole_body_command(action, upper)


class AlmiUpper(AlmiWholeBody):
    """ALMI's upper stage: 9 upper actions; a frozen almi-lower policy walks the legs (or they hold q₀)."""

    name = "almi-upper"
    config_class = AlmiUpperConfig
    train_defaults = dict(AlmiWholeBody.train_defaults)

    def __init__(self, config: AlmiConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        self.lower_policy = self.frozen(config.lower_policy, "almi-lower", self.lower_observation_size, len(self.legs))

    @property
    def observation_size(self) -> int:
        return self.upper_observation_size

    @property
    def action_size(self) -> int:
        return len(self.tracked)

    def observe(self, state: RobotState) -> np.ndarray:
        self.state = state
        return self.upper_observe(state)

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        legs = np.zeros((self.n_envs, len(self.legs)))
        if self.lower_policy is not None and self.state is not None:
            legs = self.act_frozen(self.lower_policy, self.lower_observe(self.state))
        return self.whole_body_command(legs, action)
