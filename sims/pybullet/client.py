"""PyBullet clients: building one (scene and robot in a DIRECT client), indexing it, and its link dynamics.

Every client of a simulator is built by one ``World`` from the same URDF and scene, in the same order,
so body, joint and link ids are the same in every client; ``Index`` reads them once, from any client.
"""

from __future__ import annotations

import ctypes
import math
import os
import pkgutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from embody.robots import RobotSpec
from embody.rotations import quat_conj, quat_mul

from ..base import ModelError
from .model import add_scene, pybullet_urdf, root_body, root_pose, scene_geoms, urdf_link_names
from .state import BaseFrame, wxyz

SOFTWARE_GL = ("llvmpipe", "softpipe", "swrast")  # Mesa's CPU rasterisers: TinyRenderer is ~10x faster

# Bullet's rigid contacts kick light links at long steps: at 5 ms the H1-2's feet drive its ankles to 2.6x their
# speed limits in a straight walk that MuJoCo's 5 ms steps keep under 0.8x; solved in 1.7 ms substeps with the same
# torques, 1.4x (issue 19; sim-to-sim of the walking policies in benchmarks/README.md). So for a robot that
# stands on contacts (a floating base), Bullet solves each physics step in substeps of at most this (numSubSteps);
# the adapter's PD still acts once per physics step. Fixed-base robots keep one solve per step (the cart-pole's
# 10 ms steps would cost 5x for nothing).
MAX_SOLVER_DT = 0.002


def solver_substeps(physics_dt: float, floating_base: bool = True) -> int:
    """Bullet substeps per physics step of ``physics_dt`` seconds (1 up to MAX_SOLVER_DT, and for a fixed base)."""
    return max(1, math.ceil(physics_dt / MAX_SOLVER_DT - 1e-9)) if floating_base else 1


@contextmanager
def quiet(said: list[str] | None = None):
    """Keep PyBullet's C-level prints (importer warnings, EGL banners) off stdout and stderr; what
    they said is appended to ``said`` when given."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved, sink = [os.dup(1), os.dup(2)], tempfile.TemporaryFile()
    os.dup2(sink.fileno(), 1)
    os.dup2(sink.fileno(), 2)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers what it prints to a file until flushed
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        if said is not None:
            sink.seek(0)
            said.append(sink.read().decode(errors="replace"))
        sink.close()


class World:
    """What every client of one simulator holds, and ``connect`` to build a client holding it.

    ``model`` is the compiled MJCF (timestep, gravity, scene geoms, joint damping and friction).
    After the first ``connect``: ``body`` (the robot's id) and ``scene_bodies`` (geom name -> id),
    the same in every client.
    """

    def __init__(self, p, robot: RobotSpec, model, physics_dt: float):
        self.p, self.robot, self.model, self.physics_dt = p, robot, model, physics_dt
        self.urdf, self.moments = pybullet_urdf(robot, model)
        links = urdf_link_names(self.urdf)
        self.scene = scene_geoms(model, robot, links)
        self.root_body = root_body(model, robot, links)
        self.root_pose = root_pose(model, robot, self.root_body)
        m = model  # PyBullet multiplies frictions, MuJoCo takes the larger: see model.add_scene
        self.friction = max(
            [float(m.geom_friction[g, 0]) for g in range(m.ngeom) if m.body(int(m.geom_bodyid[g])).name in links],
            default=1.0,
        )
        self.body, self.scene_bodies = -1, {}

    def connect(self, egl: bool = False) -> int:
        """A DIRECT client holding the scene and the robot.

        ``egl``: load the EGL renderer plugin first (it only draws bodies created after it); raises
        RuntimeError when it would draw on a software device."""
        p = self.p
        c = p.connect(p.DIRECT)
        if egl:
            said: list[str] = []
            with quiet(said):
                plugin = p.loadPlugin(
                    pkgutil.get_loader("eglRenderer").get_filename(), "_eglRendererPlugin", physicsClientId=c
                )
            if plugin < 0 or any(s in said[0] for s in SOFTWARE_GL):
                with quiet():
                    p.disconnect(physicsClientId=c)
                raise RuntimeError("no hardware EGL device")
        p.setGravity(*self.model.opt.gravity, physicsClientId=c)
        p.setTimeStep(self.physics_dt, physicsClientId=c)
        p.setPhysicsEngineParameter(
            deterministicOverlappingPairs=1,
            numSubSteps=solver_substeps(self.physics_dt, self.robot.floating_base),
            physicsClientId=c,
        )
        self.scene_bodies = add_scene(p, c, self.scene, self.friction)
        said = []
        try:
            with quiet(said):
                self.body = p.loadURDF(
                    str(self.urdf),
                    *self.root_pose,
                    useFixedBase=not self.robot.floating_base,
                    flags=p.URDF_USE_INERTIA_FROM_FILE,
                    physicsClientId=c,
                )
        except p.error as e:
            p.disconnect(physicsClientId=c)
            raise ModelError(
                f"pybullet cannot load {self.urdf} (generated from {self.robot.mjcf}): {e} {said[0].strip()}"
            ) from None
        self._configure(c)
        return c

    def _configure(self, c: int) -> None:
        """Joint friction, damping and motors as in the MJCF; no PyBullet-only damping or caps."""
        p, m, body = self.p, self.model, self.body
        dofs, kw = [], {"physicsClientId": c}
        for i in range(p.getNumJoints(body, **kw)):
            info = p.getJointInfo(body, i, **kw)
            p.changeDynamics(body, i, lateralFriction=1.0, **kw)
            moments = self.moments.get(info[12].decode())
            if moments is not None:  # inertia with folded armature (see model.py)
                p.changeDynamics(body, i, localInertiaDiagonal=moments.tolist(), **kw)
            if info[2] != p.JOINT_FIXED:
                dof = m.jnt_dofadr[m.joint(info[1].decode()).id]
                p.changeDynamics(body, i, jointDamping=float(m.dof_damping[dof]), **kw)
                dofs.append((i, float(m.dof_frictionloss[dof])))
        p.changeDynamics(
            body, -1, lateralFriction=1.0, linearDamping=0.0, angularDamping=0.0, maxJointVelocity=1e30, **kw
        )
        if dofs:  # velocity motors at zero speed with force = frictionloss: dry friction
            idx, loss = zip(*dofs)
            p.setJointMotorControlArray(
                body, idx, p.VELOCITY_CONTROL, targetVelocities=[0.0] * len(idx), forces=loss, **kw
            )
        if self.robot.sensors.ft_site:
            p.enableJointForceTorqueSensor(body, self.ft_joint(c), True, **kw)

    def link_index(self, c: int) -> dict[str, int]:
        """URDF link name -> PyBullet link (= joint) index."""
        p = self.p
        return {
            p.getJointInfo(self.body, i, physicsClientId=c)[12].decode(): i
            for i in range(p.getNumJoints(self.body, physicsClientId=c))
        }

    def ft_joint(self, c: int) -> int:
        """The joint above the F/T site's body: its reaction is the wrench the site senses."""
        site = self.link_index(c)[self.robot.sensors.ft_site]
        joint = self.p.getJointInfo(self.body, site, physicsClientId=c)[16]  # the site's body
        if joint < 0:
            raise ModelError(f"{self.robot.mjcf}: the F/T site is on the base link; no joint to sense")
        return joint


@dataclass
class Index:
    """Joint and link indices (the same in every client) and what the adapter derives from them.

    dof: (m,) PyBullet joint index of every URDF dof; spec_col: (j,) spec joint -> dof column;
    act: the actuated joints' PyBullet indices, with their kp, kd, torque limit (a,);
    imu_link, ee_link: the site links (None without the sensor); foot_links: the links carrying
    the foot sites (contacts), foot_sites: the site links themselves (positions); ft_joint with the
    F/T site's pose in the sensed link's frame (ft_site_pos (3,), ft_site_rot (3, 3));
    mj_qadr: (m,) MuJoCo qpos address of each dof; site_ref: MuJoCo's quaternion (4,) of the IMU
    and end-effector sites relative to the base at the default pose; base: the base's inertial frame.
    """

    dof: list[int]
    spec_col: np.ndarray
    act: list[int]
    kp: np.ndarray
    kd: np.ndarray
    limit: np.ndarray
    imu_link: int | None
    ee_link: int | None
    foot_links: list[int]
    foot_sites: list[int]
    ft_joint: int | None
    ft_site_pos: np.ndarray | None
    ft_site_rot: np.ndarray | None
    mj_qadr: np.ndarray
    site_ref: dict[str, np.ndarray]
    base: BaseFrame

    @classmethod
    def read(cls, world: World, c: int) -> Index:
        """Read the indices from client ``c`` of ``world`` (any client: they are all alike)."""
        p, r, s, body = world.p, world.robot, world.robot.sensors, world.body
        infos = [p.getJointInfo(body, i, physicsClientId=c) for i in range(p.getNumJoints(body, physicsClientId=c))]
        dofs = [i for i, info in enumerate(infos) if info[2] != p.JOINT_FIXED]
        names = [infos[i][1].decode() for i in dofs]
        spec_col = np.array([names.index(n) for n in r.joint_names])
        links = world.link_index(c)
        ft_joint = world.ft_joint(c) if s.ft_site else None
        ft_pos = ft_rot = None
        if s.ft_site:  # the site's pose in the sensed link's frame, to move the wrench there
            kw = {"computeForwardKinematics": 1, "physicsClientId": c}
            parent = p.getLinkState(body, ft_joint, **kw)
            site = p.getLinkState(body, links[s.ft_site], **kw)
            pos, orn = p.multiplyTransforms(*p.invertTransform(parent[4], parent[5]), site[4], site[5])
            ft_pos, ft_rot = np.array(pos), np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
        m = world.model
        mj_qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in names], dtype=np.int64)
        info = p.getDynamicsInfo(body, -1, physicsClientId=c)
        return cls(
            dof=dofs,
            spec_col=spec_col,
            act=[dofs[k] for k in spec_col[r.actuated]],
            kp=r.kp[r.actuated],
            kd=r.kd[r.actuated],
            limit=r.torque_limit[r.actuated],
            imu_link=links[s.imu_site] if s.imu_site else None,
            ee_link=links[s.ee_site] if s.ee_site else None,
            foot_links=[infos[links[f]][16] for f in s.foot_sites],
            foot_sites=[links[f] for f in s.foot_sites],
            ft_joint=ft_joint,
            ft_site_pos=ft_pos,
            ft_site_rot=ft_rot,
            mj_qadr=mj_qadr,
            site_ref={site: _mj_site_quat(world, mj_qadr[spec_col], site) for site in (s.imu_site, s.ee_site) if site},
            base=BaseFrame(np.array(info[3]), wxyz(np.array(info[4]))),
        )


def _mj_site_quat(world: World, spec_qadr: np.ndarray, site: str) -> np.ndarray:
    """MuJoCo's frame-sensor quaternion (4,) of ``site`` relative to the base at the default pose."""
    import mujoco

    m = world.model
    d = mujoco.MjData(m)
    d.qpos[spec_qadr] = world.robot.default_pose
    mujoco.mj_kinematics(m, d)
    i, q = m.site(site).id, np.zeros(4)
    mujoco.mju_mulQuat(q, d.xquat[m.site_bodyid[i]], m.site_quat[i])  # as mjSENS_FRAMEQUAT does
    return quat_mul(quat_conj(d.xquat[world.root_body][None]), q[None])[0]


class LinkDynamics:
    """Each link's nominal mass, principal moments and armature share (as loaded and configured),
    and ``apply`` to write an env's friction and masses relative to them.

    Links whose moments hold folded armature (model.py) keep it unscaled under mass_scale, as
    MuJoCo's dof_armature is: the link's own inertia is diag(D) - a u uᵀ in its inertial frame
    (PyBullet gives the joint axis u in that frame), and s·I + a u uᵀ is written as its diagonal
    there, s·D - (s-1)·a·u² (exact for s = 1; the dropped off-diagonal terms are (s-1)·a·uᵢuⱼ).
    """

    def __init__(self, world: World, c: int):
        p, body, m, kw = world.p, world.body, world.model, {"physicsClientId": c}
        self.p, self.body = p, body
        self.links, mass, moments, rotor = [-1, *range(p.getNumJoints(body, **kw))], [], [], []
        for link in self.links:
            info = p.getDynamicsInfo(body, link, **kw)
            mass.append(info[0])
            moments.append(info[2])
            rotor.append(np.zeros(3))
            if link >= 0:
                joint = p.getJointInfo(body, link, **kw)
                if joint[12].decode() in world.moments:
                    armature = float(m.dof_armature[m.jnt_dofadr[m.joint(joint[1].decode()).id]])
                    rotor[-1] = armature * np.square(joint[13])
        self.mass, self.moments, self.rotor = np.array(mass), np.array(moments), np.array(rotor)

    def apply(
        self,
        c: int,
        friction: float | None,
        mass_scale: float | None,
        added_base_mass: float,
        armature_scale: float = 1.0,
    ) -> None:
        """Set client ``c``'s robot links' lateral friction (when not None) and, when ``mass_scale`` is
        not None, every link's mass and inertia with its folded armature times ``armature_scale`` (inertia
        after mass: a mass write recomputes the inertia from the collision shape)."""
        p, body, kw = self.p, self.body, {"physicsClientId": c}
        for k, link in enumerate(self.links):
            if friction is not None:
                p.changeDynamics(body, link, lateralFriction=friction, **kw)
            if mass_scale is not None:
                mass = mass_scale * self.mass[k] + (added_base_mass if link == -1 else 0.0)
                moments = mass_scale * self.moments[k] - (mass_scale - armature_scale) * self.rotor[k]
                p.changeDynamics(body, link, mass=mass, **kw)
                p.changeDynamics(body, link, localInertiaDiagonal=moments.tolist(), **kw)
