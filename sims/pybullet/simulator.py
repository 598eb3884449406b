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
is approximated (``model.py``). For floating-base robots Bullet's solver runs in substeps of at most 2 ms
(``client.MAX_SOLVER_DT``), the torques held: its rigid contacts kick light feet at longer steps.

Sensors, read after each control step (no one-physics-step lag, unlike MuJoCo's sensors):
joint torque is the torque applied during the last physics step; the IMU and end-effector are
the frames of the site links ``robots/urdf.py`` adds; PyBullet has no link acceleration, so the
accelerometer finite-differences the IMU link's world velocity over the last physics step;
contact force is the normal force summed over the contact points of the link carrying each
foot site; the wrist wrench is the joint force/torque sensor of the joint above the FT site's
body, moved to the site. Right after a reset or set_state the accelerometer reads as at rest,
joint torque as PD holding the current pose (−kd dq) in ``pd`` mode and 0 in ``torque`` mode,
and contact forces 0 (PyBullet only knows them after a step).

Modules: ``client.py`` builds and indexes the clients (and each link's dynamics), ``state.py``
holds the get_state row layout, the base's frames and the saveState snapshots, ``render.py`` the
render-only client; this file is the Simulator itself.
"""

from __future__ import annotations

import numpy as np

from embody.extras import require
from embody.robots import PrivilegedState, RobotSpec, RobotState
from embody.rotations import quat_mul, quat_rotate, quat_rotate_inverse

from ..adapter import (
    PhysicsTable,
    checked_command,
    close_quietly,
    fixed_base_privileged,
    fixed_scene_body,
    full_torque,
    record_divergence,
    select_envs,
)
from ..base import InitState, PhysicsParams, SimConfig
from .client import Index, LinkDynamics, World, quiet
from .model import compile_mjcf
from .state import ANG, BASE_END, LIN, MAX_ABS, NO_TOKEN, POS, QUAT, TIME, Snapshots, wxyz, xyzw


class PybulletSimulator:
    """The Simulator protocol over PyBullet, one DIRECT client per env (see the module docstring)."""

    name = "pybullet"
    engine = "pybullet"
    capabilities = frozenset(
        {
            "pd",
            "torque",
            "imu",
            "contact",
            "ee_pose",
            "wrench",
            "render",
            "state",
            "physics_params",
            "push",
            "fixture_pose",
        }
    )

    def __init__(self, robot: RobotSpec, config: SimConfig):
        with quiet():  # pybullet announces its build time on import
            self._p = require("pybullet", "pybullet")
        self.robot, self.config, self.n_envs = robot, config, config.n_envs
        self.model = compile_mjcf(robot, config)  # the MJCF, for timestep, gravity, scene, cameras, armature
        self.physics_dt = float(config.physics_dt or self.model.opt.timestep)
        self.dt = self.physics_dt * config.decimation
        self._world = World(self._p, robot, self.model, self.physics_dt)
        self._clients = [self._world.connect() for _ in range(self.n_envs)]  # one per env
        self._ix = Index.read(self._world, self._clients[0])
        self._dynamics = LinkDynamics(self._world, self._clients[0])
        self._renderer = None  # made on first use
        self._fixtures: dict[str, np.ndarray] = {}  # fixed scene body -> (n, 7) world pos, quat w,x,y,z per env
        n, ix = self.n_envs, self._ix
        self._physics = PhysicsTable(n, robot, has_base=robot.floating_base)
        self._torque = np.zeros((n, len(ix.act)))  # applied in the last physics step
        self._imu = np.zeros((n, 13))  # world: orientation x,y,z,w, angular velocity, velocity, previous velocity
        self._ee = np.zeros((n, 7))  # world: position, orientation x,y,z,w
        self._wrench = np.zeros((n, 6))  # F/T joint reaction, PyBullet's frame (see _site_wrench)
        self._contact = np.zeros((n, len(ix.foot_links)))
        self._foot_pos = np.zeros((n, len(ix.foot_links), 3))
        self._rows = np.zeros((n, BASE_END + 2 * len(ix.dof)))
        self._snapshots = Snapshots(self._p, n)
        self._default_row = self._default_state()
        self.set_state(np.tile(self._default_row, (n, 1)))
        self.diverged = np.zeros(n, dtype=bool)
        self.divergence_count = 0

    def _default_state(self) -> np.ndarray:
        """The state row of the default pose at rest (initial, and where diverged envs go)."""
        row, root = np.zeros(self._rows.shape[1]), self._world.root_pose
        pos, quat = self._ix.base.link_to_com(np.array(root[:1]), wxyz(np.array(root[1:])))
        row[POS], row[QUAT] = pos[0], xyzw(quat[0])
        row[BASE_END + self._ix.spec_col] = self.robot.default_pose
        return row

    def _rebuild(self, i: int) -> None:
        """A fresh world for env ``i`` (one that went non-finite), with its fixtures and parameters."""
        self._snapshots.drop(i)
        self._p.disconnect(physicsClientId=self._clients[i])
        self._clients[i] = self._world.connect()
        self._place_fixtures(i, self._clients[i])
        self._apply_physics(i, friction=True, masses=True)  # a new world has the nominal parameters

    # -- state ---------------------------------------------------------------------------
    def get_state(self) -> np.ndarray:
        """(n, s) rows (layout in state.py): time, base pose and velocity (PyBullet's base inertial
        frame), q, dq (URDF dofs), snapshot token.

        The last SAVED_STATES rows of each env restore bit for bit into that env (restoreState);
        older rows, rows set into another env and rows of another simulator restore from their
        numbers: exact out of contact up to rounding (PyBullet keeps a floating base's orientation
        as a matrix), not in contact (contact points and warm-start impulses are not in the row).
        """
        tokens = [self._snapshots.save(i, c) for i, c in enumerate(self._clients)]
        return np.concatenate([self._rows, np.array(tokens)[:, None]], axis=1)

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Restore ``get_state`` rows into ``env_ids`` (all when None): exactly from the row's saved snapshot when
        it carries a live token, else by resetting poses and velocities (rows without a token are accepted)."""
        ids, width = select_envs(self.n_envs, env_ids), self._rows.shape[1]
        state = np.asarray(state, dtype=np.float64)
        if state.shape[-1] == width:  # rows without a token
            state = np.concatenate([state, np.full((*state.shape[:-1], 1), NO_TOKEN)], axis=-1)
        state = np.broadcast_to(state, (len(ids), width + 1))
        p, body, ix, m = self._p, self._world.body, self._ix, len(self._ix.dof)
        for i, row in zip(ids, state):
            kw = {"physicsClientId": self._clients[i]}
            if not self._snapshots.restore(i, row[-1]):
                if self.robot.floating_base:  # (a fixed base never moves; resetting it would round)
                    p.resetBasePositionAndOrientation(body, row[POS].tolist(), row[QUAT].tolist(), **kw)
                    p.resetBaseVelocity(body, row[LIN].tolist(), row[ANG].tolist(), **kw)
                q, dq = row[BASE_END : BASE_END + m], row[BASE_END + m : width]
                p.resetJointStatesMultiDof(body, ix.dof, [[x] for x in q], targetVelocities=[[x] for x in dq], **kw)
            self._rows[i] = row[:width]
            self._torque[i] = 0.0  # as PD holding the current pose: -kd dq
            if self.config.control == "pd":
                dq = row[BASE_END + m + ix.spec_col[self.robot.actuated]]
                self._torque[i] = np.clip(-ix.kd * dq, -ix.limit, ix.limit)
            self._read_sensors(i)
            self._imu[i, 10:13] = self._imu[i, 7:10]  # at rest: no finite difference yet
            self._contact[i] = 0.0

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        k, m, col = len(ids), len(self._ix.dof), self._ix.spec_col
        rows = np.tile(self._default_row, (k, 1))
        rows[:, BASE_END + col] = init.joint_pos
        rows[:, BASE_END + m + col] = init.joint_vel
        if self.robot.floating_base:
            frame = self._ix.base
            pos, quat = frame.com_to_link(rows[:, POS], wxyz(rows[:, QUAT]))
            pos = pos if init.base_pos is None else np.asarray(init.base_pos, dtype=np.float64)
            quat = quat if init.base_quat is None else np.asarray(init.base_quat, dtype=np.float64)
            quat = quat / np.linalg.norm(quat, axis=1, keepdims=True)
            ang = np.zeros((k, 3)) if init.base_ang_vel is None else quat_rotate(quat, np.asarray(init.base_ang_vel))
            lin = np.zeros((k, 3)) if init.base_lin_vel is None else np.asarray(init.base_lin_vel, dtype=np.float64)
            com_pos, com_quat = frame.link_to_com(pos, quat)
            rows[:, POS], rows[:, QUAT], rows[:, ANG] = com_pos, xyzw(com_quat), ang
            rows[:, LIN] = lin + np.cross(ang, com_pos - pos)  # the centre of mass's velocity
        self.set_state(rows, ids)

    # -- domain randomization -------------------------------------------------------------
    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Friction: the robot links' lateral friction (1 nominally; PyBullet multiplies it with the
        scene body's, so this scales every robot–scene contact's friction). Masses: changeDynamics
        and folded armature on every link (``client.LinkDynamics``). PD gains: this adapter's own PD reads the scales at
        each step. Parameters are not part of get_state rows, and restoreState keeps them (they are
        model, not state)."""
        ids = np.asarray(env_ids, dtype=np.int64)
        self._physics.update(ids, params)
        masses = any(x is not None for x in (params.added_base_mass, params.mass_scale, params.armature_scale))
        for i in ids:
            self._apply_physics(int(i), friction=params.friction is not None, masses=masses)

    def _apply_physics(self, i: int, friction: bool, masses: bool) -> None:
        t = self._physics
        self._dynamics.apply(
            self._clients[i],
            t.friction[i] if friction else None,
            t.mass_scale[i] if masses else None,
            t.added_base_mass[i],
            t.armature_scale[i],
        )

    def set_fixture_pose(self, body: str, env_ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> None:
        """Moves the static multibodies made from ``body``'s geoms (one per geom, see model.add_scene)
        in the envs' clients; the render client takes each env's poses when it draws that env."""
        import mujoco

        b = fixed_scene_body(self.model, body, self.robot.mjcf)
        if body not in self._fixtures:
            d = mujoco.MjData(self.model)
            mujoco.mj_kinematics(self.model, d)
            self._fixtures[body] = np.tile(np.r_[d.xpos[b], d.xquat[b]], (self.n_envs, 1))
        ids = np.asarray(env_ids, dtype=np.int64)
        quat = np.asarray(quat, dtype=np.float64)
        self._fixtures[body][ids] = np.c_[
            np.asarray(pos, dtype=np.float64), quat / np.linalg.norm(quat, axis=1, keepdims=True)
        ]
        for i in ids:
            self._place_fixtures(int(i), self._clients[i], only=body)

    def _place_fixtures(self, i: int, client: int, only: str | None = None) -> None:
        """Pose the scene multibodies of every moved fixture (or ``only`` that one) as in env ``i``."""
        p, m, scene = self._p, self.model, self._world.scene_bodies
        for body, poses in self._fixtures.items():
            if only is not None and body != only:
                continue
            for g in np.flatnonzero(m.geom_bodyid == m.body(body).id):
                name = m.geom(int(g)).name or f"geom{g}"
                if name not in scene:
                    continue  # neither drawn nor colliding
                pos = poses[i, :3] + quat_rotate(poses[i, None, 3:], m.geom_pos[g][None])[0]
                quat = quat_mul(poses[i, None, 3:], m.geom_quat[g][None])[0]
                p.resetBasePositionAndOrientation(
                    scene[name], pos.tolist(), xyzw(quat).tolist(), physicsClientId=client
                )

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Adds to the base's linear velocity: PyBullet's base velocity is its centre of mass's,
        which a pure translation changes by the same amount as the base frame's origin."""
        if not self.robot.floating_base:
            raise ValueError(f"{self.robot.name} has no floating base to push")
        ids = np.asarray(env_ids, dtype=np.int64)
        lin_vel = np.broadcast_to(np.asarray(lin_vel, dtype=np.float64), (len(ids), 3))
        p, body = self._p, self._world.body
        for i, dv in zip(ids, lin_vel):
            kw = {"physicsClientId": self._clients[i]}
            lin, ang = p.getBaseVelocity(body, **kw)
            p.resetBaseVelocity(body, (np.array(lin) + dv).tolist(), ang, **kw)
            self._rows[i, LIN], self._rows[i, ANG] = p.getBaseVelocity(body, **kw)

    # -- stepping ------------------------------------------------------------------------
    def step(self, command: np.ndarray) -> None:
        """One control period per env, PD evaluated at every physics step; a world that went non-finite is rebuilt and
        reset."""
        command, bad_cmd = checked_command(command, self.n_envs, len(self._ix.act))
        for i in range(self.n_envs):
            self._step_env(i, command[i])
            self._read(i)
        self._rows[:, TIME] += self.dt
        bad_state = ~(np.abs(self._rows) <= MAX_ABS).all(axis=1)  # also catches NaN
        ids = record_divergence(self, bad_cmd | bad_state)
        for i in np.flatnonzero(bad_state):  # a world that went non-finite is rebuilt from scratch
            self._rebuild(i)
        if len(ids):
            self.set_state(np.tile(self._default_row, (len(ids), 1)), ids)

    def _step_env(self, i: int, command: np.ndarray) -> None:
        """``decimation`` physics steps of env ``i`` with PD (or torque) evaluated at each."""
        p, body, ix, kw = self._p, self._world.body, self._ix, {"physicsClientId": self._clients[i]}
        pd, last = self.config.control == "pd", self.config.decimation - 1
        kp, kd = ix.kp * self._physics.kp_scale[i], ix.kd * self._physics.kd_scale[i]
        tau = np.clip(command, -ix.limit, ix.limit)
        for k in range(self.config.decimation):
            if pd:
                js = p.getJointStates(body, ix.act, **kw)
                q, dq = np.array([s[0] for s in js]), np.array([s[1] for s in js])
                tau = np.clip(kp * (command - q) - kd * dq, -ix.limit, ix.limit)
            if k == last and ix.imu_link is not None:  # IMU velocity before the last physics step
                self._imu[i, 10:13] = p.getLinkState(body, ix.imu_link, computeLinkVelocity=1, **kw)[6]
            p.setJointMotorControlArray(body, ix.act, p.TORQUE_CONTROL, forces=tau, **kw)
            p.stepSimulation(**kw)
        self._torque[i] = tau

    def _read(self, i: int) -> None:
        """Copy env ``i``'s state and sensors out of its client."""
        p, body, kw = self._p, self._world.body, {"physicsClientId": self._clients[i]}
        pos, orn = p.getBasePositionAndOrientation(body, **kw)
        lin, ang = p.getBaseVelocity(body, **kw)
        js = p.getJointStates(body, self._ix.dof, **kw)
        self._rows[i, 1:] = [*pos, *orn, *lin, *ang, *(s[0] for s in js), *(s[1] for s in js)]
        self._read_sensors(i)
        for c, link in enumerate(self._ix.foot_links):
            points = p.getContactPoints(bodyA=body, linkIndexA=link, **kw)
            self._contact[i, c] = sum(pt[9] for pt in points)

    def _read_sensors(self, i: int) -> None:
        """IMU, end-effector (raw PyBullet frames, signed in ``state``) and F/T readings of env ``i``."""
        p, body, ix, kw = self._p, self._world.body, self._ix, {"physicsClientId": self._clients[i]}
        if ix.ft_joint is not None:
            self._wrench[i] = p.getJointState(body, ix.ft_joint, **kw)[2]
        if ix.foot_sites:
            states = p.getLinkStates(body, ix.foot_sites, computeForwardKinematics=1, **kw)
            self._foot_pos[i] = [st[4] for st in states]
        links = [x for x in (ix.imu_link, ix.ee_link) if x is not None]
        if links:
            states = p.getLinkStates(body, links, computeLinkVelocity=1, computeForwardKinematics=1, **kw)
            if ix.imu_link is not None:
                s = states[0]
                self._imu[i, :10] = [*s[5], *s[7], *s[6]]
            if ix.ee_link is not None:
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
        quat = wxyz(quat)
        ref = quat_mul(base, self._ix.site_ref[site])
        return np.where((quat * ref).sum(1, keepdims=True) < 0, -quat, quat)

    # -- observation ---------------------------------------------------------------------
    def state(self) -> RobotState:
        ix, sensors, m = self._ix, self.robot.sensors, len(self._ix.dof)
        out = RobotState(
            joint_pos=self._rows[:, BASE_END + ix.spec_col],
            joint_vel=self._rows[:, BASE_END + m + ix.spec_col],
            joint_torque=full_torque(self.robot, self._torque),
            time=self._rows[:, TIME].copy(),
            privileged=self._privileged(),
        )
        base = ix.base.com_to_link(self._rows[:, POS], wxyz(self._rows[:, QUAT]))[1]
        if ix.imu_link is not None:
            quat = self._signed(self._imu[:, :4], sensors.imu_site, base)
            accel = (self._imu[:, 7:10] - self._imu[:, 10:13]) / self.physics_dt - self.model.opt.gravity
            out.imu_quat = quat
            out.imu_gyro = quat_rotate_inverse(quat, self._imu[:, 4:7])
            out.imu_accel = quat_rotate_inverse(quat, accel)  # specific force: ≈ +9.81 z at rest
        if ix.ee_link is not None:
            out.ee_pos = self._ee[:, :3].copy()
            out.ee_quat = self._signed(self._ee[:, 3:], sensors.ee_site, base)
        if ix.ft_joint is not None:
            out.wrench = self._site_wrench()
        return out

    def _site_wrench(self) -> np.ndarray:
        """The F/T joint's reaction moved to the site frame, (n, 6). PyBullet reports it in the sensed
        link's inertial frame; peg_arm's sensed link (``ft_sensor``) is massless, so that is its
        link frame, which ``Index.ft_site_pos``/``ft_site_rot`` relate to the site. Its sign and
        frame match MuJoCo's force/torque sensors (checked in tests/sims/test_pybullet.py)."""
        force, torque = self._wrench[:, :3], self._wrench[:, 3:]
        torque = torque - np.cross(self._ix.ft_site_pos, force)
        rot = self._ix.ft_site_rot
        return np.concatenate([force @ rot, torque @ rot], axis=1)

    def _privileged(self) -> PrivilegedState:
        n, rows = self.n_envs, self._rows
        if not self.robot.floating_base:
            return fixed_base_privileged(n, self._contact)
        pos, quat = self._ix.base.com_to_link(rows[:, POS], wxyz(rows[:, QUAT]))
        ang = rows[:, ANG]
        lin = rows[:, LIN] + np.cross(ang, pos - rows[:, POS])  # velocity of the base frame's origin
        return PrivilegedState(
            pos,
            quat,
            quat_rotate_inverse(quat, lin),
            quat_rotate_inverse(quat, ang),
            self._contact.copy(),
            foot_pos=self._foot_pos.copy() if self._ix.foot_sites else None,
        )

    # -- rendering -----------------------------------------------------------------------
    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        """(k, H, W, 3) uint8 frames, drawn in a render-only client (render.py)."""
        from .render import Renderer

        if self._renderer is None:
            self._renderer = Renderer(self._world, self._ix, self.config)
        ids = select_envs(self.n_envs, env_ids)
        return self._renderer.render(
            self._rows[ids], camera, place=lambda k: self._place_fixtures(int(ids[k]), self._renderer.client)
        )

    def close(self) -> None:
        for c in self._clients:
            try:
                with quiet():
                    self._p.disconnect(physicsClientId=c)
            except self._p.error:  # already gone
                pass
        if self._renderer is not None:
            try:
                self._renderer.close()
            except self._p.error:
                pass
        self._clients, self._renderer = [], None

    __del__ = close_quietly
