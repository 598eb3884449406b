"""The native batched environment: a Task over a Simulator, with same-step autoreset.

``step`` returns the observation after reset for envs that finished, and their final
observation in ``info["final_obs"]`` so that PPO can bootstrap truncated episodes.

Staggered resets (``staggered=True``): on the first reset every env starts with a random
step counter in [0, max_episode_steps), so that time-limit truncations, and therefore resets,
are spread over the horizon instead of happening in lockstep. Reported episode lengths count
the steps actually taken, not the staggered counter. Evaluation runs unstaggered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from embody.robots import RobotState, get_robot

from . import SIMULATORS, make_sim
from .base import Simulator, check_capabilities
from .task import Task, TaskConfig
from .tasks import TASKS


@dataclass
class StepInfo:
    """Per-step extras. Arrays over all n envs unless noted.

    privileged_obs:       (n, p) after any reset
    final_obs:            (n, o) observation before reset; valid where terminated | truncated
    final_privileged_obs: (n, p)
    episode_return:       (k,) returns of the k episodes that ended this step
    episode_length:       (k,)
    episode_success:      (k,) bool, or None when the task has no notion of success
    reward_terms:         {term: batch mean of the weighted term}
    diverged:             (n,) bool, envs whose physics went non-finite (terminated and reset)
    metrics:              {name: (n,)} the task's step metrics (``Task.step_metrics``)
    """

    privileged_obs: np.ndarray
    final_obs: np.ndarray
    final_privileged_obs: np.ndarray
    episode_return: np.ndarray
    episode_length: np.ndarray
    episode_success: np.ndarray | None
    reward_terms: dict[str, float]
    diverged: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)


RewardFn = Callable[[RobotState, np.ndarray, np.ndarray], np.ndarray]


class VecEnv:
    """``reward_fn(state, action, task_reward) -> (n,)``, when given, replaces the task's reward
    (a learned reward model, a preference-based reward); the task's terms are still logged."""

    def __init__(
        self, task: Task, sim: Simulator, seed: int = 0, staggered: bool = False, reward_fn: RewardFn | None = None
    ):
        self.task, self.sim, self.n_envs = task, sim, sim.n_envs
        self.staggered, self.reward_fn = staggered, reward_fn
        self.rng = np.random.default_rng(seed)
        self.episode_step = np.zeros(self.n_envs, dtype=np.int64)
        self.episode_length = np.zeros(self.n_envs, dtype=np.int64)  # steps since reset (episode_step may be staggered)
        self.episode_return = np.zeros(self.n_envs)
        self.diverged_total = 0

    observation_size = property(lambda self: self.task.observation_size)
    privileged_size = property(lambda self: self.task.privileged_size)
    action_size = property(lambda self: self.task.action_size)
    max_episode_steps = property(lambda self: self.task.config.max_episode_steps)

    def _reset_envs(self, ids: np.ndarray) -> None:
        if ids.size:
            physics = self.task.sample_physics(ids)
            if physics is not None:
                self.sim.set_physics(ids, physics)
            for body, (pos, quat) in self.task.sample_fixtures(ids).items():
                self.sim.set_fixture_pose(body, ids, pos, quat)
            self.sim.reset(ids, self.task.reset_distribution(ids))
            self.task.on_reset(ids)
            self.episode_step[ids] = 0
            self.episode_length[ids] = 0
            self.episode_return[ids] = 0.0

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        """Reset all envs. Returns (obs (n, o), privileged_obs (n, p))."""
        self._reset_envs(np.arange(self.n_envs))
        if self.staggered:
            self.episode_step[:] = self.rng.integers(0, self.max_episode_steps, self.n_envs)
        state = self.sim.state()
        return self.task.observe(state), self.task.privileged_observe(state)

    def step(self, action: np.ndarray):
        """action (n, a) → obs (n, o), reward (n,), terminated (n,), truncated (n,), StepInfo."""
        action = np.asarray(action, dtype=np.float64)
        pushes = self.task.sample_pushes()
        if pushes is not None and len(pushes[0]):
            self.sim.push(*pushes)
        self.sim.step(self.task.action_to_command(action))
        state = self.sim.state()
        reward, terms = self.task.reward(state, action)
        if self.reward_fn is not None:
            reward = np.asarray(self.reward_fn(state, action, reward), dtype=np.float64)
        metrics = self.task.step_metrics(state)
        self.task.after_step(action)
        diverged = self.sim.diverged
        reward = np.where(diverged, 0.0, reward)
        terminated = self.task.terminated(state) | diverged
        self.episode_step += 1
        self.episode_length += 1
        truncated = (self.episode_step >= self.max_episode_steps) & ~terminated
        self.episode_return += reward
        obs, priv = self.task.observe(state), self.task.privileged_observe(state)
        done = np.flatnonzero(terminated | truncated)
        success = self.task.success(state) if done.size else None
        info = StepInfo(
            priv,
            obs,
            priv,
            self.episode_return[done].copy(),
            self.episode_length[done].copy(),
            None if success is None else success[done] & ~diverged[done],
            {k: float(v.mean()) for k, v in terms.items()},
            diverged.copy(),
            metrics,
        )
        if done.size:
            self.diverged_total += int(diverged.sum())
            self._reset_envs(done)
            state = self.sim.state()
            obs, priv = self.task.observe(state), self.task.privileged_observe(state)
            info.final_obs, info.final_privileged_obs = info.final_obs.copy(), info.final_privileged_obs.copy()
            info.privileged_obs = priv
        return obs, reward.astype(np.float32), terminated, truncated, info

    @property
    def dt(self) -> float:
        """The control period [s] (videos play at 1 / dt)."""
        return self.sim.dt

    def render(self, env_ids=None) -> np.ndarray:
        """RGB frames (k, H, W, 3) uint8 of ``env_ids`` (default all) from the task's camera."""
        return self.sim.render(env_ids, camera=self.task.config.camera)

    def close(self) -> None:
        self.sim.close()


def make_task_config(task_name: str) -> TaskConfig:
    """The registered task's default config."""
    return TASKS.get(task_name).config_class()


def make_env(
    task_name: str,
    sim: str = "mujoco",
    n_envs: int = 1,
    seed: int = 0,
    staggered: bool = False,
    config: TaskConfig | None = None,
    reward_fn: RewardFn | None = None,
) -> VecEnv:
    """Build task ``task_name`` on simulator ``sim`` (unknown names list the valid ones)."""
    task_cls = TASKS.get(task_name)
    config = config or task_cls.config_class()
    config.sim.n_envs = n_envs
    robot = get_robot(task_cls.robot_name, **task_cls.robot_params(config, seed))
    task = task_cls(config, robot, n_envs, seed)
    check_capabilities(sim, SIMULATORS.get(sim).capabilities, task_name, task.requirements())
    return VecEnv(task, make_sim(sim, robot, config.sim), seed=seed, staggered=staggered, reward_fn=reward_fn)
