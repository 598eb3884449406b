"""Batched kinematics and static dynamics of peg_arm in numpy: the robot-side model library.

What a controller on the real arm computes from its own model (libfranka's ``franka::Model``
does the same): forward kinematics of the peg tip, its geometric Jacobian, the joint torques
that hold the arm against gravity, and damped-least-squares inverse kinematics. Tasks use it
for gravity compensation and Cartesian actions, the scripted peg-insertion expert for its
targets; none of it touches a simulator. The numbers (link frames, masses, centres of mass,
the ee and F/T sites) are read once from the robot's model file, compiled with MuJoCo as a
parser; everything after that is numpy over a batch of ``n`` configurations. ``frames``,
``ee_pose`` and ``gravity_torque`` also take torch tensors and keep their gradients (arm-reach's
differentiable path, sims/diff_env.py).

Frames: world = the robot base frame (link0 sits at the origin). Joint i turns about the
local z axis of body ``link{i}`` (the DH frame, see assets/peg_arm/peg_arm.xml).
"""

from __future__ import annotations

import numpy as np

from embody.arrays import cross, like, namespace
from embody.robots.spec import RobotSpec
from embody.rotations import quat_conj, quat_mul

from . import constants as C

# The peg pointing straight down, fingers closing along world y (the ready pose's tip frame).
DOWN = np.diag([1.0, -1.0, -1.0])


def _quat_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rot_z(angle):
    """(...) angles → (..., 3, 3) rotations about z (numpy or torch)."""
    xp = namespace(angle)
    c, s = xp.cos(angle), xp.sin(angle)
    zero, one = 0 * c, 0 * c + 1
    return xp.stack([xp.stack([c, -s, zero], -1), xp.stack([s, c, zero], -1), xp.stack([zero, zero, one], -1)], -2)


def orientation_error(rot: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(n, 3, 3), (n or 1, 3, 3) → (n, 3): the rotation vector (small angles) from ``rot`` to ``target``."""
    return 0.5 * np.cross(rot.swapaxes(-1, -2), np.broadcast_to(target, rot.shape).swapaxes(-1, -2)).sum(axis=-2)


class ArmModel:
    """Kinematics and gravity of a peg_arm spec (its peg size comes from the spec's scene file)."""

    def __init__(self, spec: RobotSpec):
        import mujoco

        m = mujoco.MjModel.from_xml_path(str(spec.mjcf))
        d = mujoco.MjData(m)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        body = lambda name: m.body(name).id  # noqa: E731
        chain = [body(f"link{i}") for i in range(1, 8)]
        if [m.jnt_bodyid[m.joint(n).id] for n in spec.joint_names] != chain:
            raise ValueError(f"{spec.mjcf}: joints {spec.joint_names} are not on bodies link1..link7")
        base = body(C.BASE_BODY)
        self.base_pos, self.base_rot = d.xpos[base].copy(), d.xmat[base].reshape(3, 3).copy()
        self.pos = m.body_pos[chain].copy()  # (7, 3) in the parent frame
        self.rot = np.stack([_quat_mat(m.body_quat[b]) for b in chain])  # (7, 3, 3)
        # masses and centres of mass (own frame); link7 carries its whole subtree (hand, fingers, peg)
        self.mass = m.body_mass[chain].copy()
        self.com = m.body_ipos[chain].copy()
        last = chain[-1]
        R7, p7 = d.xmat[last].reshape(3, 3), d.xpos[last]
        self.mass[-1] = m.body_subtreemass[last]
        self.com[-1] = R7.T @ (d.subtree_com[last] - p7)
        self.gravity = m.opt.gravity.copy()

        def site(name):
            i = m.site(name).id
            return R7.T @ (d.site_xpos[i] - p7), R7.T @ d.site_xmat[i].reshape(3, 3)

        self.ee_pos, self.ee_rot = site(spec.sensors.ee_site)  # in link7's frame
        # orientations as quaternions, as MuJoCo chains them (its frame sensors' sign): base, bodies, ee site
        ee = m.site(spec.sensors.ee_site).id
        self.base_quat, self.body_quat = d.xquat[base].copy(), m.body_quat[chain].copy()
        self.ee_quat_rel = quat_mul(quat_conj(d.xquat[last]), quat_mul(d.xquat[m.site_bodyid[ee]], m.site_quat[ee]))
        self.ft_pos, self.ft_rot = site(spec.sensors.ft_site)
        self.lower, self.upper = spec.lower.copy(), spec.upper.copy()

    # -- kinematics ------------------------------------------------------------------------
    def frames(self, q):
        """q (n, 7) → origins (n, 7, 3) and rotations (n, 7, 3, 3) of link1..link7 in the world (numpy or torch)."""
        xp = namespace(q)
        q = np.atleast_2d(q) if xp is np else q if q.ndim == 2 else q[None]
        zero = 0 * q[:, :1]  # (n, 1): broadcasts the base frame over the batch
        p, R = like(self.base_pos, q) + zero, like(self.base_rot, q) + zero[..., None]
        pos, rot, rz = like(self.pos, q), like(self.rot, q), rot_z(q)
        origins, rots = [], []
        for i in range(7):
            p = p + R @ pos[i]
            R = R @ rot[i] @ rz[:, i]
            origins.append(p)
            rots.append(R)
        return xp.stack(origins, 1), xp.stack(rots, 1)

    def ee_pose(self, q):
        """q (n, 7) → peg tip position (n, 3) and rotation (n, 3, 3) (the ``ee`` site; numpy or torch)."""
        o, R = self.frames(q)
        return o[:, -1] + R[:, -1] @ like(self.ee_pos, q), R[:, -1] @ like(self.ee_rot, q)

    def ee_quat(self, q):
        """q (n, 7) → the ee site's orientation (n, 4) w, x, y, z, multiplied along the chain as MuJoCo's frame
        sensor does it: the same sign, continuous in q (a matrix-to-quaternion conversion's sign jumps between its
        branches). numpy or torch."""
        xp = namespace(q)
        q = np.atleast_2d(q) if xp is np else q if q.ndim == 2 else q[None]
        half, zero = 0.5 * q, 0 * q[:, 0]
        out, body = like(self.base_quat, q) + zero[:, None], like(self.body_quat, q)
        for i in range(7):  # each hinge turns about its body's z axis
            turn = xp.stack([xp.cos(half[:, i]), zero, zero, xp.sin(half[:, i])], -1)
            out = quat_mul(quat_mul(out, body[i]), turn)
        return quat_mul(out, like(self.ee_quat_rel, q))

    def ft_pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """q (n, 7) → the F/T site's position (n, 3) and rotation (n, 3, 3)."""
        o, R = self.frames(q)
        return o[:, -1] + R[:, -1] @ self.ft_pos, R[:, -1] @ self.ft_rot

    def jacobian(self, q: np.ndarray) -> np.ndarray:
        """q (n, 7) → the ee site's geometric Jacobian (n, 6, 7): linear rows, then angular."""
        o, R = self.frames(q)
        z = R[..., 2]  # (n, 7, 3) joint axes
        tip = o[:, -1] + R[:, -1] @ self.ee_pos
        return np.concatenate([np.cross(z, tip[:, None] - o).swapaxes(1, 2), z.swapaxes(1, 2)], axis=1)

    def gravity_torque(self, q):
        """q (n, 7) → (n, 7): the joint torques that hold the arm still against gravity
        (MuJoCo's qfrc_bias at zero velocity; numpy or torch)."""
        xp = namespace(q)
        o, R = self.frames(q)
        z = R[..., 2]
        com = o + xp.einsum("nkij,kj->nki", R, like(self.com, q))  # (n, 7, 3)
        weight = like(self.mass[None, :, None] * self.gravity, q)  # (1, 7, 3) force on each link
        # joint k carries the links k..6
        moments = [cross(com[:, k:] - o[:, k : k + 1], weight[:, k:]).sum(1) for k in range(7)]
        return -xp.stack([(m * z[:, k]).sum(1) for k, m in enumerate(moments)], 1)

    def ik(
        self,
        pos: np.ndarray,
        rot: np.ndarray,
        q0: np.ndarray,
        iters: int = 100,
        damping: float = 1e-3,
        tol: float = 1e-8,
    ) -> np.ndarray:
        """Joint positions (n, 7) putting the ee at ``pos`` (n, 3) with rotation ``rot`` ((n or 1), 3, 3),
        by damped least squares from ``q0`` (n, 7), clipped to the joint limits."""
        q = np.array(np.atleast_2d(q0), dtype=np.float64)
        for _ in range(iters):
            dq, err = self.ik_step(q, pos, rot, damping)
            q = np.clip(q + dq, self.lower, self.upper)
            if (np.linalg.norm(err, axis=1) < tol).all():
                break
        return q

    def ik_step(
        self,
        q: np.ndarray,
        pos: np.ndarray,
        rot: np.ndarray,
        damping: float = 1e-3,
        q_rest: np.ndarray | None = None,
        rest_gain: float = 0.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One damped-least-squares step toward (pos, rot) from q (n, 7); with ``q_rest`` the
        redundant degree of freedom is pulled toward it (``rest_gain`` per step, in the null space).
        Returns dq (n, 7) and the pose error (n, 6) it was computed for."""
        p, R = self.ee_pose(q)
        err = np.concatenate([pos - p, orientation_error(R, rot)], axis=1)
        J = self.jacobian(q)
        JJt = J @ J.swapaxes(1, 2) + damping**2 * np.eye(6)
        dq = (J.swapaxes(1, 2) @ np.linalg.solve(JJt, err[..., None]))[..., 0]
        if q_rest is not None and rest_gain:
            Jpinv = J.swapaxes(1, 2) @ np.linalg.inv(JJt)  # (n, 7, 6)
            null = np.eye(7) - Jpinv @ J
            dq = dq + rest_gain * (null @ (q_rest - q)[..., None])[..., 0]
        return dq, err
