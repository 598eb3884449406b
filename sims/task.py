"""Tasks: written once against the Simulator protocol and RobotState.

A task turns RobotState into observations, rewards and terminations, turns policy actions
into simulator commands, and samples resets and commands. It never touches simulator
internals, so the observation code that trains a policy is the code that deploys it.

Shapes: ``n`` envs, ``o`` observation size, ``p`` privileged observation size,
``a`` action size (the robot's actuated joints).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from embody.robots import RobotSpec, RobotState

from .base import InitState, PhysicsParams, SimConfig


@dataclass(frozen=True)
class SignedPermutation:
    """A map x → y with ``y[..., i] = sign[i] · x[..., index[i]]`` (a mirror of observations or actions)."""

    index: np.ndarray  # (d,) int
    sign: np.ndarray  # (d,) ±1

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x[..., self.index] * self.sign

    def then(self, other: SignedPermutation) -> SignedPermutation:
        """The concatenation [self, other] of two maps over concatenated inputs."""
        return SignedPermutation(
            np.concatenate([self.index, other.index + len(self.index)]), np.concatenate([self.sign, other.sign])
        )


@dataclass(frozen=True)
class Mirror:
    """A task's left-right mirror symmetry: mirrored observations call for mirrored actions and get the same rewards.
    ``obs`` (o,), ``privileged`` (p,) and ``action`` (a,) maps; used by PPO's symmetry augmentation."""

    obs: SignedPermutation
    privileged: SignedPermutation
    action: SignedPermutation


@dataclass
class TaskConfig:
    """Settings every task has; a task's own config subclasses this once (no deeper chains)."""

    sim: SimConfig = field(default_factory=SimConfig)
    max_episode_steps: int = 1000
    reward_weights: dict[str, float] = field(default_factory=dict)  # term name -> weight
    camera: str | None = None  # model camera for videos; None: track the robot's base


class Task(ABC):
    """A batched task over ``n_envs`` envs.

    Rewards are a weighted sum of named terms: for each ``name: weight`` in
    ``config.reward_weights`` with a non-zero weight, ``reward_<name>(state, action)``
    returns (n,) and contributes ``weight * term``. Terms are reported separately for logging.
    """

    name: ClassVar[str]
    robot_name: ClassVar[str]
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    requires: ClassVar[frozenset[str]] = frozenset()  # simulator capabilities beyond the control mode
    train_defaults: ClassVar[dict] = {}  # TrainConfig overrides that suit this task ("ppo.lr": 3e-4, ...)
    terminations_are_falls: ClassVar[bool] = False  # evaluation reports survival (episodes that did not terminate)
    # what `embody bench learning` holds a trained policy to: ("return", frac of max), ("length", × random),
    # ("success", rate) or ("tracking", (lin err, yaw err, survival)); None: the task is not benchmarked
    learning_bar: ClassVar[tuple | None] = None
    # True: observe, the reward terms and action_to_command also take torch tensors (a RobotState of tensors) and
    # keep their gradients, so that sims/diff_env.py can differentiate the task through a differentiable simulator
    differentiable: ClassVar[bool] = False
    # step metrics that are events (0/1): evaluation reports the share of episodes in which each happened at least
    # once (a step the deploy supervisor would fault on), not its mean over steps
    episode_events: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, config: TaskConfig, robot: RobotSpec, n_envs: int, seed: int = 0):
        self.config, self.robot, self.n_envs = config, robot, n_envs
        self.rng = np.random.default_rng(seed)
        self.last_action = np.zeros((n_envs, robot.n_actions))
        for term in config.reward_weights:
            if not callable(getattr(self, f"reward_{term}", None)):
                raise ValueError(f"task {self.name!r} has no reward term {term!r}; terms: {self.reward_term_names()}")

    @classmethod
    def robot_params(cls, config: TaskConfig, seed: int = 0) -> dict:
        """Keyword arguments for the robot's ``make_spec`` that this configured task needs (a peg
        size, a board), drawn with ``seed`` where the task randomizes them per VecEnv; make_env
        builds the robot with them. None by default."""
        return {}

    @classmethod
    def rollout_variants(cls, tmp: Path) -> dict[str, list[str]]:
        """Config overrides of variants whose rollout speed ``embody bench learning`` compares (for example with
        and without a frozen policy driving part of the robot), by label; files they need go under ``tmp``."""
        return {}

    @classmethod
    def reward_term_names(cls) -> list[str]:
        """Names of every ``reward_<name>`` term this task defines, sorted."""
        return sorted(n[len("reward_") :] for n in dir(cls) if n.startswith("reward_") and n != "reward_term_names")

    # -- sizes ---------------------------------------------------------------------------
    @property
    @abstractmethod
    def observation_size(self) -> int:
        """o: the width of ``observe``'s output."""
        ...

    @property
    def privileged_size(self) -> int:
        """p: the width of ``privileged_observe``'s output; 0 by default."""
        return 0

    @property
    def action_size(self) -> int:
        """a: the width of an action; the robot's actuated joints by default."""
        return self.robot.n_actions

    def action_names(self) -> list[str] | None:
        """The joint each action component drives (datasets and plots name them), None where actions are not
        per-joint: the actuated joints by default, when ``action_size`` matches them."""
        names = [self.robot.joint_names[j] for j in self.robot.actuated]
        return names if len(names) == self.action_size else None

    @property
    def max_episode_return(self) -> float | None:
        """The largest return an episode can reach, when the task defines one."""
        return None

    # -- episode -------------------------------------------------------------------------
    @abstractmethod
    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        """Initial states for the envs ``env_ids`` (k,)."""

    def reseed(self, seed: int) -> None:
        """Start the task's sampling afresh from ``seed``: its RNG and whatever it carries from episode to episode
        (curricula), so that Gymnasium's ``reset(seed=...)`` replays the same episode. Override to restart such
        state too."""
        self.rng = np.random.default_rng(seed)

    def on_reset(self, env_ids: np.ndarray) -> None:
        """Clear per-env buffers and sample new commands for ``env_ids``."""
        self.last_action[env_ids] = 0.0
        self.sample_commands(env_ids)

    def sample_commands(self, env_ids: np.ndarray) -> None:
        """Draw new commands (velocity targets, motion clips, goals) for ``env_ids``; none by default."""

    training: bool = True  # False in evaluation envs: curricula hold their final level

    def curriculum_levels(self) -> dict[str, float]:
        """Current levels of the task's training curricula, by name (logged with the training metrics); none by
        default."""
        return {}

    def curriculum_state(self) -> dict:
        """The training curricula's state as JSON values, saved with each checkpoint so that a resumed run continues
        them where they were (a fine-tuning, ``init_from``, starts its own); none by default."""
        return {}

    def restore_curriculum(self, state: dict) -> None:
        """Continue the training curricula from the ``curriculum_state()`` a resumed run saved."""

    def mirror(self) -> Mirror | None:
        """The task's left-right symmetry, or None when it has none (the default)."""
        return None

    def requirements(self) -> frozenset[str]:
        """Simulator capabilities this configured task needs (``requires`` plus what its
        randomization uses, so that a task with randomization off runs on more simulators)."""
        return self.requires | {self.config.sim.control}

    # -- domain randomization (the VecEnv applies these to the simulator) ----------------
    def sample_physics(self, env_ids: np.ndarray) -> PhysicsParams | None:
        """Physical parameters for the envs being reset (needs ``physics_params``); None: nominal."""
        return None

    def sample_fixtures(self, env_ids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """{fixed scene body: (pos (k, 3), quat (k, 4))} for the envs being reset (needs ``fixture_pose``)."""
        return {}

    def sample_pushes(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Before each step: (env ids (k,), base velocity kicks (k, 3) world frame) or None (needs ``push``)."""
        return None

    def success(self, state: RobotState) -> np.ndarray | None:
        """(n,) bool: the episode counts as a success if it ends in this state; None: no notion of success."""
        return None

    @abstractmethod
    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        """Policy actions (n, a), nominally in [-1, 1], to PD targets or torques (n, a)."""

    @abstractmethod
    def observe(self, state: RobotState) -> np.ndarray:
        """Policy observation (n, o) float32, from the observed part of RobotState only."""

    def privileged_observe(self, state: RobotState) -> np.ndarray:
        """Critic/teacher observation (n, p) float32; may use ``state.privileged``."""
        return np.zeros((state.n_envs, 0), dtype=np.float32)

    def step_metrics(self, state: RobotState) -> dict[str, np.ndarray]:
        """Named per-step measurements (n,) that evaluation averages over each episode (a tracking error), or
        takes the maximum of for those in ``episode_events``; taken after the step, before commands are redrawn.
        None by default."""
        return {}

    def terminated(self, state: RobotState) -> np.ndarray:
        """(n,) bool: the episode ended in a terminal state (a fall, a success)."""
        return np.zeros(state.n_envs, dtype=bool)

    def reward(self, state: RobotState, action: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Total reward (n,) and each weighted term (n,)."""
        terms = {
            name: w * getattr(self, f"reward_{name}")(state, action)
            for name, w in self.config.reward_weights.items()
            if w != 0.0
        }
        total = sum(terms.values()) if terms else np.zeros(state.n_envs)  # sum: numpy or torch terms alike
        return total, terms

    def after_step(self, action: np.ndarray) -> None:
        """Called after each control step with the applied actions (n, a); remembers them as ``last_action``."""
        self.last_action[:] = action
