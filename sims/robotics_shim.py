"""A narrow fix for Gymnasium-Robotics ≤ 1.4.2 on MuJoCo ≥ 3.12, switched on only where a probe finds the bug.

``gymnasium_robotics.utils.mujoco_utils.{get,set}_joint_{qpos,qvel}`` test
``model.jnt_type[i] in (mjJNT_HINGE, mjJNT_SLIDE)``: the enum lands on the left of a comparison with a numpy
integer, which is False since MuJoCo 3.12, so every Fetch, Hand and Kitchen task fails an assertion at reset.
Upstream fixed it after 1.4.2 (the joint type read as ``int``). ``apply()`` probes the comparison exactly as the
library makes it and, only when it fails, replaces those four functions with versions that read the joint type
as an ``int`` (same results otherwise; a ball joint's velocity has 3 values, not the 4 the old getter took).
"""

from __future__ import annotations

import numpy as np

_WIDTHS = {"qpos": {0: 7, 1: 4}, "qvel": {0: 6, 1: 3}}  # free, ball; hinge and slide: 1
_state = {"applied": None}


def broken() -> bool:
    """True when MuJoCo's joint-type enum compares unequal to a numpy integer of the same value on the left."""
    import mujoco

    hinge, slide = mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE
    return np.int32(int(hinge)) not in (hinge, slide)


def _joint(model, name: str, kind: str) -> tuple[int, int]:
    import mujoco

    joint_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
    if joint_id == -1:
        raise ValueError(f"Joint with name '{name}' is not part of the model!")
    address = (model.jnt_qposadr if kind == "qpos" else model.jnt_dofadr)[joint_id]
    return int(address), _WIDTHS[kind].get(int(model.jnt_type[joint_id]), 1)


def get_joint_qpos(model, data, name):
    start, width = _joint(model, name, "qpos")
    return data.qpos[start : start + width].copy()


def get_joint_qvel(model, data, name):
    start, width = _joint(model, name, "qvel")
    return data.qvel[start : start + width].copy()


def set_joint_qpos(model, data, name, value):
    start, width = _joint(model, name, "qpos")
    data.qpos[start : start + width] = np.asarray(value).reshape(-1) if width > 1 else value


def set_joint_qvel(model, data, name, value):
    start, width = _joint(model, name, "qvel")
    data.qvel[start : start + width] = np.asarray(value).reshape(-1) if width > 1 else value


def apply() -> bool:
    """Patch Gymnasium-Robotics when (and only when) ``broken()``; returns whether the patch is active. Idempotent."""
    if _state["applied"] is None:
        from gymnasium_robotics.utils import mujoco_utils

        _state["applied"] = broken()
        if _state["applied"]:
            for fn in (get_joint_qpos, get_joint_qvel, set_joint_qpos, set_joint_qvel):
                setattr(mujoco_utils, fn.__name__, fn)
    return _state["applied"]
