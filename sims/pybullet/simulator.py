"""PyBullet adapter: the Simulator protocol over PyBullet (Featherstone multibodies) in DIRECT mode.

Batching: one DIRECT physics client per env. Envs are then fully independent (no shared
broadphase, solver islands or contact caches), so a batched step is bit-identical to stepping
one env alone, a reset or a divergence touches only its own world, and saveState-style
restores stay per env. The alternative, n robots far apart in one client, would save one
``stepSimulation`` call per env but lets envs influence each other through solver ordering and
makes per-env exact restore impossible. PyBullet has no vectorised API, so a Python loop over
envs (and over the ``decimation`` physics steps, because PD is evaluated every physics step)
is unavoidable here; ``n_threads`` is ignored.

Model: the URDF generated from the MJCF (``model.py``: massless links made explicit, armature
folded into link inertia), loaded with URDF_USE_INERTIA_FROM_FILE and self-collision off;
floating-base robots on a ground plane at ``default_base_pos``. The time step is
``physics_dt`` or the MJCF's, gravity the MJCF's. Static scene geoms come from the compiled
MJCF (``model.scene_geoms``).

Control: PyBullet's default velocity motors are kept but with a maximum force equal to the
MJCF's ``frictionloss`` (0 when none), which makes them dry joint friction like MuJoCo's;
commands go through TORQUE_CONTROL, re-applied every physics step (PyBullet clears joint
torques after each step). ``pd``: τ = kp (target − q) − kd dq, explicit, every physics step;
``torque``: the command. Both are clipped to ±torque_limit; unactuated joints get no torque.
Joint damping is the MJCF's (jointDamping); PyBullet's default base/link velocity damping
(0.04) and its 100 rad/s joint speed cap are removed, as MuJoCo has neither.

Gaps against MuJoCo: contacts are rigid (Bullet's ERP/LCP) rather than MuJoCo's soft
constraints, and friction combines as the product of the two bodies' coefficients (handled
for robot-vs-scene pairs, see ``model.add_scene``); joint limits are hard (no solreflimit);
damping is integrated explicitly (MuJoCo's implicitfast integrates it implicitly); armature
is approximated (``model.py``).

Sensors, read after each control step (no one-physics-step lag, unlike MuJoCo's sensors):
joint torque is the torque applied during the last physics step; the IMU and end-effector are
the frames of the site links ``robots/urdf.py`` adds; PyBullet has no link acceleration, so the
accelerometer finite-differences the IMU link's world velocity over the last physics step;
contact force is the normal force summed over the contact points of the link carrying each
foot site; the wrist wrench is the joint force/torque sensor of the joint above the FT site's
body, moved to the site. Right after a reset or set_state the accelerometer reads as at rest,
joint torque as PD holding the current pose (−kd dq) in ``pd`` mode and 0 in ``torque`` mode,
and contact forces 0 (PyBullet only knows them after a step).
"""

from __future__ import annotations

import ctypes
import os
import pkgutil
import sys
import tempfile
from collections import deque
from contextlib import contextmanager

import numpy as np

from embody.extras import require
from embody.robots import PrivilegedState, RobotSpec, RobotState
from embody.rotations import quat_conj, quat_mul, quat_rotate, quat_rotate_inverse

from ..base import InitState, ModelError, PhysicsParams, SimConfig
from .model import add_scene, compile_mjcf, pybullet_urdf, root_body, root_pose, scene_geoms, urdf_link_names

SOFTWARE_GL = ("llvmpipe", "softpipe", "swrast")  # Mesa's CPU rasterisers: TinyRenderer is ~10x faster
# lit from above, as the MJCF scenes and the MuJoCo adapter's added light are
LIGHT = {"lightDirection": [0.0, 0.0, 1.0], "lightAmbientCoeff": 0.4, "lightDiffuseCoeff": 0.6,
         "lightSpecularCoeff": 0.1}
MAX_ABS = 1e10  # MuJoCo's mjMAXVAL: larger positions or velocities count as diverged
SAVED_STATES = 16  # per env: get_state rows that restore bit-exactly through PyBullet's saveState
# get_state row layout: time, base inertial frame (PyBullet's base pose: centre of mass, x,y,z,w
# quaternion) and its world velocities, then the positions and velocities of every URDF dof,
# then a token naming the saveState snapshot taken with the row (-1: none).
TIME, POS, QUAT, LIN, ANG, BASE_END = 0, slice(1, 4), slice(4, 8), slice(8, 11), slice(11, 14), 14


def _wxyz(q: np.ndarray) -> np.ndarray:
    return q[..., [3, 0, 1, 2]]


def _xyzw(q: np.ndarray) -> np.ndarray:
    return q[..., [1, 2, 3, 0]]


@contextmanager
def _quiet(said: list[str] | None = None):
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


class PybulletSimulator:
    name = "pybullet"
    engine = "pybullet"
    capabilities = frozenset({"pd", "torque", "imu", "contact", "ee_pose", "wrench", "render", "state",
                              "physics_params", "push", "fixture_pose"})

    def __init__(self, robot: RobotSpec, config: SimConfig):
        with _quiet():  # pybullet announces its build time on import
            self._p = require("pybullet", "pybullet")
        self.robot, self.config, self.n_envs = robot, config, config.n_envs
        self.model = compile_mjcf(robot)  # the MJCF, for timestep, gravity, scene and cameras
        self.physics_dt = float(config.physics_dt or self.model.opt.timestep)
        self.dt = self.physics_dt * config.decimation
        self._urdf, self._moments = pybullet_urdf(robot, self.model)
        links = urdf_link_names(self._urdf)
        self._scene = scene_geoms(self.model, robot, links)
        self._root_body = root_body(self.model, robot, links)
        self._root_pose = root_pose(self.model, robot, self._root_body)
        m = self.model  # PyBullet multiplies frictions, MuJoCo takes the larger: see model.add_scene
        self._friction = max([float(m.geom_friction[g, 0]) for g in range(m.ngeom)
                              if m.body(int(m.geom_bodyid[g])).name in links], default=1.0)
        self._clients: list[int] = []
        self._viewer: tuple[int, int] | None = None  # render client and its renderer, made on first use
        self._mj_data = None
        self._fixtures: dict[str, np.ndarray] = {}  # fixed scene body -> (n, 7) world pos, quat w,x,y,z per env
        for _ in range(self.n_envs):
            self._clients.append(self._connect())
        self._index(self._clients[0])
        self._nominal_dynamics(self._clients[0])
        n = self.n_envs
        self._physics = np.tile([1.0, 0.0, 1.0], (n, 1))  # per env: friction, added base mass [kg], mass scale
        self._torque = np.zeros((n, len(self._act_idx)))  # applied in the last physics step
        self._imu = np.zeros((n, 13))  # world: orientation x,y,z,w, angular velocity, velocity, previous velocity
        self._ee = np.zeros((n, 7))  # world: position, orientation x,y,z,w
        self._wrench = np.zeros((n, 6))  # F/T joint reaction, PyBullet's frame (see _site_wrench)
        self._contact = np.zeros((n, len(self._foot_links)))
        self._foot_pos = np.zeros((n, len(self._foot_links), 3))
        self._rows = np.zeros((n, BASE_END + 2 * len(self._dof_idx)))
        self._snapshots: dict[int, tuple[int, int]] = {}  # token -> (env, PyBullet state id)
        self._recent = [deque() for _ in range(n)]  # per env: its live tokens, oldest first
        self._next_token = 0
        self._default_row = self._default_state()
        self.set_state(np.tile(self._default_row, (n, 1)))
        self.diverged = np.zeros(n, dtype=bool)
        self.divergence_count = 0

    # -- building ------------------------------------------------------------------------
    def _connect(self, egl: bool = False) -> int:
        """A DIRECT client holding the scene and the robot (body ids match across clients).

        ``egl``: load the EGL renderer plugin first (it only draws bodies created after it)."""
        p = self._p
        c = p.connect(p.DIRECT)
        if egl:
            said: list[str] = []
            with _quiet(said):
                plugin = p.loadPlugin(pkgutil.get_loader("eglRenderer").get_filename(), "_eglRendererPlugin",
                                      physicsClientId=c)
            if plugin < 0 or any(s in said[0] for s in SOFTWARE_GL):
                with _quiet():
                    p.disconnect(physicsClientId=c)
                raise RuntimeError("no hardware EGL device")
        p.setGravity(*self.model.opt.gravity, physicsClientId=c)
        p.setTimeStep(self.physics_dt, physicsClientId=c)
        p.setPhysicsEngineParameter(deterministicOverlappingPairs=1, physicsClientId=c)
        self._scene_bodies = add_scene(p, c, self._scene, self._friction)  # the same ids in every client
        said: list[str] = []
        try:
            with _quiet(said):
                self._body = p.loadURDF(str(self._urdf), *self._root_pose, useFixedBase=not self.robot.floating_base,
                                        flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c)
        except p.error as e:
            p.disconnect(physicsClientId=c)
            raise ModelError(f"pybullet cannot load {self._urdf} (generated from {self.robot.mjcf}): {e} "
                             f"{said[0].strip()}") from None
        self._configure(c)
        return c

    def _configure(self, c: int) -> None:
        """Joint friction, damping and motors as in the MJCF; no PyBullet-only damping or caps."""
        p, m, body = self._p, self.model, self._body
        dofs, kw = [], {"physicsClientId": c}
        for i in range(p.getNumJoints(body, **kw)):
            info = p.getJointInfo(body, i, **kw)
            p.changeDynamics(body, i, lateralFriction=1.0, **kw)
            moments = self._moments.get(info[12].decode())
            if moments is not None:  # inertia with folded armature (see model.py)
                p.changeDynamics(body, i, localInertiaDiagonal=moments.tolist(), **kw)
            if info[2] != p.JOINT_FIXED:
                dof = m.jnt_dofadr[m.joint(info[1].decode()).id]
                p.changeDynamics(body, i, jointDamping=float(m.dof_damping[dof]), **kw)
                dofs.append((i, float(m.dof_frictionloss[dof])))
        p.changeDynamics(body, -1, lateralFriction=1.0, linearDamping=0.0, angularDamping=0.0,
                         maxJointVelocity=1e30, **kw)
        if dofs:  # velocity motors at zero speed with force = frictionloss: dry friction
            idx, loss = zip(*dofs)
            p.setJointMotorControlArray(body, idx, p.VELOCITY_CONTROL, targetVelocities=[0.0] * len(idx),
                                        forces=loss, **kw)
        if self.robot.sensors.ft_site:
            p.enableJointForceTorqueSensor(body, self._ft_joint_of(c), True, **kw)

    def _ft_joint_of(self, c: int) -> int:
        site = self._link_index(c)[self.robot.sensors.ft_site]
        joint = self._p.getJointInfo(self._body, site, physicsClientId=c)[16]  # the site's body
        if joint < 0:
            raise ModelError(f"{self.robot.mjcf}: the F/T site is on the base link; no joint to sense")
        return joint

    def _link_index(self, c: int) -> dict[str, int]:
        p = self._p
        return {p.getJointInfo(self._body, i, physicsClientId=c)[12].decode(): i
                for i in range(p.getNumJoints(self._body, physicsClientId=c))}

    def _index(self, c: int) -> None:
        """Joint and link indices (identical in every client) and per-joint control arrays."""
        p, r, s = self._p, self.robot, self.robot.sensors
        infos = [p.getJointInfo(self._body, i, physicsClientId=c)
                 for i in range(p.getNumJoints(self._body, physicsClientId=c))]
        dofs = [i for i, info in enumerate(infos) if info[2] != p.JOINT_FIXED]
        names = [infos[i][1].decode() for i in dofs]
        self._dof_idx = dofs
        self._spec_col = np.array([names.index(n) for n in r.joint_names])  # spec joint -> dof column
        self._act_idx = [dofs[k] for k in self._spec_col[r.actuated]]
        self._kp, self._kd, self._limit = r.kp[r.actuated], r.kd[r.actuated], r.torque_limit[r.actuated]
        links = self._link_index(c)
        self._imu_link = links[s.imu_site] if s.imu_site else None
        self._ee_link = links[s.ee_site] if s.ee_site else None
        self._foot_links = [infos[links[f]][16] for f in s.foot_sites]  # the links carrying the sites
        self._foot_sites = [links[f] for f in s.foot_sites]  # the site links themselves (positions)
        self._ft_joint = self._ft_joint_of(c) if s.ft_site else None
        if s.ft_site:  # the site's pose in the sensed link's frame, to move the wrench there
            kw = {"computeForwardKinematics": 1, "physicsClientId": c}
            parent = p.getLinkState(self._body, self._ft_joint, **kw)
            site = p.getLinkState(self._body, links[s.ft_site], **kw)
            pos, orn = p.multiplyTransforms(*p.invertTransform(parent[4], parent[5]), site[4], site[5])
            self._ft_site_pos = np.array(pos)
            self._ft_site_rot = np.array(p.getMatrixFromQuaternion(orn)).reshape(3, 3)
        m = self.model  # MuJoCo qpos addresses of the URDF dofs (to place cameras with MuJoCo)
        self._mj_qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in names], dtype=np.int64)
        self._site_ref = {site: self._mj_site_quat(site) for site in (s.imu_site, s.ee_site) if site}
        info = p.getDynamicsInfo(self._body, -1, physicsClientId=c)
        self._com_pos, self._com_quat = np.array(info[3]), _wxyz(np.array(info[4]))  # base inertial frame

    def _mj_site_quat(self, site: str) -> np.ndarray:
        """MuJoCo's frame-sensor quaternion (4,) of ``site`` relative to the base at the default pose."""
        import mujoco

        m = self.model
        d = mujoco.MjData(m)
        d.qpos[self._mj_qadr[self._spec_col]] = self.robot.default_pose
        mujoco.mj_kinematics(m, d)
        i, q = m.site(site).id, np.zeros(4)
        mujoco.mju_mulQuat(q, d.xquat[m.site_bodyid[i]], m.site_quat[i])  # as mjSENS_FRAMEQUAT does
        return quat_mul(quat_conj(d.xquat[self._root_body][None]), q[None])[0]

    def _default_state(self) -> np.ndarray:
        """The state row of the default pose at rest (initial, and where diverged envs go)."""
        row = np.zeros(self._rows.shape[1])
        pos, quat = self._link_to_com(np.array(self._root_pose[:1]), _wxyz(np.array(self._root_pose[1:])))
        row[POS], row[QUAT] = pos[0], _xyzw(quat[0])
        row[BASE_END + self._spec_col] = self.robot.default_pose
        return row

    # -- base frames ---------------------------------------------------------------------
    def _link_to_com(self, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Base link frame (n, 3), (n, 4) w,x,y,z → PyBullet's base inertial frame."""
        return pos + quat_rotate(quat, self._com_pos), quat_mul(quat, self._com_quat)

    def _com_to_link(self, pos: np.ndarray, quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        link = quat_mul(quat, quat_conj(self._com_quat))
        return pos - quat_rotate(link, self._com_pos), link

    # -- state ---------------------------------------------------------------------------
    def get_state(self) -> np.ndarray:
        """(n, s) rows: time, base pose and velocity (PyBullet's base inertial frame), q, dq (URDF
        dofs), snapshot token.

        Restoring q and dq alone is not exact in contact: PyBullet keeps contact points and solver
        warm-start impulses between steps. So each row also names a saveState snapshot of its env;
        the last SAVED_STATES rows of each env restore through restoreState (bit-exact), older
        rows and rows set into another env from their numbers (to rounding when out of contact:
        PyBullet keeps a floating base's orientation as a matrix).
        """
        rows = np.concatenate([self._rows, np.full((self.n_envs, 1), -1.0)], axis=1)
        for i, c in enumerate(self._clients):
            token, self._next_token = self._next_token, self._next_token + 1
            self._snapshots[token] = (i, self._p.saveState(physicsClientId=c))
            self._recent[i].append(token)
            if len(self._recent[i]) > SAVED_STATES:
                self._forget(self._recent[i].popleft())
            rows[i, -1] = token
        return rows

    def _forget(self, token: int) -> None:
        env, sid = self._snapshots.pop(token)
        self._p.removeState(sid, physicsClientId=self._clients[env])

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        ids = np.arange(self.n_envs) if env_ids is None else np.asarray(env_ids, dtype=np.int64)
        width = self._rows.shape[1]
        state = np.asarray(state, dtype=np.float64)
        if state.shape[-1] == width:  # rows without a token
            state = np.concatenate([state, np.full((*state.shape[:-1], 1), -1.0)], axis=-1)
        state = np.broadcast_to(state, (len(ids), width + 1))
        p, body, m = self._p, self._body, len(self._dof_idx)
        for i, row in zip(ids, state):
            kw = {"physicsClientId": self._clients[i]}
            snapshot = self._snapshots.get(int(row[-1]))
            if snapshot is not None and snapshot[0] == i:
                p.restoreState(snapshot[1], **kw)
            else:
                if self.robot.floating_base:  # (a fixed base never moves; resetting it would round)
                    p.resetBasePositionAndOrientation(body, row[POS].tolist(), row[QUAT].tolist(), **kw)
                    p.resetBaseVelocity(body, row[LIN].tolist(), row[ANG].tolist(), **kw)
                q, dq = row[BASE_END:BASE_END + m], row[BASE_END + m:width]
                p.resetJointStatesMultiDof(body, self._dof_idx, [[x] for x in q], targetVelocities=[[x] for x in dq],
                                           **kw)
            self._rows[i] = row[:width]
            self._torque[i] = 0.0  # as PD holding the current pose: -kd dq
            if self.config.control == "pd":
                dq = row[BASE_END + m + self._spec_col[self.robot.actuated]]
                self._torque[i] = np.clip(-self._kd * dq, -self._limit, self._limit)
            self._read_sensors(i)
            self._imu[i, 10:13] = self._imu[i, 7:10]  # at rest: no finite difference yet
            self._contact[i] = 0.0

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        k, m = len(ids), len(self._dof_idx)
        rows = np.tile(self._default_row, (k, 1))
        rows[:, BASE_END + self._spec_col] = init.joint_pos
        rows[:, BASE_END + m + self._spec_col] = init.joint_vel
        if self.robot.floating_base:
            pos, quat = self._com_to_link(rows[:, POS], _wxyz(rows[:, QUAT]))
            pos = pos if init.base_pos is None else np.asarray(init.base_pos, dtype=np.float64)
            quat = quat if init.base_quat is None else np.asarray(init.base_quat, dtype=np.float64)
            quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
            ang = np.zeros((k, 3)) if init.base_ang_vel is None else quat_rotate(quat, np.asarray(init.base_ang_vel))
            lin = np.zeros((k, 3)) if init.base_lin_vel is None else np.asarray(init.base_lin_vel, dtype=np.float64)
            com_pos, com_quat = self._link_to_com(pos, quat)
            rows[:, POS], rows[:, QUAT], rows[:, ANG] = com_pos, _xyzw(com_quat), ang
            rows[:, LIN] = lin + np.cross(ang, com_pos - pos)  # the centre of mass's velocity
        self.set_state(rows, ids)

    # -- domain randomization -------------------------------------------------------------
    def _nominal_dynamics(self, c: int) -> None:
        """Each link's nominal mass, principal moments and armature share (as loaded and configured).

        Links whose moments hold folded armature (model.py) keep it unscaled under mass_scale, as
        MuJoCo's dof_armature is: the link's own inertia is diag(D) - a u uᵀ in its inertial frame
        (PyBullet gives the joint axis u in that frame), and s·I + a u uᵀ is written as its diagonal
        there, s·D - (s-1)·a·u² (exact for s = 1; the dropped off-diagonal terms are (s-1)·a·uᵢuⱼ).
        """
        p, body, m, kw = self._p, self._body, self.model, {"physicsClientId": c}
        links, mass, moments, rotor = [-1, *range(p.getNumJoints(body, **kw))], [], [], []
        for link in links:
            info = p.getDynamicsInfo(body, link, **kw)
            mass.append(info[0])
            moments.append(info[2])
            rotor.append(np.zeros(3))
            if link >= 0:
                joint = p.getJointInfo(body, link, **kw)
                if joint[12].decode() in self._moments:
                    armature = float(m.dof_armature[m.jnt_dofadr[m.joint(joint[1].decode()).id]])
                    rotor[-1] = armature * np.square(joint[13])
        self._dyn_links = links
        self._link_mass, self._link_moments, self._link_rotor = np.array(mass), np.array(moments), np.array(rotor)

    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Friction: the robot links' lateral friction (1 nominally; PyBullet multiplies it with the
        scene body's, so this scales every robot–scene contact's friction). Masses: changeDynamics
        on every link, its inertia written after its mass (a mass write recomputes the inertia
        from the collision shape). Parameters are not part of get_state rows, and restoreState
        keeps them (they are model, not state)."""
        ids = np.asarray(env_ids, dtype=np.int64)
        for col, value in enumerate((params.friction, params.added_base_mass, params.mass_scale)):
            if value is not None:
                self._physics[ids, col] = np.broadcast_to(np.asarray(value, dtype=np.float64), ids.shape)
        if params.added_base_mass is not None and not self.robot.floating_base and np.any(self._physics[ids, 1]):
            raise ValueError(f"{self.robot.name} has no floating base to add mass to")
        for i in ids:
            self._apply_physics(int(i), friction=params.friction is not None,
                                masses=params.added_base_mass is not None or params.mass_scale is not None)

    def _apply_physics(self, i: int, friction: bool = True, masses: bool = True) -> None:
        p, body, kw = self._p, self._body, {"physicsClientId": self._clients[i]}
        mu, added, scale = (float(x) for x in self._physics[i])
        for k, link in enumerate(self._dyn_links):
            if friction:
                p.changeDynamics(body, link, lateralFriction=mu, **kw)
            if masses:
                mass = scale * self._link_mass[k] + (added if link == -1 else 0.0)
                moments = scale * self._link_moments[k] - (scale - 1.0) * self._link_rotor[k]
                p.changeDynamics(body, link, mass=mass, **kw)
                p.changeDynamics(body, link, localInertiaDiagonal=moments.tolist(), **kw)

    def set_fixture_pose(self, body: str, env_ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> None:
        """Moves the static multibodies made from ``body``'s geoms (one per geom, see model.add_scene)
        in the envs' clients; the render client takes each env's poses when it draws that env."""
        import mujoco

        m, b = self.model, mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, body)
        if b <= 0 or m.body_parentid[b] != 0 or m.body_weldid[b] != 0:
            raise ValueError(f"{body!r} is not a fixed scene body of {self.robot.mjcf}")
        if body not in self._fixtures:
            d = mujoco.MjData(m)
            mujoco.mj_kinematics(m, d)
            self._fixtures[body] = np.tile(np.r_[d.xpos[b], d.xquat[b]], (self.n_envs, 1))
        ids = np.asarray(env_ids, dtype=np.int64)
        quat = np.asarray(quat, dtype=np.float64)
        self._fixtures[body][ids] = np.c_[np.asarray(pos, dtype=np.float64), quat / np.linalg.norm(quat, axis=1,
                                                                                                  keepdims=True)]
        for i in ids:
            self._place_fixtures(int(i), self._clients[i], only=body)

    def _place_fixtures(self, i: int, client: int, only: str | None = None) -> None:
        """Pose the scene multibodies of every moved fixture (or ``only`` that one) as in env ``i``."""
        p, m = self._p, self.model
        for body, poses in self._fixtures.items():
            if only is not None and body != only:
                continue
            b = m.body(body).id
            for g in np.flatnonzero(m.geom_bodyid == b):
                name = m.geom(int(g)).name or f"geom{g}"
                if name not in self._scene_bodies:
                    continue  # neither drawn nor colliding
                pos = poses[i, :3] + quat_rotate(poses[i, None, 3:], m.geom_pos[g][None])[0]
                quat = quat_mul(poses[i, None, 3:], m.geom_quat[g][None])[0]
                p.resetBasePositionAndOrientation(self._scene_bodies[name], pos.tolist(), _xyzw(quat).tolist(),
                                                  physicsClientId=client)

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Adds to the base's linear velocity: PyBullet's base velocity is its centre of mass's,
        which a pure translation changes by the same amount as the base frame's origin."""
        if not self.robot.floating_base:
            raise ValueError(f"{self.robot.name} has no floating base to push")
        ids = np.asarray(env_ids, dtype=np.int64)
        lin_vel = np.broadcast_to(np.asarray(lin_vel, dtype=np.float64), (len(ids), 3))
        p, body = self._p, self._body
        for i, dv in zip(ids, lin_vel):
            kw = {"physicsClientId": self._clients[i]}
            lin, ang = p.getBaseVelocity(body, **kw)
            p.resetBaseVelocity(body, (np.array(lin) + dv).tolist(), ang, **kw)
            self._rows[i, LIN], self._rows[i, ANG] = p.getBaseVelocity(body, **kw)

    # -- stepping ------------------------------------------------------------------------
    def step(self, command: np.ndarray) -> None:
        command = np.asarray(command, dtype=np.float64)
        if command.shape != (self.n_envs, len(self._act_idx)):
            raise ValueError(f"command shape {command.shape} != (n_envs, n_actions) = "
                             f"{(self.n_envs, len(self._act_idx))}")
        bad_cmd = ~np.isfinite(command).all(axis=1)
        command = np.where(bad_cmd[:, None], 0.0, command)  # never let NaN reach the engine
        for i in range(self.n_envs):
            self._step_env(i, command[i])
            self._read(i)
        self._rows[:, TIME] += self.dt
        bad_state = ~(np.abs(self._rows) <= MAX_ABS).all(axis=1)  # also catches NaN
        self.diverged = bad_cmd | bad_state
        if self.diverged.any():
            ids = np.flatnonzero(self.diverged)
            self.divergence_count += len(ids)
            for i in np.flatnonzero(bad_state):  # a world that went non-finite is rebuilt from scratch
                for token in self._recent[i]:
                    del self._snapshots[token]
                self._recent[i].clear()
                self._p.disconnect(physicsClientId=self._clients[i])
                self._clients[i] = self._connect()
                self._place_fixtures(i, self._clients[i])
                self._apply_physics(i)  # a new world has the nominal parameters
            self.set_state(np.tile(self._default_row, (len(ids), 1)), ids)

    def _step_env(self, i: int, command: np.ndarray) -> None:
        """``decimation`` physics steps of env ``i`` with PD (or torque) evaluated at each."""
        p, body, act, kw = self._p, self._body, self._act_idx, {"physicsClientId": self._clients[i]}
        pd, last = self.config.control == "pd", self.config.decimation - 1
        tau = np.clip(command, -self._limit, self._limit)
        for k in range(self.config.decimation):
            if pd:
                js = p.getJointStates(body, act, **kw)
                q, dq = np.array([s[0] for s in js]), np.array([s[1] for s in js])
                tau = np.clip(self._kp * (command - q) - self._kd * dq, -self._limit, self._limit)
            if k == last and self._imu_link is not None:  # IMU velocity before the last physics step
                self._imu[i, 10:13] = p.getLinkState(body, self._imu_link, computeLinkVelocity=1, **kw)[6]
            p.setJointMotorControlArray(body, act, p.TORQUE_CONTROL, forces=tau, **kw)
            p.stepSimulation(**kw)
        self._torque[i] = tau

    def _read(self, i: int) -> None:
        """Copy env ``i``'s state and sensors out of its client."""
        p, body, kw = self._p, self._body, {"physicsClientId": self._clients[i]}
        pos, orn = p.getBasePositionAndOrientation(body, **kw)
        lin, ang = p.getBaseVelocity(body, **kw)
        js = p.getJointStates(body, self._dof_idx, **kw)
        self._rows[i, 1:] = [*pos, *orn, *lin, *ang, *(s[0] for s in js), *(s[1] for s in js)]
        self._read_sensors(i)
        for c, link in enumerate(self._foot_links):
            points = p.getContactPoints(bodyA=body, linkIndexA=link, **kw)
            self._contact[i, c] = sum(pt[9] for pt in points)

    def _read_sensors(self, i: int) -> None:
        """IMU, end-effector (raw PyBullet frames, signed in ``state``) and F/T readings of env ``i``."""
        p, body, kw = self._p, self._body, {"physicsClientId": self._clients[i]}
        if self._ft_joint is not None:
            self._wrench[i] = p.getJointState(body, self._ft_joint, **kw)[2]
        if self._foot_sites:
            states = p.getLinkStates(body, self._foot_sites, computeForwardKinematics=1, **kw)
            self._foot_pos[i] = [st[4] for st in states]
        links = [x for x in (self._imu_link, self._ee_link) if x is not None]
        if links:
            states = p.getLinkStates(body, links, computeLinkVelocity=1, computeForwardKinematics=1, **kw)
            if self._imu_link is not None:
                s = states[0]
                self._imu[i, :10] = [*s[5], *s[7], *s[6]]
            if self._ee_link is not None:
                s = states[-1]
                self._ee[i] = [*s[4], *s[5]]

    def _signed(self, quat: np.ndarray, site: str, base: np.ndarray) -> np.ndarray:
        """PyBullet link orientations (n, 4) x,y,z,w → w,x,y,z with MuJoCo's sign.

        q and -q are the same rotation. PyBullet's sign comes from a matrix conversion and jumps;
        MuJoCo's frame sensors multiply quaternions along the kinematic chain. Each reading is
        signed to agree with the site's orientation relative to the base at the default pose,
        taken from MuJoCo's chain (``base`` (n, 4) is the base link's): MuJoCo's sign until the
        site turns more than 180° away from that.
        """
        quat = _wxyz(quat)
        ref = quat_mul(base, self._site_ref[site])
        return np.where((quat * ref).sum(1, keepdims=True) < 0, -quat, quat)

    # -- observation ---------------------------------------------------------------------
    def state(self) -> RobotState:
        r, n, m = self.robot, self.n_envs, len(self._dof_idx)
        torque = np.zeros((n, r.n_joints))
        torque[:, r.actuated] = self._torque
        out = RobotState(
            joint_pos=self._rows[:, BASE_END + self._spec_col],
            joint_vel=self._rows[:, BASE_END + m + self._spec_col],
            joint_torque=torque,
            time=self._rows[:, TIME].copy(),
            privileged=self._privileged(),
        )
        base = self._com_to_link(self._rows[:, POS], _wxyz(self._rows[:, QUAT]))[1]
        if self._imu_link is not None:
            quat = self._signed(self._imu[:, :4], self.robot.sensors.imu_site, base)
            accel = (self._imu[:, 7:10] - self._imu[:, 10:13]) / self.physics_dt - self.model.opt.gravity
            out.imu_quat = quat
            out.imu_gyro = quat_rotate_inverse(quat, self._imu[:, 4:7])
            out.imu_accel = quat_rotate_inverse(quat, accel)  # specific force: ≈ +9.81 z at rest
        if self._ee_link is not None:
            out.ee_pos = self._ee[:, :3].copy()
            out.ee_quat = self._signed(self._ee[:, 3:], self.robot.sensors.ee_site, base)
        if self._ft_joint is not None:
            out.wrench = self._site_wrench()
        return out

    def _site_wrench(self) -> np.ndarray:
        """The F/T joint's reaction moved to the site frame, (n, 6). PyBullet reports it in the sensed
        link's inertial frame; peg_arm's sensed link (``ft_sensor``) is massless, so that is its
        link frame, which ``_ft_site_pos``/``_ft_site_rot`` relate to the site. Its sign and frame
        match MuJoCo's force/torque sensors (checked in tests/sims/test_pybullet.py)."""
        force, torque = self._wrench[:, :3], self._wrench[:, 3:]
        torque = torque - np.cross(self._ft_site_pos, force)
        return np.concatenate([force @ self._ft_site_rot, torque @ self._ft_site_rot], axis=1)

    def _privileged(self) -> PrivilegedState:
        n, rows = self.n_envs, self._rows
        if not self.robot.floating_base:
            quat = np.tile([1.0, 0, 0, 0], (n, 1))
            return PrivilegedState(np.zeros((n, 3)), quat, np.zeros((n, 3)), np.zeros((n, 3)), self._contact.copy())
        pos, quat = self._com_to_link(rows[:, POS], _wxyz(rows[:, QUAT]))
        ang = rows[:, ANG]
        lin = rows[:, LIN] + np.cross(ang, pos - rows[:, POS])  # velocity of the base frame's origin
        return PrivilegedState(pos, quat, quat_rotate_inverse(quat, lin), quat_rotate_inverse(quat, ang),
                               self._contact.copy(), foot_pos=self._foot_pos.copy() if self._foot_sites else None)

    # -- rendering -----------------------------------------------------------------------
    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        """(k, H, W, 3) uint8 frames, drawn in a separate render-only client posed like each env
        (so rendering never perturbs the physics clients, and EGL, which only draws bodies created
        after it, is loaded once): EGL when its plugin loads on a hardware device, TinyRenderer
        otherwise (Mesa's software EGL, llvmpipe, is 10-20x slower than TinyRenderer: 180-310 ms
        against 10-23 ms a 320x240 frame)."""
        p, cfg, body = self._p, self.config, self._body
        c, renderer = self._render_client()
        ids = range(self.n_envs) if env_ids is None else np.asarray(env_ids)
        frames, m = [], len(self._dof_idx)
        for i in ids:  # rendering is per image by nature
            row = self._rows[i]
            p.resetBasePositionAndOrientation(body, row[POS].tolist(), row[QUAT].tolist(), physicsClientId=c)
            p.resetJointStatesMultiDof(body, self._dof_idx, [[x] for x in row[BASE_END:BASE_END + m]],
                                       physicsClientId=c)
            self._place_fixtures(i, c)
            eye, target, up, fovy, near, far = self._camera(i, camera)
            view = p.computeViewMatrix(eye, target, up, physicsClientId=c)
            proj = p.computeProjectionMatrixFOV(fovy, cfg.render_width / cfg.render_height, near, far,
                                                physicsClientId=c)
            with _quiet():  # the EGL plugin announces its device on the first frame
                img = p.getCameraImage(cfg.render_width, cfg.render_height, view, proj, shadow=int(cfg.shadows),
                                       renderer=renderer, physicsClientId=c, **LIGHT)[2]
            frames.append(np.asarray(img, dtype=np.uint8).reshape(cfg.render_height, cfg.render_width, 4)[..., :3])
        return np.stack(frames)

    def _render_client(self) -> tuple[int, int]:
        if self._viewer is None:
            p = self._p
            try:
                if pkgutil.get_loader("eglRenderer") is None:
                    raise RuntimeError("no EGL renderer plugin in this pybullet build")
                self._viewer = (self._connect(egl=True), p.ER_BULLET_HARDWARE_OPENGL)
            except (RuntimeError, p.error):
                self._viewer = (self._connect(), p.ER_TINY_RENDERER)
        return self._viewer

    def _camera(self, i: int, camera: str | None) -> tuple[list, list, list, float, float, float]:
        """eye, target, up, vertical fov [deg], near, far: the MJCF camera ``camera``, placed by
        MuJoCo at env ``i``'s pose, or (None) the MuJoCo adapter's camera tracking the base."""
        import mujoco

        m, d = self.model, self._mj_pose(i)
        extent = float(m.stat.extent)
        near, far = m.vis.map.znear * extent, m.vis.map.zfar * extent
        if camera is not None:
            cam = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if cam < 0:
                names = [m.camera(k).name for k in range(m.ncam)]
                raise ValueError(f"{self.robot.mjcf} has no camera {camera!r}; cameras: {names}")
            rot = d.cam_xmat[cam].reshape(3, 3)  # MuJoCo cameras look along -z with y up
            eye = d.cam_xpos[cam]
            return eye.tolist(), (eye - rot[:, 2]).tolist(), rot[:, 1].tolist(), float(m.cam_fovy[cam]), near, far
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, self.robot.base_body or "")
        target = d.subtree_com[body] if body > 0 else m.stat.center
        az, el = np.radians(135.0), np.radians(-20.0)
        forward = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        eye = target - 2.5 * extent * forward
        return eye.tolist(), target.tolist(), [0.0, 0.0, 1.0], float(m.vis.global_.fovy), near, far

    def _mj_pose(self, i: int):
        """MuJoCo data at env ``i``'s configuration (kinematics, subtree centres of mass, cameras)."""
        import mujoco

        m = self.model
        if self._mj_data is None:
            self._mj_data = mujoco.MjData(m)
        d, row, n_dof = self._mj_data, self._rows[i], len(self._dof_idx)
        d.qpos[self._mj_qadr] = row[BASE_END:BASE_END + n_dof]
        if self.robot.floating_base:
            pos, quat = self._com_to_link(row[None, POS], _wxyz(row[None, QUAT]))
            a = m.jnt_qposadr[m.body_jntadr[self._root_body]]  # its free joint
            d.qpos[a:a + 3], d.qpos[a + 3:a + 7] = pos[0], quat[0]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_camlight(m, d)
        return d

    def close(self) -> None:
        for c in self._clients + ([self._viewer[0]] if self._viewer else []):
            try:
                with _quiet():  # EGL says goodbye
                    self._p.disconnect(physicsClientId=c)
            except self._p.error:  # already gone
                pass
        self._clients, self._viewer = [], None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
