"""The Simulator protocol: one batched interface over every physics engine.

Shapes: ``n`` envs, ``j`` spec joints (hardware motor order), ``a`` actuated joints, ``k`` envs
addressed by a call (``env_ids``), ``s`` the width of an adapter's get_state row.
Every adapter must pass tests/sims/test_conformance.py; sims/adapter.py holds the checks and
bookkeeping the batched adapters share.

State restore comes in two strengths. ``state``: set_state puts back a get_state row (the same
state to rounding); what an engine keeps outside the row (PyBullet's contact points and solver
warm start, Genesis' constraint warm start) can make a replay in contact drift. ``exact_state``:
any row, set into any env at any later time, replays bit for bit. A task or test that needs
identical replays asks for ``exact_state``; today MuJoCo offers it (its rollout starts every
control step from the row alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

from embody import exits
from embody.robots import RobotSpec, RobotState

CAPABILITIES = {
    "pd": "PD position control evaluated every physics step",
    "torque": "joint torque control",
    "imu": "torso IMU (quaternion, gyroscope, accelerometer)",
    "contact": "contact forces at the spec's foot sites",
    "ee_pose": "end-effector pose",
    "wrench": "wrist force/torque sensing",
    "render": "RGB camera rendering",
    "state": "full-state get/set (set_state restores a get_state row to rounding)",
    "exact_state": "bit-exact restore: a get_state row set into any env, at any later time, replays bit for bit",
    "physics_params": "per-env friction, added base mass, link mass scale and PD gain scales (domain randomization)",
    "push": "velocity kicks to the floating base",
    "fixture_pose": "per-env pose of a fixed scene body (the peg board)",
    "applied_wrench": "an external force and torque on a named body, held at every physics step until changed",
    "differentiable": "transition Jacobians: gradients through the step (sims/diff.py)",
}


class UnsupportedTask(ValueError):
    """A simulator lacks a capability a task needs; the message names it."""

    exit_code = exits.INPUT


def check_capabilities(sim_name: str, offered: frozenset[str], task_name: str, needed: set[str]) -> None:
    """Raise UnsupportedTask naming (and describing) every capability in ``needed`` not ``offered``."""
    missing = sorted(set(needed) - set(offered))
    if missing:
        what = "; ".join(f"{m} ({CAPABILITIES.get(m, '?')})" for m in missing)
        raise UnsupportedTask(f"simulator {sim_name!r} cannot serve task {task_name!r}: it lacks {what}")


class ModelError(ValueError):
    """A model file is missing or malformed; the message names the file and the engine's complaint."""

    exit_code = exits.INPUT


@dataclass
class SimConfig:
    """Engine-independent simulation settings (a task sets these; users override with --set)."""

    n_envs: int = 1
    physics_dt: float | None = None  # None: the model file's timestep
    decimation: int = 1  # physics steps per control step
    control: Literal["pd", "torque"] = "pd"
    armature: Literal["model", "motors"] = "model"  # rotor inertia: the model file's, or the spec's motor table
    n_threads: int = 0  # 0: one per core
    render_width: int = 320
    render_height: int = 240
    shadows: bool = False  # off by default: ~20x faster headless video
    reflections: bool = False  # reflective floors (Gymnasium's models): off by default, 1.7x the hopper's frames/s
    multisample: bool = False


@dataclass
class InitState:
    """A reset target in RobotState conventions (k = number of envs being reset).

    joint_pos, joint_vel: (k, j); base_pos (k, 3) world; base_quat (k, 4) w,x,y,z;
    base_lin_vel (k, 3) world frame; base_ang_vel (k, 3) base frame. Base fields are
    ignored for fixed-base robots and default to the model's pose when None.
    """

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    base_pos: np.ndarray | None = None
    base_quat: np.ndarray | None = None
    base_lin_vel: np.ndarray | None = None
    base_ang_vel: np.ndarray | None = None


@dataclass
class PhysicsParams:
    """Per-env physical parameters for domain randomization (k = number of envs being set).

    Each field is relative to the model file's nominal value, never cumulative: setting
    ``friction=1`` restores the nominal friction. A None field leaves that parameter as is.

    friction:        (k,) multiplier of the sliding friction of every robot–scene contact
    added_base_mass: (k,) kg added to the base body (after mass_scale)
    mass_scale:      (k,) multiplier of every robot link's mass and rotational inertia
    kp_scale:        (k,) multiplier of every actuated joint's PD stiffness (``pd`` control; actuator randomization)
    kd_scale:        (k,) multiplier of every actuated joint's PD damping (``pd`` control)
    armature_scale:  (k,) multiplier of every joint's armature (its motor's reflected rotor inertia)
    """

    friction: np.ndarray | None = None
    added_base_mass: np.ndarray | None = None
    mass_scale: np.ndarray | None = None
    kp_scale: np.ndarray | None = None
    kd_scale: np.ndarray | None = None
    armature_scale: np.ndarray | None = None


@runtime_checkable
class Simulator(Protocol):
    """A batch of ``n_envs`` identical scenes holding one robot each.

    ``step`` takes one control-period command for the actuated joints — PD position targets
    [rad] in ``pd`` mode (gains from the RobotSpec, torque-limited) or joint torques [N m] in
    ``torque`` mode — and advances ``decimation`` physics steps. Envs whose command or physics
    became non-finite are reset to the model's default and flagged in ``diverged`` until the
    next step. ``env_ids`` are always (k,) integer arrays of env indices.
    """

    name: ClassVar[str]
    engine: ClassVar[str]  # the Python module of the physics engine (its absence: extra missing)
    capabilities: ClassVar[frozenset[str]]  # keys of CAPABILITIES
    robot: RobotSpec
    config: SimConfig
    n_envs: int
    dt: float  # control period = physics_dt * decimation [s]
    diverged: np.ndarray  # (n,) bool, set by the last step
    divergence_count: int  # envs reset for non-finite physics since construction

    def reset(self, env_ids: np.ndarray, init: InitState) -> None:
        """Put the envs ``env_ids`` (k,) into ``init`` (k rows) and zero their clocks."""

    def step(self, command: np.ndarray) -> None:
        """Advance all envs one control period. command: (n, a) float; a wrong shape raises ValueError."""

    def state(self) -> RobotState:
        """The batched RobotState, (n, ...) arrays with the privileged part filled in; its arrays
        are copies that outlive the next step."""

    def get_state(self) -> np.ndarray:
        """Full engine state, (n, s) float64; the layout is adapter-specific (capability ``state``,
        and ``exact_state`` where rows replay bit for bit)."""

    def set_state(self, state: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Restore rows of get_state(), (k, s), into ``env_ids`` (k,) (all envs when None);
        sensors then read as at rest in that state."""

    def render(self, env_ids: np.ndarray | None = None, camera: str | None = None) -> np.ndarray:
        """RGB frames (k, H, W, 3) uint8 of envs ``env_ids`` (all when None), H, W from SimConfig;
        ``camera`` names an MJCF camera (an unknown name raises ValueError), None the default
        camera tracking the robot's base."""

    def close(self) -> None:
        """Release the engine (clients, threads, renderers); closing twice is harmless."""


class Randomizable(Protocol):
    """Optional methods, offered by adapters whose ``capabilities`` name them."""

    def set_physics(self, env_ids: np.ndarray, params: PhysicsParams) -> None:
        """Capability ``physics_params``: set the physical parameters of envs ``env_ids`` (k,); a None
        field keeps its value; added mass on a robot without a floating base raises ValueError."""

    def push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        """Capability ``push``: add ``lin_vel`` (k, 3) [m/s, world frame] to the base velocity of envs
        ``env_ids`` (k,) now; a robot without a floating base raises ValueError."""

    def set_fixture_pose(self, body: str, env_ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> None:
        """Capability ``fixture_pose``: move the fixed scene body ``body`` of envs ``env_ids``
        to ``pos`` (k, 3) [m, world frame], ``quat`` (k, 4) w,x,y,z (normalised here); a body that is
        not a static child of the world raises ValueError."""

    def apply_wrench(self, env_ids: np.ndarray, body: str, force: np.ndarray, torque: np.ndarray) -> None:
        """Capability ``applied_wrench``: apply ``force`` (k, 3) [N] at the centre of mass of the body ``body`` and
        ``torque`` (k, 3) [N m], both in the world frame, to envs ``env_ids`` (k,) at every physics step until the
        next call for that body and env (resets keep it; zeros remove it); an unknown body raises ValueError."""
