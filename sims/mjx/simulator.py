"""MJX adapter (``--sim mjx``): MuJoCo's own physics in JAX, every env in one XLA program, on GPU when JAX has one.

The model is the MuJoCo adapter's (``build_model``: same actuators, sensors, floor), placed on the device with
``mjx.put_model(impl="jax")``. A control step is one jitted call: ``decimation`` physics steps in a
``fori_loop`` (the count is an argument, so one compilation serves every decimation and timestep) of
``vmap(mjx.step)`` over envs, each env with its own copy of the randomized model fields. Arrays stay on the device
between steps; what the task reads (qpos, qvel, sensordata) comes back to the host once per control step, and a
reset or push goes up once before the next step. Those copies are the host cost of this path, measured by
``embody bench gpu`` (``host_copy_ms``).

Precision is JAX's: float32 unless ``jax_enable_x64`` is set (the GPU default MJX is built for). Time is kept on
the host in float64. Compilation costs 20–30 s for the H1-2 on a CPU; jitted functions are shared by every
simulator of one process with the same model structure and env bucket (``padded``), and JAX's persistent cache
(``JAX_COMPILATION_CACHE_DIR``) keeps them across processes.

A get_state row is [time, qpos, qvel, act, qacc_warmstart]: everything ``mjx.step`` reads besides the controls, so a
row set into any env replays bit for bit (``exact_state``). Sensors lag the state by one physics step, as in the MuJoCo
adapter. Models with collision pairs MJX lacks (the peg board's cylinder against boxes) are refused by name.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np

from embody.extras import require
from embody.robots import RobotSpec, RobotState

from ..adapter import PhysicsTable, checked_command, close_quietly, record_divergence, select_envs, write_free_joint
from ..base import InitState, PhysicsParams, SimConfig, UnsupportedTask
from ..mujoco.model import build_model, joint_addresses, robot_state

# model fields each env carries its own copy of (domain randomization)
PER_ENV = ("geom_friction", "body_mass", "body_inertia", "dof_armature", "actuator_gainprm", "actuator_biasprm")
ROW = ("qpos", "qvel", "act", "qacc_warmstart")  # a get_state row after its time column, in this order


def padded(n_envs: int) -> int:
    """The device batch for ``n_envs``: at least 4, a power of two up to 64, then a multiple of 64. Every shape
    compiles anew; buckets let simulators of nearby sizes share one compilation (the extra rows are idle envs)."""
    if n_envs <= 64:
        return max(4, 1 << (n_envs - 1).bit_length())
    return -(-n_envs // 64) * 64


def _import():
    """jax and mujoco.mjx; MJX prints a line about the optional Warp backend on import, kept off stdout."""
    jax = require("jax", "mjx")
    with contextlib.redirect_stdout(io.StringIO()):
        mjx = require("mujoco.mjx", "mjx")
    return jax, mjx


_KERNELS: dict = {}


def kernels():
    """The jitted control step over all envs (module-level, so that every simulator shares its cache)."""
    if not _KERNELS:
        jax, mjx = _import()

        @jax.jit
        def control_step(mx, p, d, ctrl, nstep):
            d = d.replace(ctrl=ctrl)
            one = jax.vmap(lambda p, d: mjx.step(mx.replace(**p), d))  # each env its own randomized fields
            return jax.lax.fori_loop(0, nstep, lambda _, d: one(p, d), d)

        _KERNELS.update(control_step=control_step)
    return _KERNELS


class MjxSimulator:
    """The Simulator protocol over MJX (module docstring): device arrays, host mirrors of what the task reads."""

    name = "mjx"
    engine = "mujoco.mjx"
    capabilities = frozenset(
        {
            "pd",
            "torque",
            "imu",
            "contact",
            "ee_pose",
            "render",
            "state",
            "exact_state",
            "physics_params",
            "push",
            "applied_wrench",
        }
    )

    def __init__(self, robot: RobotSpec, config: SimConfig):
        self._jax, mjx = _import()
        self.robot, self.config, self.n_envs = robot, config, config.n_envs
        self.model, self._sensors = build_model(robot, config)
        try:
            self._mx = mjx.put_model(self.model, impl="jax")
        except NotImplementedError as e:  # e.g. "(mjGEOM_CYLINDER, mjGEOM_BOX) collisions not implemented."
            what = f"simulator 'mjx' cannot simulate {robot.name} ({robot.mjcf}): MJX does not implement {e}"
            raise UnsupportedTask(what) from None
        self.dt = float(self.model.opt.timestep) * config.decimation
        self._k = kernels()
        self._qadr, self._vadr = joint_addresses(self.model, robot)
        self._act = robot.actuated
        self._base_qpos, self._base_qvel = self._free_joint_adr()
        n, nb, jnp = self.n_envs, padded(self.n_envs), self._jax.numpy
        d0 = mjx.make_data(self._mx)
        self._d = self._jax.tree.map(lambda x: jnp.stack([x] * nb), d0)
        # every argument committed to one device: the jit cache tells committed from uncommitted arrays apart
        self._device, self._dtype = self._d.qpos.devices().pop(), self._d.qpos.dtype
        self._still = self._mx.replace(opt=self._mx.opt.replace(timestep=self._mx.opt.timestep * 0))
        self._physics = PhysicsTable(n, robot, has_base=self._base_body() > 0)
        self._write_physics()
        self._widths = np.cumsum([0] + [getattr(d0, f).shape[0] for f in ROW])
        self._default = np.concatenate([np.asarray(getattr(d0, f), np.float64) for f in ROW])
        qpos = self._default[self._col("qpos")]
        qpos[self._qadr] = robot.default_pose
        if self._base_qpos is not None:
            qpos[self._base_qpos : self._base_qpos + 3] = robot.default_base_pos
        self._rows = np.tile(self._default, (n, 1))  # host mirror of the device state (float64)
        self._time = np.zeros(n)
        self._sensordata = np.zeros((n, self.model.nsensordata))
        self._upload, self._stale = True, np.ones(n, dtype=bool)  # stale: sensors to recompute before reading
        self.diverged = np.zeros(n, dtype=bool)
        self.divergence_count = 0
        self._renderer = None
        self._scratch = None

    def _free_joint_adr(self) -> tuple[int | None, int | None]:
        if not self.robot.floating_base:
            return None, None
        free = np.flatnonzero(self.model.jnt_type == 0)  # mjJNT_FREE
        return int(self.model.jnt_qposadr[free[0]]), int(self.model.jnt_dofadr[free[0]])

    def _put(self, x: np.ndarray, fill: float | np.ndarray = 0.0):
        """Host rows (n, ...) onto the device as (padded n, ...), the idle rows filled with ``fill``."""
        x = np.asarray(x)
        pad = np.broadcast_to(np.asarray(fill, x.dtype), (padded(self.n_envs) - len(x), *x.shape[1:]))
        out = np.concatenate([x, pad]).astype(self._dtype if x.dtype.kind == "f" else x.dtype)
        return self._jax.device_put(out, self._device)

    def _base_body(self) -> int:
        return self.model.body(self.robot.base_body).id if self.robot.base_body else 0

    def _col(self, field: str) -> slice:
        i = ROW.index(field)
        return slice(int(self._widths[i]), int(self._widths[i + 1]))

    # -- state ---------------------------------------------------------------------------
    def get_state(self) -> np.ndarray:
        """Copies of the state rows (n, 1 + nq + nv + na + nv) float64: time, then ROW (module docstring); exact
        (``exact_state``)."""
        return np.concatenate([self._time[:, None], self._rows], axis=1)

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        state = np.asarray(state, dtype=np.float64)
        self._set(select_envs(self.n_envs, env_ids), state[:, 1:], state[:, 0])

    def _set(self, ids: np.ndarray, rows: np.ndarray, time: np.ndarray | float) -> None:
        self._rows[ids], self._time[ids] = rows, time
        self._upload, self._stale[ids] = True, True

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        ids = np.asarray(env_ids, dtype=np.int64)
        if ids.size == 0:
            return
        rows = np.tile(self._default, (len(ids), 1))
        qpos, qvel = rows[:, self._col("qpos")], rows[:, self._col("qvel")]
        qpos[:, self._qadr] = init.joint_pos
        qvel[:, self._vadr] = init.joint_vel
        if self._base_qpos is not None:
            write_free_joint(qpos, qvel, self._base_qpos, self._base_qvel, init)
        self._set(ids, rows, 0.0)

    def _sync(self) -> None:
        """Write the host rows to the device if they changed; recompute sensors of the envs set since the last
        step (PD targets = their current pose, so actuator forces read as at rest)."""
        if self._upload:
            cols = {f: self._col(f) for f in ROW}  # the idle rows stand in the default state
            self._d = self._d.replace(**{f: self._put(self._rows[:, c], self._default[c]) for f, c in cols.items()})
            self._upload = False
        if self._stale.any():
            q = self._rows[:, self._col("qpos")][:, self._qadr[self._act]]
            ctrl = q if self.config.control == "pd" else np.zeros_like(q)
            # one physics step of zero length: MJX's forward pass, compiled once with the step itself
            fresh = self._k["control_step"](self._still, self._p, self._d, self._put(ctrl), 1).sensordata
            fresh = np.asarray(fresh, np.float64)[: self.n_envs]
            self._sensordata[self._stale] = fresh[self._stale]
            self._stale[:] = False

    # -- domain randomization -------------------------------------------------------------
    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Each env's friction, masses, armature and PD gains (the general actuators' gain kp and bias −kp, −kd), as
        the MuJoCo adapter writes them into its per-env models."""
        self._physics.update(np.asarray(env_ids, dtype=np.int64), params)
        self._write_physics()

    def _write_physics(self) -> None:
        """The per-env model fields (PER_ENV) from the physics table, onto the device."""
        m, t, n, base = self.model, self._physics, self.n_envs, self._base_body()
        body_mass = m.body_mass[None].repeat(n, 0)
        body_mass[:, 1:] *= t.mass_scale[:, None]
        if base > 0:
            body_mass[:, base] += t.added_base_mass
        inertia = m.body_inertia[None].repeat(n, 0)
        inertia[:, 1:] *= t.mass_scale[:, None, None]
        friction = m.geom_friction[None].repeat(n, 0)
        friction[:, :, 0] *= t.friction[:, None]
        gain, bias = m.actuator_gainprm[None].repeat(n, 0), m.actuator_biasprm[None].repeat(n, 0)
        if self.config.control == "pd":
            gain[:, :, 0] *= t.kp_scale[:, None]
            bias[:, :, 1] *= t.kp_scale[:, None]
            bias[:, :, 2] *= t.kd_scale[:, None]
        values = dict(
            geom_friction=friction,
            body_mass=body_mass,
            body_inertia=inertia,
            dof_armature=m.dof_armature[None] * t.armature_scale[:, None],
            actuator_gainprm=gain,
            actuator_biasprm=bias,
        )
        self._p = {f: self._put(v, getattr(m, f)) for f, v in values.items()}

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Capability ``push``: add ``lin_vel`` (k, 3) [m/s, world frame] to the free joint's velocity."""
        if self._base_qvel is None:
            raise ValueError(f"{self.robot.name} has no floating base to push")
        v = self._col("qvel").start + self._base_qvel
        self._rows[np.asarray(env_ids, dtype=np.int64), v : v + 3] += lin_vel
        self._upload = True

    def apply_wrench(self, env_ids: np.ndarray, body: str, force: np.ndarray, torque: np.ndarray) -> None:
        """Capability ``applied_wrench``: ``force`` (k, 3) [N] at the centre of mass of ``body`` and ``torque`` (k, 3)
        [N m], world frame, held at every physics step until changed (MJX's xfrc_applied)."""
        try:
            b = self.model.body(body).id
        except KeyError:
            b = 0
        if b <= 0:
            names = [self.model.body(i).name for i in range(1, self.model.nbody)]
            raise ValueError(f"no body {body!r} to apply a wrench to; bodies: {names}")
        ids = np.asarray(env_ids, dtype=np.int64)
        wrench = np.concatenate([force, torque], axis=1)
        xfrc = self._d.xfrc_applied.at[ids, b].set(wrench.astype(self._dtype))
        self._d = self._d.replace(xfrc_applied=xfrc)

    # -- stepping ------------------------------------------------------------------------
    def step(self, command: np.ndarray) -> None:
        """``decimation`` physics steps of every env in one device call; envs that went non-finite are reset and
        flagged in ``diverged``."""
        command, bad_cmd = checked_command(command, self.n_envs, len(self._act))
        self._sync()
        self._d = self._k["control_step"](self._mx, self._p, self._d, self._put(command), self.config.decimation)
        host = self._jax.device_get(tuple(getattr(self._d, f) for f in (*ROW, "sensordata")))
        self._rows[:] = np.concatenate(host[: len(ROW)], axis=1)[: self.n_envs]
        self._sensordata[:] = host[-1][: self.n_envs]
        self._time += self.dt
        ids = record_divergence(self, bad_cmd | ~np.isfinite(self._rows).all(axis=1))
        if len(ids):
            self._set(ids, np.tile(self._default, (len(ids), 1)), 0.0)

    # -- observation ---------------------------------------------------------------------
    def state(self) -> RobotState:
        self._sync()
        qpos, qvel = self._rows[:, self._col("qpos")], self._rows[:, self._col("qvel")]
        free = None if self._base_qpos is None else (self._base_qpos, self._base_qvel)
        return robot_state(
            self.robot, self._sensors, qpos, qvel, self._sensordata, self._time, self._qadr, self._vadr, free
        )

    # -- rendering -----------------------------------------------------------------------
    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        """Frames (k, H, W, 3) uint8, drawn by MuJoCo's tiled renderer on the host from the mirrored states."""
        if self._renderer is None:
            from ..mujoco.render import TiledRenderer, tracking_camera

            c, mj = self.config, require("mujoco", "mjx")
            self._renderer = TiledRenderer(self.model, c.render_width, c.render_height, c.shadows, c.reflections)
            self._cam, self._scratch = tracking_camera(self.model, self.robot), mj.MjData(self.model)
        self._sync()
        return self._renderer.render(self._forward_states(select_envs(self.n_envs, env_ids)), camera or self._cam)

    def _forward_states(self, ids: np.ndarray):
        import mujoco

        q, v = self._col("qpos"), self._col("qvel")
        for i in ids:
            self._scratch.qpos[:], self._scratch.qvel[:] = self._rows[i, q], self._rows[i, v]
            mujoco.mj_forward(self.model, self._scratch)
            yield self.model, self._scratch

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    __del__ = close_quietly
