"""Pelvis quantities of the H1-2 derived from its torso IMU and the waist joint.

The real H1-2 reports its torso IMU in LowState_: the IMU sits on torso_link, which turns
relative to the pelvis through the waist (torso_joint, a yaw joint). A locomotion policy wants
the pelvis (base) orientation and angular velocity, so it derives them from the IMU and the
waist encoder exactly as here. These functions read only the observed part of RobotState, so
the same code runs in training and on the robot.

Kinematics (MuJoCo's body convention: a child's frame is its parent's, moved by the body's
pos/quat, then turned by its joint about the joint axis given in the child frame)::

    R_torso = R_pelvis · R_rel · Rot(a, θ)          (θ: waist angle, a: waist axis in torso_link)
    R_imu   = R_torso · R_site
    ⇒ q_pelvis = q_imu ⊗ q_site⁻¹ ⊗ Rot(a, −θ) ⊗ q_rel⁻¹

    ω_torso (torso frame) = (R_rel·Rot(a, θ))ᵀ ω_pelvis (pelvis frame) + θ̇ a
    ⇒ ω_pelvis = R_rel · Rot(a, θ) · (R_site · gyro − θ̇ a)
               = R_rel · Rot(a, θ) · R_site · gyro − θ̇ (R_rel a)

The fixed transforms (R_rel, a, R_site) are read once from the compiled MJCF of the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from embody.robots.spec import RobotSpec
from embody.robots.state import RobotState
from embody.rotations import axis_angle_quat, quat_conj, quat_mul, quat_rotate, quat_rotate_inverse


@dataclass(frozen=True)
class ImuMount:
    """Where the IMU sits relative to the base, read from the compiled model.

    waist_index: column of the waist joint in joint_pos / joint_vel (motor order)
    torso_pos:   (3,) torso_link origin in the pelvis frame at waist = 0 [m]
    torso_quat:  (4,) torso_link orientation relative to the pelvis at waist = 0, w,x,y,z
    waist_axis:  (3,) unit waist axis in the torso_link frame (equal in the pelvis frame
                 turned by torso_quat; the joint rotation leaves its own axis fixed)
    site_quat:   (4,) IMU site orientation in the torso_link frame, w,x,y,z
    """

    waist_index: int
    torso_pos: np.ndarray
    torso_quat: np.ndarray
    waist_axis: np.ndarray
    site_quat: np.ndarray


def imu_mount(spec: RobotSpec) -> ImuMount:
    """The IMU mount of ``spec`` (cached per MJCF path, waist joint, base body and IMU site).

    The waist is the spec's "waist" group (one joint); the IMU is ``spec.sensors.imu_site``.
    """
    (waist,) = spec.groups["waist"]
    if spec.sensors.imu_site is None or spec.base_body is None:
        raise ValueError(f"{spec.name}: needs an imu_site and a base_body")
    return _mount(str(spec.mjcf), waist, spec.joints[waist].name, spec.base_body, spec.sensors.imu_site)


@cache
def _mount(mjcf: str, waist_index: int, waist_joint: str, base_body: str, imu_site: str) -> ImuMount:
    import mujoco

    m = mujoco.MjModel.from_xml_path(mjcf)
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, waist_joint)
    sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, imu_site)
    pid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, base_body)
    if min(jid, sid, pid) < 0:
        raise ValueError(f"{mjcf}: missing joint {waist_joint!r}, site {imu_site!r} or body {base_body!r}")
    if m.jnt_type[jid] != mujoco.mjtJoint.mjJNT_HINGE:
        raise ValueError(f"{mjcf}: {waist_joint} is not a hinge")
    torso = m.jnt_bodyid[jid]
    if m.site_bodyid[sid] != torso or m.body_parentid[torso] != pid:
        raise ValueError(f"{mjcf}: expected site {imu_site} on the waist's body, a child of {base_body}")
    if m.body_jntnum[torso] != 1:
        raise ValueError(f"{mjcf}: the waist's body must have exactly one joint")

    def frozen(a) -> np.ndarray:
        a = np.array(a, dtype=np.float64)
        a.flags.writeable = False
        return a

    axis = np.asarray(m.jnt_axis[jid], dtype=np.float64)
    return ImuMount(
        waist_index=waist_index,
        torso_pos=frozen(m.body_pos[torso]),
        torso_quat=frozen(m.body_quat[torso] / np.linalg.norm(m.body_quat[torso])),
        waist_axis=frozen(axis / np.linalg.norm(axis)),
        site_quat=frozen(m.site_quat[sid] / np.linalg.norm(m.site_quat[sid])),
    )


def _pelvis_from_imu(state: RobotState, mount: ImuMount) -> np.ndarray:
    """Orientation of the IMU frame relative to the pelvis: q_rel ⊗ Rot(a, θ) ⊗ q_site → (n, 4)."""
    waist = state.joint_pos[:, mount.waist_index]
    return quat_mul(quat_mul(mount.torso_quat, axis_angle_quat(mount.waist_axis, waist)), mount.site_quat)


def pelvis_quat(state: RobotState, mount: ImuMount) -> np.ndarray:
    """Pelvis orientation in the world, w,x,y,z, unit norm, w ≥ 0: (n, 4).

    From ``state.imu_quat`` (n, 4) and the waist angle ``state.joint_pos[:, waist]`` (n,):
    q_pelvis = q_imu ⊗ q_site⁻¹ ⊗ Rot(a, −θ) ⊗ q_rel⁻¹.
    """
    if state.imu_quat is None:
        raise ValueError("state has no IMU")
    q = quat_mul(state.imu_quat, quat_conj(_pelvis_from_imu(state, mount)))
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[:, :1] < 0.0, -q, q)


def pelvis_ang_vel(state: RobotState, mount: ImuMount) -> np.ndarray:
    """Pelvis angular velocity in the pelvis frame [rad/s]: (n, 3).

    From ``state.imu_gyro`` (n, 3, IMU frame) and the waist velocity ``state.joint_vel[:, waist]``
    (n,): the gyro turned into the pelvis frame, less θ̇ times the waist axis in the pelvis frame.
    """
    if state.imu_gyro is None:
        raise ValueError("state has no IMU")
    gyro = quat_rotate(_pelvis_from_imu(state, mount), state.imu_gyro)
    axis = quat_rotate(mount.torso_quat[None], mount.waist_axis[None])  # (1, 3), in the pelvis frame
    return gyro - state.joint_vel[:, mount.waist_index, None] * axis


def projected_gravity(state: RobotState, mount: ImuMount) -> np.ndarray:
    """Unit gravity direction (world −z) in the pelvis frame: (n, 3)."""
    return quat_rotate_inverse(pelvis_quat(state, mount), np.array([0.0, 0.0, -1.0]))


__all__ = ["ImuMount", "imu_mount", "pelvis_ang_vel", "pelvis_quat", "projected_gravity"]
