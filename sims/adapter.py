"""Checks and bookkeeping shared by the batched adapters (MuJoCo, PyBullet, Genesis).

Plain functions and one small table, no base class: an adapter calls what it needs and keeps its
own attributes, so reading it top to bottom still shows every mechanism it uses (sims/base.py
names the protocol these serve).

Shapes as in sims/base.py: ``n`` envs, ``j`` spec joints, ``a`` actuated joints, ``k`` envs
addressed by a call.
"""

from __future__ import annotations

import numpy as np

from embody.robots import PrivilegedState, RobotSpec
from embody.rotations import quat_rotate_inverse

from .base import InitState, PhysicsParams

# The default camera of every adapter tracks the base from here (MuJoCo's tracking camera).
TRACK_AZIMUTH, TRACK_ELEVATION = np.radians(135.0), np.radians(-20.0)
TRACK_DISTANCE = 2.5  # × the model's extent


def select_envs(n_envs: int, ids: np.ndarray | None) -> np.ndarray:
    """The envs a call addresses, (k,) int64: ``ids``, or every env when None."""
    return np.arange(n_envs) if ids is None else np.asarray(ids, dtype=np.int64)


def checked_command(command: np.ndarray, n_envs: int, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """A step's command (n, a) as float64 with its non-finite rows zeroed, and those rows (n,) bool.

    A wrong shape raises ValueError. NaN never reaches an engine; the caller flags the rows as
    diverged (``record_divergence``), which resets them.
    """
    command = np.asarray(command, dtype=np.float64)
    if command.shape != (n_envs, n_actions):
        raise ValueError(f"command shape {command.shape} != (n_envs, n_actions) = {(n_envs, n_actions)}")
    bad = ~np.isfinite(command).all(axis=1)
    return (np.where(bad[:, None], 0.0, command) if bad.any() else command), bad


def record_divergence(sim, bad: np.ndarray) -> np.ndarray:
    """Flag the envs ``bad`` (n,) bool in ``sim.diverged`` (until the next step) and count them in
    ``sim.divergence_count``; returns their ids (k,), which the adapter then resets."""
    sim.diverged = bad
    ids = np.flatnonzero(bad)
    sim.divergence_count += len(ids)
    return ids


def full_torque(robot: RobotSpec, actuated: np.ndarray) -> np.ndarray:
    """Joint torques (n, j) in motor order from the actuated joints' (n, a); others read zero."""
    torque = np.zeros((len(actuated), robot.n_joints))
    torque[:, robot.actuated] = actuated
    return torque


def fixed_base_privileged(n_envs: int, contact: np.ndarray) -> PrivilegedState:
    """Ground truth of a base welded to the world: at the origin, unrotated, at rest.
    contact (n, c) is copied, as a RobotState must outlive the next step."""
    zeros = np.zeros((n_envs, 3))
    return PrivilegedState(
        zeros, np.tile([1.0, 0, 0, 0], (n_envs, 1)), zeros.copy(), zeros.copy(), np.array(contact, dtype=np.float64)
    )


def free_joint_privileged(
    qpos: np.ndarray, vel: np.ndarray, q: int, v: int, contact: np.ndarray, foot_pos: np.ndarray | None
) -> PrivilegedState:
    """Ground truth from a MuJoCo-style free joint (MuJoCo, Genesis) at qpos address ``q``, dof ``v``.

    qpos (n, nq) holds position and quaternion w,x,y,z; vel (n, nv) the world-frame linear and
    body-frame angular velocity. contact (n, c), foot_pos (n, f, 3) or None. Everything is copied.
    """
    quat = qpos[:, q + 3 : q + 7].copy()
    return PrivilegedState(
        base_pos=qpos[:, q : q + 3].copy(),
        base_quat=quat,
        base_lin_vel=quat_rotate_inverse(quat, vel[:, v : v + 3]),
        base_ang_vel=vel[:, v + 3 : v + 6].copy(),
        contact_force=np.array(contact, dtype=np.float64),
        foot_pos=None if foot_pos is None else np.array(foot_pos, dtype=np.float64),
    )


def write_free_joint(qpos: np.ndarray, vel: np.ndarray, q: int, v: int, init: InitState) -> None:
    """Write the base fields of ``init`` (k rows) into a MuJoCo-style free joint of qpos (k, nq) and
    vel (k, nv), in place; a None field keeps what is there (the model's default)."""
    for field, dest in (
        (init.base_pos, qpos[:, q : q + 3]),
        (init.base_quat, qpos[:, q + 3 : q + 7]),
        (init.base_lin_vel, vel[:, v : v + 3]),
        (init.base_ang_vel, vel[:, v + 3 : v + 6]),
    ):
        if field is not None:
            dest[:] = field


class PhysicsTable:
    """Each env's domain-randomization parameters, relative to nominal (PhysicsParams' meaning).

    ``friction``, ``mass_scale``, ``added_base_mass``, ``kp_scale``, ``kd_scale``, ``armature_scale``: (n,) arrays,
    starting at 1, 1, 0 kg, 1, 1 and 1.
    """

    FIELDS = ("friction", "mass_scale", "added_base_mass", "kp_scale", "kd_scale", "armature_scale")

    def __init__(self, n_envs: int, robot: RobotSpec, has_base: bool):
        self.robot, self.has_base = robot, has_base
        self.friction, self.mass_scale, self.added_base_mass = np.ones(n_envs), np.ones(n_envs), np.zeros(n_envs)
        self.kp_scale, self.kd_scale, self.armature_scale = np.ones(n_envs), np.ones(n_envs), np.ones(n_envs)

    def update(self, ids: np.ndarray, params: PhysicsParams) -> None:
        """Store the fields ``params`` sets for envs ``ids`` (k,); mass on a robot without a base to
        carry it raises ValueError before anything is stored."""
        if params.added_base_mass is not None and not self.has_base and np.any(params.added_base_mass):
            raise ValueError(f"{self.robot.name} has no floating base to add mass to")
        for name in self.FIELDS:
            value = getattr(params, name)
            if value is not None:
                getattr(self, name)[ids] = value


def fixed_scene_body(model, body: str, mjcf) -> int:
    """The id in the compiled MuJoCo ``model`` of ``body``, a static scene body (a child of the world
    without joints, e.g. the peg board); anything else raises ValueError naming it."""
    import mujoco

    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if b <= 0 or model.body_parentid[b] != 0 or model.body_weldid[b] != 0:
        raise ValueError(f"{body!r} is not a fixed scene body of {mjcf}")
    return b


def tracking_eye(lookat: np.ndarray, extent: float) -> np.ndarray:
    """Where the default camera stands (3,) to look at ``lookat`` (3,) from TRACK_AZIMUTH/ELEVATION."""
    c = np.cos(TRACK_ELEVATION)
    forward = np.array([c * np.cos(TRACK_AZIMUTH), c * np.sin(TRACK_AZIMUTH), np.sin(TRACK_ELEVATION)])
    return lookat - TRACK_DISTANCE * extent * forward


def close_quietly(sim) -> None:
    """``__del__`` of an adapter: close it, swallowing errors of a half-built or half-torn-down one."""
    try:
        sim.close()
    except Exception:
        pass
