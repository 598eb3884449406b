"""Genesis adapter: every env lives in one natively batched Genesis scene (``scene.build(n_envs=n)``).

The robot is loaded from its MJCF (``gs.morphs.MJCF``, which compiles it with MuJoCo). The compiled
MuJoCo model of the same robot (``embody.sims.mujoco.model.build_model``) is the reference for what
Genesis ignores or drops: the timestep and integrator in ``<option>``, sites (IMU, end effector,
feet), cameras and the scene extent for the default camera. Floating-base robots stand on a
``gs.morphs.Plane``; fixed-base ones are welded to the world by their MJCF.

Control (both per physics step, like MuJoCo's actuators):
* ``pd``: Genesis' own PD (``control_dofs_position``): kp (q* − q) − kd q̇, clipped to ±torque_limit
  by the dof force range, evaluated at every physics step.
* ``torque``: the command clipped to ±torque_limit, held over the control period.
Joints that are not actuated get zero force.

Sensors: Genesis reports link poses, velocities and accelerations; the adapter moves them to the
spec's sites with the site offsets of the compiled MuJoCo model.
* imu_accel is the specific force R^T (a − g) at the site, from the link acceleration Genesis
  computed in the last physics step (classical acceleration at the link origin, moved to the site
  with α × r + ω × (ω × r)); like MuJoCo's sensors it lags the state by one physics step.
* contact_force is the world-z component of the net contact force on each foot site's link: on
  flat ground, the sum of the normal forces, which MuJoCo's touch sensor reports.
* joint_torque is the actuator force at the current state (Genesis evaluates its PD law on
  demand); MuJoCo reports the force of the last physics step: equal at rest, one step apart in motion.
* After a reset, until the next step, Genesis still holds the previous episode's accelerations
  and contacts: the adapter reports zero link acceleration (imu_accel reads gravity) and zero
  contact force for those envs (MuJoCo's adapter evaluates them with mj_forward).

Divergence: Genesis raises when it finds NaN (every 10 physics steps); the adapter resets envs the
engine flagged, or whose state is not finite, to the default pose, as the MuJoCo adapter does.

Domain randomization: friction through the per-env geom friction ratios (solver state, not in
get_state rows); masses and inertias per env, which needs RigidOptions(batch_links_info=True): the
scene is always built so (on a 2-core CPU no measurable step cost at 16 and 64 envs; its kernels are
compiled once, ~90 s, like the others). Pushes write the free joint's velocity.

State rows (get_state) are [time, Genesis qpos, dof velocities]. The constraint solver's warm
start is not part of them, so a restore mid-contact replays close to, not bit for bit (the H1-2
standing: 5e-10 rad apart after 10 control steps): capability ``state``, not ``exact_state``.

Kernel cache: Genesis compiles its kernels (Quadrants) on first use, then loads them from
$XDG_CACHE_HOME/quadrants (~/.cache/quadrants; QD_OFFLINE_CACHE_FILE_PATH overrides it); processed
assets go to $XDG_CACHE_HOME/genesis (GS_CACHE_FILE_PATH). CI should keep both folders. Measured
on a 2-core CPU: first import 17 s, first cart-pole build 50 s, then 80 s more for the H1-2's
contact kernels; with the cache, 9 s to import and initialise and 5 s per build.
On a CPU, Genesis runs its kernels on one thread unless QD_NUM_THREADS is set (SimConfig.n_threads
is not applied: the thread count is part of the kernel cache key, so changing it recompiles).
"""

from __future__ import annotations

import os

import numpy as np

from embody.extras import require
from embody.robots import PrivilegedState, RobotSpec, RobotState
from embody.rotations import quat_mul, quat_rotate, quat_rotate_inverse

from ..adapter import (
    PhysicsTable,
    checked_command,
    close_quietly,
    fixed_base_privileged,
    free_joint_privileged,
    full_torque,
    record_divergence,
    select_envs,
    write_free_joint,
)
from ..base import InitState, ModelError, PhysicsParams, SimConfig
from ..mujoco.model import build_model, joint_addresses, load_spec

# MuJoCo's default solref time constant [s]: Genesis would give contacts and joint limits the MJCF
# leaves unspecified its own 0.01 s; this keeps them as stiff as in the reference.
MUJOCO_TIMECONST = 0.02


def init_genesis():
    """Import Genesis and initialise it once per process (GPU when torch sees CUDA, else CPU).

    Float64 by default, like MuJoCo; EMBODY_GENESIS_PRECISION=32 trades that for GPU speed.
    """
    gs = require("genesis", "genesis")
    if not gs._initialized:
        import torch

        gs.init(
            backend=gs.gpu if torch.cuda.is_available() else gs.cpu,
            precision=os.environ.get("EMBODY_GENESIS_PRECISION", "64"),
            logging_level="warning",
        )
    return gs


def make_scene(gs, robot: RobotSpec, model, vis_options=None, batch_links_info: bool = False):
    """An unbuilt scene holding ``robot`` (and a floor for floating bases). Returns (scene, entity).

    ``batch_links_info``: per-env link masses and inertias and per-env dof gains (domain randomization)."""
    import mujoco

    integrator = mujoco.mjtIntegrator(int(model.opt.integrator)).name
    rigid = gs.options.RigidOptions(
        # Euler and implicitfast are MuJoCo's; RK4 and implicit have no Genesis twin: implicitfast is closest
        integrator=gs.integrator.Euler if integrator == "mjINT_EULER" else gs.integrator.implicitfast,
        constraint_timeconst=MUJOCO_TIMECONST,
        batch_links_info=batch_links_info,
        batch_dofs_info=batch_links_info,
    )
    sim = gs.options.SimOptions(dt=float(model.opt.timestep), substeps=1, gravity=tuple(model.opt.gravity))
    scene = gs.Scene(
        sim_options=sim, rigid_options=rigid, vis_options=vis_options or gs.options.VisOptions(), show_viewer=False
    )
    if robot.floating_base and "floor" not in {g.name for g in load_spec(robot.mjcf).geoms}:
        scene.add_entity(gs.morphs.Plane())  # the floor MuJoCo's build_model adds
    try:
        # default_armature=None: Genesis would add 0.1 rotor inertia to every joint the MJCF leaves at zero
        entity = scene.add_entity(gs.morphs.MJCF(file=str(robot.mjcf), default_armature=None))
    except Exception as e:  # Genesis wraps MuJoCo's parser; build_model has checked the file already
        raise ModelError(f"Genesis cannot load model file {robot.mjcf}: {e}") from None
    return scene, entity


class GenesisSimulator:
    """The Simulator protocol over one natively batched Genesis scene (see the module docstring for control and
    sensors)."""

    name = "genesis"
    engine = "genesis"
    capabilities = frozenset({"pd", "torque", "imu", "contact", "ee_pose", "render", "state", "physics_params", "push"})

    def __init__(self, robot: RobotSpec, config: SimConfig):
        self.robot, self.config, self.n_envs = robot, config, config.n_envs
        self.model, _ = build_model(robot, config)  # checks the file and the spec's joint names (ModelError)
        self._gs = gs = init_genesis()
        import torch

        self._torch = torch
        self.dt = float(self.model.opt.timestep) * config.decimation
        self.scene, self.entity = make_scene(gs, robot, self.model, batch_links_info=True)
        self.scene.build(n_envs=config.n_envs)
        self._index()
        self._armature0 = self.model.dof_armature[joint_addresses(self.model, robot)[1]]  # the spec's joints'
        if config.armature == "motors":  # Genesis reads the MJCF file itself: build_model has applied the table
            self.entity.set_dofs_armature(self._t(np.tile(self._armature0, (self.n_envs, 1))), self._v.tolist())
        self._nominal_links()
        self._setup_control()
        self._default_qpos = self._np(self.entity.get_qpos())[0]  # the MJCF's qpos0 ...
        self._default_qpos[self._q] = robot.default_pose  # ... at the default pose, standing
        if self._free_q is not None:
            self._default_qpos[self._free_q : self._free_q + 3] = robot.default_base_pos
        self._time = np.zeros(self.n_envs)
        self._fresh = np.ones(self.n_envs, dtype=bool)  # reset and not stepped since
        self.diverged = np.zeros(self.n_envs, dtype=bool)
        self.divergence_count = 0
        self._renderer = None
        self._reset_default(np.arange(self.n_envs))

    # -- setup ---------------------------------------------------------------------------
    def _index(self) -> None:
        """Genesis qpos/dof indices of the spec's joints (motor order) and the links holding its sites."""
        gs, e, robot = self._gs, self.entity, self.robot
        joints = [e.get_joint(n) for n in robot.joint_names]
        self._q = np.array([j.qs_idx_local[0] for j in joints])
        self._v = np.array([j.dofs_idx_local[0] for j in joints])
        self._act = robot.actuated
        self._act_dofs = self._t(self._v[self._act], dtype=self._torch.int32)
        free = [j for j in e.joints if j.type == gs.JOINT_TYPE.FREE]
        if robot.floating_base and not free:
            raise ModelError(f"{robot.mjcf}: a floating-base robot needs a free joint")
        self._free_q = free[0].qs_idx_local[0] if robot.floating_base else None
        self._free_v = free[0].dofs_idx_local[0] if robot.floating_base else None
        s = robot.sensors
        self._imu = self._site(s.imu_site)
        self._ee = self._site(s.ee_site)
        self._foot_sites = [self._site(f) for f in s.foot_sites]
        self._feet = [site[0] for site in self._foot_sites]

    def _site(self, name: str | None) -> tuple[int, np.ndarray, np.ndarray] | None:
        """(Genesis link index, position, quaternion in the link frame) of MJCF site ``name``."""
        if name is None:
            return None
        import mujoco

        m = self.model
        i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name)
        if i < 0:
            raise ModelError(f"{self.robot.mjcf} has no site {name!r} named in the {self.robot.name} sensors")
        body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(m.site_bodyid[i]))
        return self.entity.get_link(body).idx_local, m.site_pos[i].copy(), m.site_quat[i].copy()

    def _setup_control(self) -> None:
        e, robot, act = self.entity, self.robot, self._act
        limit = robot.torque_limit[act]
        e.set_dofs_force_range(self._t(-limit), self._t(limit), self._act_dofs)
        if self.config.control == "pd":
            e.set_dofs_kp(self._t(robot.kp[act]), self._act_dofs)
            e.set_dofs_kv(self._t(robot.kd[act]), self._act_dofs)
        # every other dof (unactuated joints, the free joint) stays in force mode at zero force

    # -- tensors -------------------------------------------------------------------------
    def _t(self, x, dtype=None):
        return self._torch.as_tensor(np.asarray(x), dtype=dtype or self._gs.tc_float, device=self._gs.device)

    @staticmethod
    def _np(x) -> np.ndarray:
        return x.detach().cpu().numpy().astype(np.float64)

    # -- state ---------------------------------------------------------------------------
    def _qpos_vel(self) -> tuple[np.ndarray, np.ndarray]:
        """Genesis' generalised coordinates (n, nq) and velocities (n, nv)."""
        return self._np(self.entity.get_qpos()), self._np(self.entity.get_dofs_velocity())

    def _write(self, ids: np.ndarray, qpos: np.ndarray, vel: np.ndarray, time: np.ndarray | float) -> None:
        """Put envs ``ids`` (k,) into qpos (k, nq), vel (k, nv)."""
        ids_t = self._t(ids, dtype=self._torch.int64)
        self.entity.set_qpos(self._t(qpos), envs_idx=ids_t, zero_velocity=False)
        self.entity.set_dofs_velocity(self._t(vel), envs_idx=ids_t)
        if self.config.control == "pd":  # PD targets = current pose, so torques read as at rest (as in MuJoCo's)
            self.entity.control_dofs_position(self._t(qpos[:, self._q[self._act]]), self._act_dofs, envs_idx=ids_t)
        else:
            self.entity.control_dofs_force(
                self._t(np.zeros((len(ids), len(self._act)))), self._act_dofs, envs_idx=ids_t
            )
        self._time[ids] = time
        self._fresh[ids] = True

    def _reset_default(self, ids: np.ndarray) -> None:
        if len(ids):
            nv = self.entity.n_dofs
            self._write(ids, np.tile(self._default_qpos, (len(ids), 1)), np.zeros((len(ids), nv)), 0.0)

    def get_state(self) -> np.ndarray:
        """Rows [time, qpos (Genesis order), dof velocities], (n, 1 + nq + nv)."""
        qpos, vel = self._qpos_vel()
        return np.concatenate([self._time[:, None], qpos, vel], axis=1)

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Restore ``get_state`` rows [time, qpos, dof velocities] into ``env_ids`` (all when None)."""
        ids = select_envs(self.n_envs, env_ids)
        state = np.asarray(state, dtype=np.float64).reshape(len(ids), -1)
        nq = self.entity.n_qs
        self._write(ids, state[:, 1 : 1 + nq], state[:, 1 + nq :], state[:, 0])

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        k = len(ids)
        qpos = np.tile(self._default_qpos, (k, 1))
        vel = np.zeros((k, self.entity.n_dofs))
        qpos[:, self._q] = init.joint_pos
        vel[:, self._v] = init.joint_vel
        if self._free_q is not None:  # Genesis' free joint is MuJoCo's: world linear, body angular velocity
            write_free_joint(qpos, vel, self._free_q, self._free_v, init)
        self._write(ids, qpos, vel, 0.0)

    # -- domain randomization -------------------------------------------------------------
    def _nominal_links(self) -> None:
        """The links' masses and inertias as built (the same in every env), and the base link."""
        e = self.entity
        self._batched_links = self.scene.rigid_solver.is_links_info_batched
        env0 = [0] if self._batched_links else None
        self._mass0 = e.get_links_mass(envs_idx=env0).reshape(e.n_links)  # (L,) on the device
        self._inertia0 = e.get_links_inertia(envs_idx=env0).reshape(e.n_links, 3, 3)  # in each inertial frame
        self._base_link = (
            next(j.link.idx_local for j in e.joints if j.type == self._gs.JOINT_TYPE.FREE)
            if self.robot.floating_base
            else None
        )
        self._physics = PhysicsTable(self.n_envs, self.robot, has_base=self._base_link is not None)

    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Friction: the per-env friction ratio of every geom in the scene (Genesis takes the larger
        of the two geoms' friction x ratio, as MuJoCo takes the larger friction, so the ratio scales
        every contact's). Masses: the per-env link masses and inertias (the scene is built with
        RigidOptions(batch_links_info=True)), written as nominal x scale with the added mass on the
        base link; Genesis then recomputes the inverse weights (like MuJoCo's mj_setConst). PD gains and armature:
        the per-env kp, kv and armature of the spec's dofs (the scene is built with batch_dofs_info=True)."""
        torch, e = self._torch, self.entity
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        if (params.mass_scale is not None or params.added_base_mass is not None) and not self._batched_links:
            raise ValueError("per-env masses need a scene built with RigidOptions(batch_links_info=True)")
        self._physics.update(ids, params)
        ids_t, t = self._t(ids, dtype=torch.int64), self._physics
        if params.friction is not None:
            ratio = self._t(t.friction[ids])
            solver = self.scene.rigid_solver
            solver.set_geoms_friction_ratio(ratio[:, None].expand(-1, solver.n_geoms).contiguous(), None, ids_t)
        if (params.kp_scale is not None or params.kd_scale is not None) and self.config.control == "pd":
            act = self._act  # kp first: Genesis' set_dofs_kp resets the whole PD, kv included
            e.set_dofs_kp(self._t(t.kp_scale[ids, None] * self.robot.kp[act]), self._act_dofs, envs_idx=ids_t)
            e.set_dofs_kv(self._t(t.kd_scale[ids, None] * self.robot.kd[act]), self._act_dofs, envs_idx=ids_t)
        if params.armature_scale is not None:
            scaled = t.armature_scale[ids, None] * self._armature0
            e.set_dofs_armature(self._t(scaled), self._v.tolist(), envs_idx=ids_t)
        if params.mass_scale is None and params.added_base_mass is None:
            return
        scale = self._t(t.mass_scale[ids])
        mass = scale[:, None] * self._mass0
        if self._base_link is not None:
            mass[:, self._base_link] += self._t(t.added_base_mass[ids])
        e.set_links_mass(mass, envs_idx=ids_t)
        e.set_links_inertia(scale[:, None, None, None] * self._inertia0, envs_idx=ids_t)

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Adds to the free joint's linear velocity (world frame, of the base frame's origin, as MuJoCo's)."""
        if self._free_v is None:
            raise ValueError(f"{self.robot.name} has no floating base to push")
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        ids_t, dofs = self._t(ids, dtype=self._torch.int64), [self._free_v + k for k in range(3)]
        kick = self._t(np.array(np.broadcast_to(lin_vel, (len(ids), 3))))
        self.entity.set_dofs_velocity(self.entity.get_dofs_velocity(dofs, envs_idx=ids_t) + kick, dofs, envs_idx=ids_t)

    # -- stepping ------------------------------------------------------------------------
    def step(self, command: np.ndarray) -> None:
        command, bad = checked_command(command, self.n_envs, len(self._act))
        if self.config.control == "pd":
            self.entity.control_dofs_position(self._t(command), self._act_dofs)
        else:
            limit = self.robot.torque_limit[self._act]
            self.entity.control_dofs_force(self._t(np.clip(command, -limit, limit)), self._act_dofs)
        for _ in range(self.config.decimation):
            bad |= self._physics_step()
        self._time += self.dt
        self._fresh[:] = False
        qpos, vel = self._qpos_vel()
        bad |= ~(np.isfinite(qpos).all(axis=1) & np.isfinite(vel).all(axis=1))
        self._reset_default(record_divergence(self, bad))

    def _physics_step(self) -> np.ndarray:
        """One physics step of all envs; returns (n,) the envs the engine flagged as diverged (and reset)."""
        flagged = np.zeros(self.n_envs, dtype=bool)
        while True:
            try:
                self.scene.step(update_visualizer=False)  # nothing draws this scene (see render.py)
                return flagged
            except self._gs.GenesisException:
                # Genesis checks for NaN before a step and refuses it for every env: reset the flagged
                # envs (which clears their error) and take the step again
                now = self._np(self.scene.rigid_solver.get_error_envs_mask()).astype(bool)
                if not now.any():
                    raise
                flagged |= now
                self._reset_default(np.flatnonzero(now))

    # -- observation ---------------------------------------------------------------------
    def state(self) -> RobotState:
        qpos, vel = self._qpos_vel()
        torque = full_torque(self.robot, self._np(self.entity.get_dofs_control_force(self._act_dofs)))
        state = RobotState(
            joint_pos=qpos[:, self._q],
            joint_vel=vel[:, self._v],
            joint_torque=torque,
            time=self._time.copy(),
            privileged=self._privileged(qpos, vel),
        )
        if self._imu is not None:
            state.imu_quat, state.imu_gyro, state.imu_accel = self._imu_reading()
        if self._ee is not None:
            state.ee_pos, state.ee_quat = self._site_pose(self._ee)
        return state

    def _link(self, getter: str, link: int) -> np.ndarray:
        """A per-link quantity of one link for all envs, (n, 3) or (n, 4)."""
        return self._np(getattr(self.entity, getter)(links_idx_local=[link]))[:, 0]

    def _site_pose(self, site) -> tuple[np.ndarray, np.ndarray]:
        link, pos, quat = site
        q_link = self._link("get_links_quat", link)
        return self._link("get_links_pos", link) + quat_rotate(q_link, pos), quat_mul(q_link, quat)

    def _imu_reading(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Quaternion (n, 4), gyro (n, 3) and specific force (n, 3) at the IMU site."""
        link, pos, quat = self._imu
        q_link = self._link("get_links_quat", link)
        q_site = quat_mul(q_link, quat)
        w = self._link("get_links_ang", link)  # world frame
        acc = self._link("get_links_acc", link)  # classical, at the link origin, world frame
        alpha = self._link("get_links_acc_ang", link)
        acc[self._fresh], alpha[self._fresh] = 0.0, 0.0  # not evaluated yet since the reset
        r = quat_rotate(q_link, pos)
        acc_site = acc + np.cross(alpha, r) + np.cross(w, np.cross(w, r))
        specific_force = quat_rotate_inverse(q_site, acc_site - self.model.opt.gravity)
        return q_site, quat_rotate_inverse(q_site, w), specific_force

    def _privileged(self, qpos: np.ndarray, vel: np.ndarray) -> PrivilegedState:
        n = self.n_envs
        contact = np.zeros((n, len(self._feet)))
        if self._feet:
            contact = self._np(self.entity.get_links_net_contact_force())[:, self._feet, 2]
            contact[self._fresh] = 0.0  # Genesis still holds the previous episode's contacts
        if self._free_q is None:
            return fixed_base_privileged(n, contact)
        foot_pos = np.stack([self._site_pose(f)[0] for f in self._foot_sites], axis=1) if self._foot_sites else None
        return free_joint_privileged(qpos, vel, self._free_q, self._free_v, contact, foot_pos)

    # -- rendering -----------------------------------------------------------------------
    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        from .render import Renderer

        if self._renderer is None:
            self._renderer = Renderer(self._gs, self.robot, self.model, self.config)
        qpos, _ = self._qpos_vel()
        return self._renderer.render(qpos[select_envs(self.n_envs, env_ids)], camera)

    def close(self) -> None:
        """Destroy the scene and the render scene; closing twice is harmless."""
        for scene in (getattr(self, "scene", None), getattr(getattr(self, "_renderer", None), "scene", None)):
            if scene is not None:
                scene.destroy()
        self.scene, self._renderer = None, None

    __del__ = close_quietly
