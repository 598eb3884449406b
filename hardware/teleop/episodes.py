"""Teleoperated episodes of a task on a live robot, in one ``SupervisedSession``.

The robot is driven only through its RobotInterface and the safety supervisor, as ``embody deploy``
drives it: the session ramps it to its default pose and holds; then, per episode, a homing move
takes it to the task's start pose (the task's own ``reset_distribution``) and the human moves it.
Each tick is the VecEnv's task sequence on the live state, exactly as ``PolicyRunner`` does it:
``observe`` → the human's move as the action → ``action_to_command`` → ``after_step``, so what a
caller records is what a cloned policy sees and emits.

An episode ends on the task's success test, when the human presses "done", or at ``max_steps``;
"abort" ends the session (a normal end). A supervisor fault ends the session in damping, the
episode in progress unfinished: ``on_episode`` is called for finished episodes only, so a caller
that keeps frames in memory until then never half-writes one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from embody.robots import RobotSpec, RobotState

from ..interface import JointCommand, RobotInterface
from ..session import SessionConfig, SessionSummary, SupervisedSession, step_of
from .devices import InputDevice
from .homing import Homing, home

OUTCOMES = ("success", "done", "timeout")


class Teleoperable(Protocol):
    """What a task exposes to be teleoperated (n_envs = 1; sims/tasks/peg_insert.py's PegInsert does).

    Shapes: o observation size, a = 3 action (the device's move), q (7,) arm joints.
    """

    def reset_distribution(self, env_ids: np.ndarray): ...  # → InitState; joint_pos (1, q) is the start
    def on_reset(self, env_ids: np.ndarray) -> None: ...
    def observe(self, state: RobotState) -> np.ndarray: ...  # (1, o)
    def action_to_command(self, action: np.ndarray) -> np.ndarray: ...  # (1, a) → (1, actuated)
    def after_step(self, action: np.ndarray) -> None: ...
    def success(self, state: RobotState) -> np.ndarray: ...  # (1,) bool

    @property
    def arm_model(self): ...  # ee_pose, ik, gravity_torque: for homing

    def hold_targets(self, q: np.ndarray) -> np.ndarray: ...  # (q,) → (q,) PD targets that hold q


class TeleopRunner:
    """A task with one env on a live robot: ``PolicyRunner`` with a human instead of a policy."""

    def __init__(self, task: Teleoperable, robot: RobotSpec):
        self.task, self.robot = task, robot
        self.last: tuple[np.ndarray, np.ndarray] | None = None  # (observation (1, o), action (1, 3))

    def start(self) -> np.ndarray:
        """A new episode (the task's reset draw and on_reset); returns the joint pose (q,) to home to."""
        ids = np.array([0])
        q = self.task.reset_distribution(ids).joint_pos[0].copy()
        self.task.on_reset(ids)
        return q

    def command(self, state: RobotState, move: np.ndarray) -> JointCommand:
        """The joint command for ``state`` and the device's ``move`` (3,), clipped to [-1, 1] as the recorded action;
        the observation and action stay in ``last``."""
        # float32 in [-1, 1], as a policy emits it (and is recorded); NaN stays NaN, for the supervisor to refuse
        action = np.clip(np.asarray(move, dtype=np.float64).reshape(1, 3), -1.0, 1.0).astype(np.float32)
        obs = self.task.observe(state)
        self.last = (obs, action)
        targets = self.task.action_to_command(action.astype(np.float64))
        self.task.after_step(action)
        return JointCommand.pd_actuated(self.robot, targets[0])

    def success(self, state: RobotState) -> bool:
        """Whether the task counts ``state`` as a success."""
        return bool(self.task.success(state)[0])

    def home_command(self, q: np.ndarray) -> JointCommand:
        """Hold joint pose ``q`` (q,) with gravity compensation (as the task's PD commands are made)."""
        return JointCommand.pd(self.robot, self.task.hold_targets(q))


@dataclass
class Episode:
    """One teleoperated episode: its ``outcome`` (OUTCOMES; None while running or when aborted)."""

    index: int
    outcome: str | None = None
    aborted: bool = False
    steps: int = 0


# (state the observation was built from, command the supervisor sent) after each recorded tick
OnStep = Callable[[RobotState, JointCommand], None]


@dataclass
class TeleopPlan:
    """What a teleoperation session does: ``episodes`` at ``rate_hz``, each at most ``max_steps`` ticks.

    start:      episode index → the joint pose to home to (default: ``runner.start()``)
    floor_z:    episode index → height [m] below which the tool is drawn straight out first
    on_step:    episode → OnStep (record a frame, update the display)
    on_episode: called with each finished episode
    """

    episodes: int
    max_steps: int
    rate_hz: float = 25.0
    homing: Homing = Homing()
    start: Callable[[int], np.ndarray] | None = None
    floor_z: Callable[[int], float] = lambda i: -np.inf  # noqa: E731
    on_step: Callable[[Episode], OnStep] = lambda ep: lambda state, sent: None  # noqa: E731
    on_episode: Callable[[Episode], None] = lambda ep: None  # noqa: E731
    finished: list[Episode] = field(default_factory=list)
    aborted: bool = False


def teleoperate(
    driver: RobotInterface, runner: TeleopRunner, device: InputDevice, plan: TeleopPlan, hold_s: float = 0.2
) -> SessionSummary:
    """Run ``plan`` on ``driver`` in a SupervisedSession (connect → ramp → hold → episodes → damping)."""
    session = SupervisedSession(driver, SessionConfig(rate_hz=plan.rate_hz, hold_s=hold_s))
    return session.run(step_of(_ticks(driver, runner, device, plan)))


def _ticks(driver: RobotInterface, runner: TeleopRunner, device: InputDevice, plan: TeleopPlan) -> Iterator[None]:
    period = 1.0 / plan.rate_hz
    for i in range(plan.episodes):
        q_start = plan.start(i) if plan.start is not None else runner.start()
        yield from home(
            driver, runner.task.arm_model, runner.home_command, q_start, period, plan.floor_z(i), plan.homing
        )
        device.read()  # drop what was pressed while homing
        ep = Episode(i)
        yield from episode(driver, runner, device, plan.max_steps, plan.on_step(ep), ep)
        if ep.aborted:
            plan.aborted = True
            return
        plan.finished.append(ep)
        plan.on_episode(ep)


def episode(
    driver: RobotInterface, runner: TeleopRunner, device: InputDevice, max_steps: int, on_step: OnStep, ep: Episode
) -> Iterator[None]:
    """One episode's ticks from the start pose; sets ``ep.outcome`` (or ``ep.aborted``) when it ends.
    ``on_step`` runs once the session has seen the tick's command pass without a fault."""
    t0 = time.monotonic()
    while True:
        state = driver.read_state()
        state.time = np.array([time.monotonic() - t0])  # the task's clock: time since the episode began
        if runner.success(state):
            ep.outcome = "success"
            return
        move, buttons = device.read()
        if "abort" in buttons:
            ep.aborted = True
            return
        if "done" in buttons or ep.steps >= max_steps:
            ep.outcome = "done" if "done" in buttons else "timeout"
            return
        sent = driver.send_command(runner.command(state, move))
        yield  # the session checks the supervisor; after a fault this generator is not resumed
        ep.steps += 1
        on_step(state, sent)


__all__ = ["OUTCOMES", "Episode", "OnStep", "Teleoperable", "TeleopPlan", "TeleopRunner", "episode", "teleoperate"]
