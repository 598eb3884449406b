"""Gymnasium's MuJoCo humanoid (Humanoid-v5's humanoid.xml) as a RobotSpec, for benchmarks.

The model file is the one shipped inside the installed gymnasium package, never a copy in
this repository. It declares ``<motor>`` actuators, but embody's adapters build their own
from the spec (a model file must hold none), so the conversion is:

* the spec's ``mjcf`` is a derived copy of humanoid.xml with its ``<actuator>`` section cut
  out, written once (atomically) to ``cache_dir("gym_humanoid")`` (embody.cache) and keyed by a hash of
  the source; everything else (RK4, 0.003 s timestep, PGS solver, armature, damping,
  stiffness, tendons, floor) is byte-for-byte gymnasium's;
* joints are in gymnasium's actuator order, so an action column is a gymnasium ctrl column;
* a gymnasium motor applies ``gear * ctrl`` with ``ctrl`` in ctrlrange ±0.4, so each joint's
  ``torque_limit`` is ``0.4 * gear`` [N·m] (40 for gear 100), and in torque control the
  command ``gear * ctrl`` reproduces gymnasium's joint force exactly;
* the humanoid has no PD gains (kp = kd = 0): use torque control.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from embody.cache import cache_dir, write_cached

from .spec import Joint, RobotSpec

VELOCITY_LIMIT = 100.0  # rad/s; the model declares none
UNLIMITED = 1e9  # the range of a joint without limits


def gymnasium_xml(name: str = "humanoid.xml") -> Path:
    """Path of a MuJoCo model file inside the installed gymnasium package (ImportError without gymnasium)."""
    import gymnasium

    return Path(os.path.dirname(gymnasium.__file__)) / "envs/mujoco/assets" / name


def actuator_free_text(source: Path) -> str:
    """The text of ``source`` without its ``<actuator>`` section."""
    stripped, n = re.subn(r"<actuator>.*?</actuator>", "", source.read_text(), flags=re.S)
    if n != 1:
        raise ValueError(f"{source}: expected one <actuator> section, found {n}")
    return stripped


def actuator_free_xml(source: Path, cache: Path | None = None) -> Path:
    """A copy of ``source`` without its ``<actuator>`` section, cached by content hash."""
    return write_cached(cache or cache_dir("gym_humanoid"), actuator_free_text(source), stem=source.stem)


def motor_torque_limits(m) -> dict[int, float]:
    """Joint id → gear · ctrlrange [N·m] of each of gymnasium's ``<motor>`` actuators."""
    return {int(m.actuator_trnid[i, 0]): float(m.actuator_ctrlrange[i, 1] * m.actuator_gear[i, 0]) for i in range(m.nu)}


def model_joint(m, j: int, torque_limits: dict[int, float]) -> Joint:
    """Joint ``j`` of MjModel ``m`` as a spec Joint without PD gains: its range (±1e9 when unlimited), default
    qpos0, torque limit from ``torque_limits`` (encoder-only when absent)."""
    import mujoco

    lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-UNLIMITED, UNLIMITED)
    return Joint(
        mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j),
        lower=float(lo),
        upper=float(hi),
        velocity_limit=VELOCITY_LIMIT,
        kp=0.0,
        kd=0.0,
        torque_limit=torque_limits.get(j, 0.0),
        default=float(m.qpos0[m.jnt_qposadr[j]]),
        actuated=j in torque_limits,
    )


def make_spec() -> RobotSpec:
    """The spec described in the module docstring: 17 torque-controlled joints in gymnasium's actuator
    order, groups ``abdomen``, ``legs``, ``arms``. Needs gymnasium and mujoco; writes the
    actuator-free model copy to the cache on first use."""
    import mujoco

    source = gymnasium_xml()
    m = mujoco.MjModel.from_xml_path(str(source))
    torque = motor_torque_limits(m)
    joints = [model_joint(m, int(m.actuator_trnid[i, 0]), torque) for i in range(m.nu)]  # gymnasium's actuator order
    return RobotSpec(
        name="gym_humanoid",
        joints=tuple(joints),
        mjcf=actuator_free_xml(source),
        floating_base=True,
        groups={"abdomen": (0, 1, 2), "legs": tuple(range(3, 11)), "arms": tuple(range(11, 17))},
        base_body="torso",
        default_base_pos=tuple(float(x) for x in m.qpos0[:3]),  # the free joint comes first: (0, 0, 1.4)
        description="gymnasium's Humanoid-v5 model (humanoid.xml), torque-controlled, for benchmarks",
    )
