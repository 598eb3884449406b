"""MuJoCo adapter: batched stepping through mujoco.rollout's native thread pool.

Each env is one row of an mjSTATE_FULLPHYSICS state array; a control step is one rollout
of ``decimation`` physics steps over all rows, in C, with PD evaluated by the engine's
actuators at every physics step. No Python loop runs over envs on the step path.

Every control step starts from the state row alone (the solver's warm start is not carried
between rollouts), so a get_state row set into any env replays bit for bit: ``exact_state``.

An applied body wrench (capability ``applied_wrench``, ``apply_wrench``) rides in the same rollout as
MuJoCo's xfrc_applied, appended to the controls (control_spec mjSTATE_CTRL | mjSTATE_XFRC_APPLIED);
until a wrench is first set the step passes the controls alone, as fast as without the capability.

Sensor values (IMU, torques, contacts) come from the engine's sensors, which MuJoCo
evaluates at the start of each physics step: they lag the state by one physics step
(2 ms for the H1-2), like a real sensor bus.
"""

from __future__ import annotations

import copy
import os

import numpy as np

from embody.extras import require
from embody.robots import RobotSpec, RobotState

from ..adapter import (
    PhysicsTable,
    checked_command,
    close_quietly,
    fixed_scene_body,
    record_divergence,
    select_envs,
    write_free_joint,
)
from ..base import InitState, ModelError, PhysicsParams, SimConfig
from .model import build_model, joint_addresses, robot_state, state_offsets


class MujocoSimulator:
    """The Simulator protocol over MuJoCo: one mjSTATE_FULLPHYSICS row per env, stepped by ``mujoco.rollout`` (see the
    module docstring)."""

    name = "mujoco"
    engine = "mujoco"
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
            "exact_state",
            "physics_params",
            "push",
            "fixture_pose",
            "applied_wrench",
            "differentiable",
        }
    )

    def __init__(self, robot: RobotSpec, config: SimConfig):
        self._mj = mj = require("mujoco", "mujoco")
        from mujoco import rollout

        self.robot, self.config, self.n_envs = robot, config, config.n_envs
        self.model, self._sensors = build_model(robot, config)
        self.dt = float(self.model.opt.timestep) * config.decimation
        self._spec = mj.mjtState.mjSTATE_FULLPHYSICS.value
        self._ctrl_spec = mj.mjtState.mjSTATE_CTRL.value
        n, dec, ns = self.n_envs, config.decimation, mj.mj_stateSize(self.model, self._spec)
        threads = min(config.n_threads or os.cpu_count() or 1, n)
        self._pool = rollout.Rollout(nthread=0 if threads <= 1 else threads)
        self._datas = [mj.MjData(self.model) for _ in range(max(threads, 1))]
        self._models = [self.model] * n  # per-env copies replace these under domain randomization
        self._own_models = False
        self._scratch = mj.MjData(self.model)
        self._qadr, self._vadr = joint_addresses(self.model, robot)
        self._off = state_offsets(self.model)
        self._act = robot.actuated
        self._nu = self.model.nu
        self._ctrl = np.zeros((n, dec, self._nu))  # controls, then xfrc_applied once a wrench is set
        self._traj = np.zeros((n, dec, ns))
        self._traj_sensors = np.zeros((n, dec, self.model.nsensordata))
        self._base_qpos, self._base_qvel = self._free_joint_adr()
        # the default state (initial, and where diverged envs are reset): default pose, standing
        self._scratch.qpos[self._qadr] = robot.default_pose
        if self._base_qpos is not None:
            self._scratch.qpos[self._base_qpos : self._base_qpos + 3] = robot.default_base_pos
        self._default_row = self._row_of(self._scratch)
        self._state = np.tile(self._default_row, (n, 1))
        self._sensordata = np.zeros((n, self.model.nsensordata))
        self._refresh_sensors(np.array([0]))
        self._sensordata[1:] = self._sensordata[0]  # all envs start in the same state
        self.diverged = np.zeros(n, dtype=bool)
        self.divergence_count = 0
        self._renderer = None
        self._fd = None  # the finite-difference transition, made on first use (capability ``differentiable``)

    # -- state ---------------------------------------------------------------------------
    def _row_of(self, data) -> np.ndarray:
        row = np.empty(self._mj.mj_stateSize(self.model, self._spec))
        self._mj.mj_getState(self.model, data, row, self._spec)
        return row

    def _free_joint_adr(self) -> tuple[int | None, int | None]:
        """qpos and qvel addresses of the floating base's free joint."""
        if not self.robot.floating_base:
            return None, None
        free = np.flatnonzero(self.model.jnt_type == self._mj.mjtJoint.mjJNT_FREE)
        if len(free) == 0:
            raise ModelError(f"{self.robot.mjcf}: a floating-base robot needs a free joint")
        return int(self.model.jnt_qposadr[free[0]]), int(self.model.jnt_dofadr[free[0]])

    def get_state(self) -> np.ndarray:
        """Copies of the mjSTATE_FULLPHYSICS rows, (n, s) float64; exact (``exact_state``)."""
        return self._state.copy()

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        ids = select_envs(self.n_envs, env_ids)
        self._state[ids] = state
        self._refresh_sensors(ids)

    def _refresh_sensors(self, ids: np.ndarray) -> None:
        """Evaluate sensors at freshly set states (a loop over the reset envs only)."""
        q_act = self._off["qpos"] + self._qadr[self._act]
        for i in ids:
            self._mj.mj_setState(self._models[i], self._scratch, self._state[i], self._spec)
            # PD targets = current pose, so actuator forces (and IMU, contacts) read as at rest
            self._scratch.ctrl[:] = self._state[i, q_act] if self.config.control == "pd" else 0.0
            self._mj.mj_forward(self._models[i], self._scratch)
            self._sensordata[i] = self._scratch.sensordata

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        rows = np.tile(self._default_row, (len(ids), 1))
        qpos, qvel = self._qpos_qvel(rows)
        rows[:, self._off["time"]] = 0.0
        qpos[:, self._qadr] = init.joint_pos
        qvel[:, self._vadr] = init.joint_vel
        if self._base_qpos is not None:
            write_free_joint(qpos, qvel, self._base_qpos, self._base_qvel, init)
        self.set_state(rows, ids)

    def _qpos_qvel(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views of the qpos (k, nq) and qvel (k, nv) columns of state rows (k, s)."""
        q0, v0 = self._off["qpos"], self._off["qvel"]
        return rows[:, q0 : q0 + self.model.nq], rows[:, v0 : v0 + self.model.nv]

    # -- domain randomization -------------------------------------------------------------
    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Per-env model copies (made on first use) carry each env's friction, masses, armature and PD gains (the
        general actuators' gain kp and bias −kp, −kd)."""
        m, ids = self.model, np.asarray(env_ids, dtype=np.int64)
        base = self._mj.mj_name2id(m, self._mj.mjtObj.mjOBJ_BODY, self.robot.base_body or "")
        if not self._own_models:
            self._models, self._own_models = [copy.copy(m) for _ in range(self.n_envs)], True
            self._physics = PhysicsTable(self.n_envs, self.robot, has_base=base > 0)
        self._physics.update(ids, params)
        t = self._physics
        for i in ids:  # a few array writes per reset env
            mi = self._models[i]
            if params.friction is not None:
                mi.geom_friction[:, 0] = m.geom_friction[:, 0] * t.friction[i]
            mi.body_mass[1:] = m.body_mass[1:] * t.mass_scale[i]
            mi.body_inertia[1:] = m.body_inertia[1:] * t.mass_scale[i]
            mi.dof_armature[:] = m.dof_armature * t.armature_scale[i]
            if base > 0:
                mi.body_mass[base] += t.added_base_mass[i]
            if self.config.control == "pd":
                mi.actuator_gainprm[:, 0] = m.actuator_gainprm[:, 0] * t.kp_scale[i]
                mi.actuator_biasprm[:, 1] = m.actuator_biasprm[:, 1] * t.kp_scale[i]
                mi.actuator_biasprm[:, 2] = m.actuator_biasprm[:, 2] * t.kd_scale[i]

    def set_fixture_pose(self, body: str, env_ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> None:
        """Move a static scene body (a child of the world without joints) in the envs' own model copies."""
        b = fixed_scene_body(self.model, body, self.robot.mjcf)
        if not self._own_models:  # the per-env model copies of domain randomization, nominal physics
            self.set_physics(np.zeros(0, dtype=np.int64), PhysicsParams())
        pos, quat = np.asarray(pos, dtype=np.float64), np.asarray(quat, dtype=np.float64)
        for k, i in enumerate(np.asarray(env_ids, dtype=np.int64)):
            self._models[i].body_pos[b] = pos[k]
            self._models[i].body_quat[b] = quat[k] / np.linalg.norm(quat[k])

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Capability ``push``: add ``lin_vel`` (k, 3) [m/s, world frame] to the free joint's velocity; ValueError
        without a floating base."""
        if self._base_qvel is None:
            raise ValueError(f"{self.robot.name} has no floating base to push")
        v = self._off["qvel"] + self._base_qvel
        self._state[np.asarray(env_ids, dtype=np.int64), v : v + 3] += lin_vel  # MuJoCo: world frame

    def apply_wrench(self, env_ids: np.ndarray, body: str, force: np.ndarray, torque: np.ndarray) -> None:
        """Capability ``applied_wrench``: apply ``force`` (k, 3) [N] at the centre of mass of ``body`` and ``torque``
        (k, 3) [N m], both in the world frame (MuJoCo's xfrc_applied), to envs ``env_ids`` (k,) at every physics step
        until changed (resets keep it; zeros remove it); an unknown body raises ValueError."""
        mj, m = self._mj, self.model
        b = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, body)
        if b <= 0:
            names = [mj.mj_id2name(m, mj.mjtObj.mjOBJ_BODY, i) for i in range(1, m.nbody)]
            raise ValueError(f"no body {body!r} to apply a wrench to; bodies: {names}")
        if self._ctrl.shape[2] == self._nu:  # the first wrench: widen the controls by xfrc_applied (nbody x 6)
            self._ctrl = np.concatenate([self._ctrl, np.zeros((*self._ctrl.shape[:2], 6 * m.nbody))], axis=2)
            self._ctrl_spec |= mj.mjtState.mjSTATE_XFRC_APPLIED.value
        col = self._nu + 6 * b
        ids = np.asarray(env_ids, dtype=np.int64)
        self._ctrl[ids, :, col : col + 3] = np.asarray(force, dtype=np.float64)[:, None]
        self._ctrl[ids, :, col + 3 : col + 6] = np.asarray(torque, dtype=np.float64)[:, None]

    # -- stepping ------------------------------------------------------------------------
    def step(self, command: np.ndarray) -> None:
        """One rollout of ``decimation`` physics steps over all envs; envs that went non-finite are reset and flagged in
        ``diverged``."""
        command, bad_cmd = checked_command(command, self.n_envs, len(self._act))
        self._ctrl[:, :, : self._nu] = command[:, None, :]
        t_before = self._state[:, self._off["time"]].copy()
        self._pool.rollout(
            self._models,
            self._datas,
            self._state,
            self._ctrl,
            control_spec=self._ctrl_spec,
            skip_checks=True,
            nstep=self.config.decimation,
            state=self._traj,
            sensordata=self._traj_sensors,
        )
        self._state[:] = self._traj[:, -1]
        self._sensordata[:] = self._traj_sensors[:, -1]
        # MuJoCo resets a diverged mjData to qpos0 itself (time restarts); catch both cases.
        t_after = self._state[:, self._off["time"]]
        ids = record_divergence(self, bad_cmd | ~np.isfinite(self._state).all(axis=1) | (t_after < t_before))
        if len(ids):
            self.set_state(np.tile(self._default_row, (len(ids), 1)), ids)

    # -- gradients (capability ``differentiable``; sims/diff.py, sims/mujoco/diff.py) ---------------------------
    def _transition(self):
        if self._fd is None:
            from .diff import FiniteDifferenceTransition

            self._fd = FiniteDifferenceTransition(self)
        return self._fd

    def diff_state(self) -> np.ndarray:
        """(n, nq + nv + na) [qpos, qvel, act] of every env (sims/mujoco/diff.py)."""
        return self._transition().state(self._state)

    def set_diff_state(self, x: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        ids = select_envs(self.n_envs, env_ids)
        self.set_state(self._transition().rows(x, ids), ids)

    def diff_joint_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Columns of the spec's joint positions and velocities (j,) in a diff state row."""
        self._transition()  # refuses models it cannot differentiate
        return self._qadr.copy(), self.model.nq + self._vadr

    def transition(self, x: np.ndarray, u: np.ndarray, jacobians: bool):
        """Next diff states (n, d) after one control step from ``x`` under commands ``u`` (n, a), with A, B when
        ``jacobians`` (sims/diff.py); the envs' own state is left as it was."""
        return self._transition()(x, u, jacobians)

    # -- observation ---------------------------------------------------------------------
    def state(self) -> RobotState:
        qpos, qvel = self._qpos_qvel(self._state)
        free = None if self._base_qpos is None else (self._base_qpos, self._base_qvel)
        time = self._state[:, self._off["time"]]
        return robot_state(self.robot, self._sensors, qpos, qvel, self._sensordata, time, self._qadr, self._vadr, free)

    # -- rendering -----------------------------------------------------------------------
    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        """Frames (k, H, W, 3) uint8 of ``env_ids`` from ``camera`` (a model camera's name) or the tracking camera,
        tiled into one offscreen buffer per pass (sims/mujoco/render.py); each env's own model places its fixtures."""
        if self._renderer is None:
            from .render import TiledRenderer, tracking_camera

            c = self.config
            self._renderer = TiledRenderer(self.model, c.render_width, c.render_height, c.shadows, c.reflections)
            self._cam = tracking_camera(self.model, self.robot)
        return self._renderer.render(self._forward_states(select_envs(self.n_envs, env_ids)), camera or self._cam)

    def _forward_states(self, ids: np.ndarray):
        """(model, data) of each env in turn, the one scratch MjData forward-computed at the env's state."""
        for i in ids:
            self._mj.mj_setState(self._models[i], self._scratch, self._state[i], self._spec)
            self._mj.mj_forward(self._models[i], self._scratch)
            yield self._models[i], self._scratch

    def close(self) -> None:
        if self._fd is not None:
            self._fd.close()
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    __del__ = close_quietly
