"""Foresight: purposeful trajectories synthesized before training, for the reward model's query buffer.

PRIMT asks an LLM to write a trajectory generator; 200 jittered trajectories tracked by a P-controller enter the
query buffer (300 segments), not the policy's replay buffer (``embody.policies.preference``: early queries then
compare purposeful behaviour with random). We take the plan as data, never code:

- ``arm-reach``: the judge is asked once for waypoints of the peg tip in a frame spanned by each episode's start
  and target (per axis, 0 = the start's coordinate, 1 = the target's: ``[[0, 0, 1], [1, 1, 1]]`` moves in z
  first). The reply must be exactly ``{"waypoints": [[u, v, w], ...]}`` (1 to ``MAX_WAYPOINTS`` points, each
  coordinate in [-0.5, 1.5]); anything else falls back to the scripted straight line and is counted. Per
  episode the waypoints get Gaussian jitter and the tip a jittered speed; a P-controller moves the tip's setpoint
  towards the current waypoint and the arm's own inverse kinematics turns it into the task's joint targets.
- ``cartpole-swingup``: a scripted strategy (waypoints mean nothing to a pole): energy pumping, then a PD
  balance near upright, each episode's gains jittered, so the trajectories range from clumsy to good.

Every trajectory runs in the task's own env (batched, evaluation resets), so it carries the env's reward for the
scripted teacher and the reports, which the judges never read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embody.chat import ChatClient, ChatError
from embody.config import Span

from .judges import strict_json

MAX_WAYPOINTS = 8
STRAIGHT = [[1.0, 1.0, 1.0]]  # the scripted plan: straight to the target
TIP, TARGET = slice(14, 17), slice(27, 30)  # arm-reach's observation columns (sims/tasks/arm_reach.py)


@dataclass
class PlanStats:
    """Plans asked, parsed, and fallen back to the scripted one (unparseable reply or endpoint error)."""

    asked: int = 0
    parsed: int = 0
    fallback: int = 0


@dataclass
class ForesightConfig:
    """How many trajectories, and how the arm's are jittered; ``stats`` counts the plans asked."""

    trajectories: int = 200  # PRIMT's
    jitter: float = 0.05  # std of each waypoint coordinate in the start–target frame
    speed: Span = (0.01, 0.04)  # m per control step the tip's setpoint moves, drawn per episode
    reach: float = 0.015  # m: a waypoint is passed once the tip is this close
    end_jitter: float = 0.0  # m: std of the last waypoint's offset from the target per axis (0: the target itself)
    tilt: float = 0.0  # rad: std per axis of a rotation of the peg's pointing-down orientation, drawn per episode
    stats: PlanStats = field(default_factory=PlanStats)


def plan_prompt(text: str) -> str:
    return "\n".join(
        [
            f"Task: {text}",
            "Plan the tip's path as waypoints in a frame where, on each axis, 0 is the tip's starting coordinate "
            "and 1 is the target's (so [1, 1, 1] is the target and [0, 0, 1] moves only in z first).",
            f"Plan: at most {MAX_WAYPOINTS} waypoints, the last one the target.",
            'Answer with one JSON object and nothing else: {"waypoints": [[u, v, w], ...]}.',
        ]
    )


def parse_plan(reply: str) -> np.ndarray | None:
    """Waypoints (m, 3), or None unless the reply is exactly the JSON asked for (at most one ``` fence)."""
    points = strict_json(reply, "waypoints")
    if not isinstance(points, list) or not 1 <= len(points) <= MAX_WAYPOINTS:
        return None
    if not all(isinstance(p, list) and len(p) == 3 and all(type(v) in (int, float) for v in p) for p in points):
        return None
    plan = np.asarray(points, float)
    return plan if np.isfinite(plan).all() and (np.abs(plan - 0.5) <= 1.0).all() else None


def ask_plan(client: ChatClient | None, text: str, stats: PlanStats) -> np.ndarray:
    """The judge's waypoints for the task described by ``text``; the straight line without a judge or on a bad
    reply (counted)."""
    if client is None:
        return np.asarray(STRAIGHT)
    stats.asked += 1
    try:
        plan = parse_plan(client.chat([{"role": "user", "content": plan_prompt(text)}]))
    except ChatError:
        plan = None
    if plan is None:
        stats.fallback += 1
        return np.asarray(STRAIGHT)
    stats.parsed += 1
    return plan


def synthesize(cfg, client: ChatClient | None, config: ForesightConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Foresight trajectories for the run ``cfg`` (a TrainConfig): the plan asked of ``client`` (the text judge's
    endpoint; None: the scripted plan) where the task's controller follows one, tracked in a fresh env."""
    from embody.runs import build_env

    from .briefs import brief_for

    controller = _controller(cfg.task)
    plan = ask_plan(client, brief_for(cfg.task).text, config.stats) if controller.planned else None
    env = build_env(cfg, n_envs=config.trajectories, seed=seed, evaluation=True)
    try:
        return foresight_trajectories(env, plan, config, seed)
    finally:
        env.close()


def _controller(task: str):
    controllers = {"arm-reach": _ArmTracker, "cartpole-swingup": _SwingUp}
    if task not in controllers:
        raise ValueError(f"primt: no foresight controller for task {task!r}; valid: {', '.join(sorted(controllers))}")
    return controllers[task]


def foresight_trajectories(env, plan: np.ndarray | None, config: ForesightConfig, seed: int = 0) -> dict:
    """One episode per env of ``env`` (a VecEnv built for evaluation), driven by the task's controller: obs
    (N, T, o), actions (N, T, a), rewards (N, T)."""
    obs = env.reset()[0]
    control = _controller(env.task.name)(env.task, obs, plan, config, np.random.default_rng(seed))
    rows = {"obs": [], "actions": [], "rewards": []}
    for _ in range(env.task.config.max_episode_steps):
        action = control(obs)
        rows["obs"].append(obs)
        rows["actions"].append(action)
        obs, reward, *_ = env.step(action)
        rows["rewards"].append(reward)
    return {k: np.stack(v, axis=1).astype(np.float32) for k, v in rows.items()}


class _ArmTracker:
    """arm-reach: the tip's setpoint moves at a jittered speed along jittered waypoints (module docstring)."""

    planned = True

    def __init__(self, task, obs: np.ndarray, plan: np.ndarray, config: ForesightConfig, rng: np.random.Generator):
        from embody.robots.peg_arm.kinematics import DOWN

        # drawn only when asked: the untilted trajectories of a seed stay the ones they were
        tilt = config.tilt * rng.standard_normal((len(obs), 3)) if config.tilt else None
        self.task, self.rot, self.config = task, DOWN[None] if tilt is None else _tilted_down(tilt), config
        start, target = obs[:, TIP], obs[:, TARGET]
        frame = plan[None] + config.jitter * rng.standard_normal((len(obs), *plan.shape))
        frame[:, -1] = 1.0  # the last waypoint is the target itself
        self.waypoints = start[:, None] + frame * (target - start)[:, None]  # (n, m, 3)
        self.waypoints[:, -1] += config.end_jitter * rng.standard_normal((len(obs), 3))
        self.speed = rng.uniform(*config.speed, (len(obs), 1))
        self.next = np.zeros(len(obs), int)
        self.setpoint = start.astype(float)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        n, last = len(obs), self.waypoints.shape[1] - 1
        tip = obs[:, TIP]
        goal = self.waypoints[np.arange(n), self.next]
        passed = (np.linalg.norm(goal - tip, axis=1) < self.config.reach) & (self.next < last)
        self.next += passed
        goal = self.waypoints[np.arange(n), self.next]
        step = goal - self.setpoint
        dist = np.linalg.norm(step, axis=1, keepdims=True)
        self.setpoint = self.setpoint + step * np.minimum(1.0, self.speed / np.maximum(dist, 1e-9))
        home, scale = self.task.home, self.task.config.action_scale
        q = self.task.io.model.ik(self.setpoint, self.rot, home + obs[:, :7], iters=20)
        return np.clip((q - home) / scale, -1.0, 1.0).astype(np.float32)


def _tilted_down(rotvec: np.ndarray) -> np.ndarray:
    """(n, 3, 3): the peg pointing down (``DOWN``) turned by the rotation vectors (n, 3) in the base frame."""
    from embody.hardware.arms.poses import axis_angle_to_quat
    from embody.robots.peg_arm.kinematics import DOWN
    from embody.rotations import quat_rotate

    q = axis_angle_to_quat(rotvec)
    turn = np.stack([quat_rotate(q, np.broadcast_to(e, rotvec.shape)) for e in np.eye(3)], axis=2)
    return turn @ DOWN


class _SwingUp:
    """cartpole-swingup: pump energy towards the upright pole's, balance by PD once near it, gains jittered around
    ones found by a small grid search (return 175 of 250 with them, random actions 12)."""

    planned = False

    def __init__(self, task, obs: np.ndarray, plan, config: ForesightConfig, rng: np.random.Generator):
        n = len(obs)
        self.pump = rng.uniform(0.5, 1.5, n)
        self.kp, self.kd = rng.uniform(3.0, 10.0, n), rng.uniform(1.0, 3.0, n)
        self.kx, self.kv = rng.uniform(0.0, 0.4, n), rng.uniform(0.0, 1.0, n)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x, cos, sin, xdot, w = obs.T
        energy = 0.5 * w**2 / 15.0 + cos  # 1 for the pole still upright (15 ≈ 3 g / l, fitted)
        pump = -self.pump * (1.0 - energy) * np.sign(w * cos + 1e-6)
        balance = self.kp * np.arctan2(sin, cos) + self.kd * w + self.kx * x + self.kv * xdot
        return np.clip(np.where(cos > 0.8, balance, pump), -1.0, 1.0)[:, None].astype(np.float32)
