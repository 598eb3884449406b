"""Homing an arm between teleoperated episodes: supervised PD targets along Cartesian straight lines.

``home`` is a generator that sends one command per ``yield`` (a ``SupervisedSession`` paces it and
stops it on a fault): out of a fixture first (drawn straight up along the tool's axis while below
``floor_z``), then straight up to ``lift`` above the start height, across, then down, with the tool
pointing down (IK), then until the tip is within ``tolerance`` of the goal. A move that does not
arrive raises ``StepFailed`` (the session ends in damping with its reason).

Why draw out slowly: after a successful peg insertion the peg sits 2 cm deep in a hole with 1 mm of
clearance. Lifted at the homing speed, the big joint-target steps (4 mm per tick at 0.1 m/s, 10 mm
at 0.25 m/s) wedged it against the hole's wall (wrist force up to 28 N over ‖f₀‖ at 0.1 m/s; 63–71 N
at 0.25 m/s: over the supervisor's 60 N within 3 ticks); drawn out at ``extract_speed`` with the
target at most ``leash`` above the measured tip, under 6 N.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..interface import JointCommand, RobotInterface
from ..session import StepFailed


@dataclass(frozen=True)
class Homing:
    """Speeds [m/s], distances [m], times [s] of a homing move."""

    speed: float = 0.1
    lift: float = 0.02  # above the higher of the tip and the goal
    tolerance: float = 0.002  # of the tip at the goal
    settle_s: float = 3.0
    extract_speed: float = 0.02  # out of a fixture (below floor_z)
    leash: float = 0.003  # the target at most this far above the measured tip while drawn out


def home(
    driver: RobotInterface,
    model,
    hold: Callable[[np.ndarray], JointCommand],
    q_goal: np.ndarray,
    period: float,
    floor_z: float = -math.inf,
    cfg: Homing = Homing(),
) -> Iterator[None]:
    """Take the tip to joint pose ``q_goal`` (7,); one command per yield, every ``period`` s.

    model: the arm's kinematics (``ee_pose``, ``ik``; a task's ``arm_model``)
    hold:  joint pose (7,) → the JointCommand that holds it (gravity compensated)
    """
    from embody.robots.peg_arm.kinematics import DOWN

    goal = model.ee_pose(q_goal[None])[0][0]
    state = driver.read_state()
    tip, q = state.ee_pos[0].copy(), state.joint_pos.copy()
    if tip[2] < floor_z:  # in the fixture (or near it)
        tip, q = yield from _draw_out(driver, model, hold, tip, q, floor_z, period, cfg)
    z_safe = max(tip[2], goal[2] + cfg.lift)
    waypoints = [np.array([tip[0], tip[1], z_safe]), np.array([goal[0], goal[1], z_safe]), goal]
    for a, b in zip([tip] + waypoints[:-1], waypoints):
        n = max(1, int(math.ceil(np.linalg.norm(b - a) / (cfg.speed * period))))
        for k in range(1, n + 1):
            q = model.ik((a + (b - a) * k / n)[None], DOWN[None], q, iters=20)
            driver.send_command(hold(q[0] if k < n or b is not goal else q_goal))
            yield
    deadline = time.monotonic() + cfg.settle_s
    while np.linalg.norm(driver.read_state().ee_pos[0] - goal) > cfg.tolerance:
        driver.send_command(hold(q_goal))
        if time.monotonic() > deadline:
            raise StepFailed(
                f"homing: the tip did not reach the start within {cfg.tolerance * 1000:g} mm in "
                f"{cfg.settle_s:g} s (at {driver.read_state().ee_pos[0]}, goal {goal})"
            )
        yield


def _draw_out(driver, model, hold, tip: np.ndarray, q: np.ndarray, top: float, period: float, cfg: Homing):
    """Draw the tool straight up along its axis to height ``top`` (the hand's measured orientation) → (tip, q)."""
    rot, p = model.ee_pose(q)[1], tip.copy()
    deadline = time.monotonic() + (top - tip[2]) / cfg.extract_speed + cfg.settle_s
    while p[2] < top:
        p[2] = min(top, p[2] + cfg.extract_speed * period, driver.read_state().ee_pos[0, 2] + cfg.leash)
        q = model.ik(p[None], rot, q, iters=20)
        driver.send_command(hold(q[0]))
        if time.monotonic() > deadline:
            raise StepFailed(
                f"homing: the tool did not come out of the fixture (tip at "
                f"{driver.read_state().ee_pos[0]}, pulled to {p})"
            )
        yield
    return p, q


__all__ = ["Homing", "home"]
