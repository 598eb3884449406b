"""Arm motion for the skills: Cartesian paths of the grip point, solved to joint targets by the
peg_arm damped-least-squares IK and tracked by the joint position actuators (PD, Franka gains,
gravity compensated by the model).

The grip point is the ``grip`` site between the fingertips; the hand always points straight
down and turns only about z (``yaw``; 0 = fingers closing along world y). A path is solved
completely before the arm moves, so an unreachable target fails without moving. While moving,
the grip point lagging far behind its path, or not settling at its end, means the arm is stuck
against something: the motion stops there and reports it.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from embody.cache import cache_dir, write_cached
from embody.robots.peg_arm import constants as C
from embody.robots.peg_arm.kinematics import DOWN, ArmModel, rot_z
from embody.robots.spec import Joint, RobotSpec, Sensors

from . import layout as L
from .world import World

Z_SAFE = 0.25  # transit height of the grip point: clears a 4-block tower with a block in hand
IK_DT = 0.04  # s between IK points along a path; joint targets are interpolated in between
IK_TOL, IK_FAIL = 5e-4, 3e-3  # pose error (m, rad) to stop iterating / to call a target unreachable
# Stuck: the grip point lags its path by BLOCKED_MOVING m while moving (normal: up to ~2.5 cm,
# transits with the arm stretched out), or is still BLOCKED_M off the path's end after
# settling for up to SETTLE_S (normal: under SETTLED_M within ~0.1 s).
BLOCKED_MOVING, BLOCKED_M, SETTLED_M, SETTLE_S = 0.06, 0.01, 0.004, 0.3
KV_KP = np.array(C.KD) / np.array(C.KP)  # velocity feed-forward for the position actuators' damping


@functools.lru_cache(maxsize=1)
def arm_model() -> ArmModel:
    """Kinematics of the arm with the gripper (the scene without objects), grip site as end effector."""
    path = write_cached(cache_dir("tabletop"), L.scene_xml([], [], False, 0), stem="arm")
    joints = tuple(
        Joint(*row)
        for row in zip(
            C.JOINT_NAMES, C.Q_LOWER, C.Q_UPPER, C.VELOCITY_LIMIT, C.TORQUE_LIMIT, C.KP, C.KD, C.DEFAULT_POSE
        )
    )
    spec = RobotSpec(
        "tabletop_arm",
        joints,
        path,
        floating_base=False,
        sensors=Sensors(ee_site="grip", ft_site=C.FT_SITE),
        base_body=C.BASE_BODY,
    )
    return ArmModel(spec)


def _min_jerk(s: np.ndarray) -> np.ndarray:
    return s**3 * (10 - 15 * s + 6 * s**2)


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def solve_ik(pos: np.ndarray, yaw: float, q0: np.ndarray) -> tuple[np.ndarray, float]:
    """Joint targets (7,) for the grip at ``pos`` with heading ``yaw``, from ``q0``; and the pose error."""
    kin = arm_model()
    rest = np.array(C.DEFAULT_POSE)
    rest[0] = math.atan2(pos[1], pos[0])  # keep the elbow up, the shoulder turned to the target
    rest[6] += _wrap(yaw - rest[0])
    target = (rot_z(np.array(yaw)) @ DOWN)[None]
    q = np.asarray(q0, float)[None]
    for _ in range(60):
        dq, err = kin.ik_step(q, np.asarray(pos, float)[None], target, damping=1e-2, q_rest=rest, rest_gain=0.05)
        if np.linalg.norm(err) < IK_TOL:
            break
        q = np.clip(q + dq, kin.lower, kin.upper)
    return q[0], float(np.linalg.norm(err))


class Arm:
    """Commands the arm of a World; remembers the commanded grip pose between motions."""

    def __init__(self, world: World):
        self.world, self.kin = world, arm_model()
        self.q = world.data.qpos[world.arm_adr].copy()  # commanded joint targets
        pos, rot = self.kin.ee_pose(self.q[None])
        self.pos, self.yaw = pos[0], math.atan2(rot[0, 1, 0], rot[0, 0, 0])

    def plan(self, pos, yaw: float, duration: float, polar: bool) -> tuple[np.ndarray, np.ndarray] | str:
        """Joint targets (K, 7) and grip points (K, 3) every IK_DT along a min-jerk path to
        (pos, yaw); a message if unreachable.
        ``polar``: interpolate radius, bearing and height (arcs around the base) instead of a line.
        The heading is interpolated relative to the bearing from the base, which is what keeps
        the wrist (joint 7) inside its range."""
        p0, p1 = self.pos, np.asarray(pos, float)
        a0, a1 = math.atan2(p0[1], p0[0]), math.atan2(p1[1], p1[0])
        rel0, rel1 = _wrap(self.yaw - a0), _wrap(yaw - a1)
        k = max(2, math.ceil(duration / IK_DT))
        s = _min_jerk(np.linspace(0, 1, k + 1)[1:])
        if polar:
            r0, r1 = np.hypot(*p0[:2]), np.hypot(*p1[:2])
            a = a0 + s * _wrap(a1 - a0)
            r, z = r0 + s * (r1 - r0), p0[2] + s * (p1[2] - p0[2])
            points = np.stack([r * np.cos(a), r * np.sin(a), z], 1)
        else:
            points = p0 + s[:, None] * (p1 - p0)
        yaws = np.arctan2(points[:, 1], points[:, 0]) + rel0 + s * (rel1 - rel0)
        qs, q = [], self.q
        for p, y in zip(points, yaws):
            q, err = solve_ik(p, y, q)
            if err > IK_FAIL:
                return f"target ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m is out of the arm's reach (pose error {err:.3f})"
            qs.append(q)
        return np.stack(qs), points

    # -- motion --------------------------------------------------------------------------
    def move(self, pos, yaw: float | None = None, speed: float = 0.3, polar: bool = False) -> str | None:
        """Move the grip point to ``pos`` (m) at about ``speed`` (m/s); None on success, else why not."""
        yaw = self.yaw if yaw is None else yaw
        p0, p1 = self.pos, np.asarray(pos, float)
        a0, a1 = math.atan2(p0[1], p0[0]), math.atan2(p1[1], p1[0])
        turn = abs(_wrap(a1 - a0) + _wrap(yaw - a1) - _wrap(self.yaw - a0))  # the hand's turn, as plan() makes it
        duration = max(0.3, float(np.linalg.norm(p1 - p0)) / speed, turn / 1.5)
        path = self.plan(pos, yaw, duration, polar)
        if isinstance(path, str):
            return path
        error = self._track(*path)
        if error:
            return error
        self.pos, self.yaw = np.asarray(pos, float), yaw
        return None

    def goto(self, pos, yaw: float | None = None, speed: float = 0.4, z_safe: float = Z_SAFE) -> str | None:
        """Up to the transit height, across (arcing around the base), then down to ``pos``."""
        pos = np.asarray(pos, float)
        if np.linalg.norm(self.pos[:2] - pos[:2]) > 0.005:
            for error in (
                self.move((*self.pos[:2], z_safe), speed=speed),
                self.move((*pos[:2], z_safe), yaw, speed=speed, polar=True),
            ):
                if error:
                    return error
        return self.move(pos, yaw, speed=speed * 0.6)

    def _track(self, qs: np.ndarray, points: np.ndarray) -> str | None:
        w, d = self.world, self.world.data
        grip = w.model.site("grip").id
        n = max(1, round(IK_DT / w.model.opt.timestep))
        knots = np.vstack([self.q, qs])
        for i in range(len(qs)):
            qd = (knots[i + 1] - knots[i]) / IK_DT
            for j in range(1, n + 1):
                ref = knots[i] + (j / n) * (knots[i + 1] - knots[i])
                d.ctrl[:7] = ref + KV_KP * qd
                w.step()
            self.q = knots[i + 1]
            if np.linalg.norm(d.site_xpos[grip] - points[i]) > BLOCKED_MOVING:
                return self._blocked()
        d.ctrl[:7] = self.q
        for _ in range(round(SETTLE_S / w.model.opt.timestep)):  # the deceleration overshoots a few mm
            if np.linalg.norm(d.site_xpos[grip] - points[-1]) < SETTLED_M:
                break
            w.step()
        return self._blocked() if np.linalg.norm(d.site_xpos[grip] - points[-1]) > BLOCKED_M else None

    def _blocked(self) -> str:
        self.stop()
        p = self.pos
        return f"the arm is blocked (collision) near ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m"

    def stop(self) -> None:
        """Hold still where the arm is now."""
        d = self.world.data
        self.q = d.qpos[self.world.arm_adr].copy()
        d.ctrl[:7] = self.q
        pos, rot = self.kin.ee_pose(self.q[None])
        self.pos, self.yaw = pos[0], math.atan2(rot[0, 1, 0], rot[0, 0, 0])

    def fingers(self, opening: float, seconds: float = 0.35) -> None:
        """Drive both fingers to ``opening`` (m from the midplane, 0 = closed) and wait."""
        self.world.data.ctrl[7:9] = opening
        self.wait(seconds)

    def wait(self, seconds: float) -> None:
        """Step the physics for ``seconds`` of sim time (at least one step), holding the current command."""
        self.world.step(max(1, round(seconds / self.world.model.opt.timestep)))
