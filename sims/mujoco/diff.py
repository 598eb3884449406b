"""MuJoCo's transition Jacobians for ``sims/diff.py``: values from the adapter's own rollout, derivatives from
MuJoCo's finite differences (``mjd_transitionFD``, centred, in C, through the whole step: contacts, constraints and
actuators included).

Why finite differences in C rather than MJX's autodiff (measured for issue 24 on this machine's CPU): MJX's reverse
mode fails on models with contacts (the constraint solver's ``while_loop``) and its forward mode costs one tangent per
state and control dimension, as these differences do, but after seconds of compilation and with JAX beside torch;
``mjd_transitionFD`` costs 20–70 µs per physics step on the small models and agrees with MJX's Jacobians to 1e-7.

State layout ``x`` = [qpos (nq), qvel (nv), act (na)]: MuJoCo's tangent space, which equals qpos only without free or
ball joints (quaternions); models with them are refused (the floating-base humanoids are not differentiable yet).
A control step of ``decimation`` physics steps chains the Jacobians: A = A_d ⋯ A_1, B = Σ_k A_d ⋯ A_{k+1} B_k.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..base import UnsupportedTask


class FiniteDifferenceTransition:
    """``transition`` for a MujocoSimulator (see sims/diff.py); ``eps`` is the finite-difference step."""

    def __init__(self, sim, eps: float = 1e-6):
        mj, m = sim._mj, sim.model
        if m.nq != m.nv:
            kinds = {int(mj.mjtJoint.mjJNT_FREE): "free", int(mj.mjtJoint.mjJNT_BALL): "ball"}
            names = [
                f"{mj.mj_id2name(m, mj.mjtObj.mjOBJ_JOINT, j)} ({kinds[int(t)]})"
                for j, t in enumerate(m.jnt_type)
                if int(t) in kinds
            ]
            raise UnsupportedTask(
                f"{sim.robot.mjcf}: the differentiable MuJoCo step needs qpos = tangent space (no free or ball joints); "
                f"this model has {', '.join(names)}"
            )
        if m.opt.integrator == mj.mjtIntegrator.mjINT_RK4:
            raise UnsupportedTask(
                f"{sim.robot.mjcf}: MuJoCo's transition derivatives do not support the RK4 integrator; "
                "use Euler or implicitfast in the model's <option>"
            )
        self.sim, self.eps = sim, eps
        self._mj = mj
        self._nx = 2 * m.nv + m.na
        q0, v0, a0 = sim._off["qpos"], sim._off["qvel"], sim._off["act"]
        self._cols = np.r_[q0 : q0 + m.nq, v0 : v0 + m.nv, a0 : a0 + m.na]  # x's columns in a state row
        self._threads = max(1, len(sim._datas))
        self._datas = [mj.MjData(m) for _ in range(self._threads)]
        self._executor = ThreadPoolExecutor(self._threads) if self._threads > 1 else None

    def state(self, rows: np.ndarray) -> np.ndarray:
        """x (k, d) of state rows (k, s)."""
        return rows[:, self._cols].copy()

    def rows(self, x: np.ndarray, env_ids: np.ndarray) -> np.ndarray:
        """The simulator's state rows of ``env_ids`` with x (k, d) written in."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (len(env_ids), self._nx):
            raise ValueError(f"diff state must have shape ({len(env_ids)}, {self._nx}), got {x.shape}")
        rows = self.sim._state[env_ids].copy()
        rows[:, self._cols] = x
        return rows

    def __call__(self, x: np.ndarray, u: np.ndarray, jacobians: bool):
        sim = self.sim
        n, dec = sim.n_envs, sim.config.decimation
        u = np.asarray(u, dtype=np.float64)
        if u.shape != (n, sim._nu):
            raise ValueError(f"commands must have shape ({n}, {sim._nu}), got {u.shape}")
        rows = self.rows(x, np.arange(n))
        ctrl = sim._ctrl.copy()  # an applied wrench rides along, as in step
        ctrl[:, :, : sim._nu] = u[:, None, :]
        traj = np.empty((n, dec, rows.shape[1]))
        sim._pool.rollout(
            sim._models, sim._datas, rows, ctrl, control_spec=sim._ctrl_spec, skip_checks=True, nstep=dec, state=traj
        )
        x_next = traj[:, -1, self._cols]
        if not jacobians:
            return x_next, None, None
        starts = np.concatenate([rows[:, None], traj[:, :-1]], axis=1)  # (n, dec, s): the state before each step
        A = np.empty((n, self._nx, self._nx))
        B = np.empty((n, self._nx, sim._nu))
        chunks = np.array_split(np.arange(n), self._threads)
        work = [(self._datas[t], ids, starts, ctrl, A, B) for t, ids in enumerate(chunks) if len(ids)]
        if self._executor is None:
            for args in work:
                self._jacobians(*args)
        else:
            list(self._executor.map(lambda args: self._jacobians(*args), work))
        return x_next, A, B

    def _jacobians(self, data, ids, starts, ctrl, A, B) -> None:
        """Chain each physics step's (A_k, B_k) of envs ``ids`` into A, B (written in place)."""
        mj, sim = self._mj, self.sim
        full, ctrl_spec = mj.mjtState.mjSTATE_FULLPHYSICS.value, sim._ctrl_spec
        Ak, Bk = np.empty((self._nx, self._nx)), np.empty((self._nx, sim._nu))
        for i in ids:
            m = sim._models[i]
            a, b = np.eye(self._nx), np.zeros((self._nx, sim._nu))
            for k in range(starts.shape[1]):
                mj.mj_resetData(m, data)  # no warm start carried, as in the rollout
                mj.mj_setState(m, data, starts[i, k], full)
                mj.mj_setState(m, data, ctrl[i, k], ctrl_spec)
                mj.mjd_transitionFD(m, data, self.eps, True, Ak, Bk, None, None)
                a, b = Ak @ a, Ak @ b + Bk
            A[i], B[i] = a, b

    def close(self) -> None:
        # Without waiting: close also runs from the simulator's __del__, which the garbage collector may call on
        # a thread starting up inside threading's _active_limbo_lock; joining workers that need that lock to exit
        # deadlocked a CI run (a new executor's submit waited on the same lock). Idle workers exit by themselves.
        if self._executor is not None:
            self._executor.shutdown(wait=False)
