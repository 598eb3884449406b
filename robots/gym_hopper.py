"""Gymnasium's MuJoCo hopper (Hopper-v5's hopper.xml) as a RobotSpec: a planar, contact-rich model without quaternion
joints, for the differentiable step (D.VA's hopper) and benchmarks.

Converted as ``gym_humanoid`` converts the humanoid (the model file read from the installed gymnasium package, its
``<actuator>`` section cut out into a cached copy): joints in model order, the planar root (``rootx``, ``rootz``,
``rooty``) encoder-only, then ``thigh_joint``, ``leg_joint``, ``foot_joint`` torque-controlled with torque limits
gear · ctrlrange (200 N·m), so that a command of 200 · a reproduces gymnasium's force; default pose = the model's
qpos0 (standing, rootz 1.25). One change to the physics: MuJoCo's default semi-implicit Euler integrator replaces
the file's RK4 (same 2 ms timestep), because MuJoCo's transition derivatives (``mjd_transitionFD``) do not support
RK4.
"""

from __future__ import annotations

from embody.cache import cache_dir, write_cached

from .gym_humanoid import actuator_free_text, gymnasium_xml, model_joint, motor_torque_limits
from .spec import RobotSpec


def model_xml():
    """The cached, converted copy of hopper.xml (module docstring)."""
    source = gymnasium_xml("hopper.xml")
    text = actuator_free_text(source)
    if 'integrator="RK4"' not in text:
        raise ValueError(f"{source}: expected the RK4 integrator option to replace")
    return write_cached(cache_dir("gym_hopper"), text.replace('integrator="RK4"', 'integrator="Euler"'), stem="hopper")


def make_spec() -> RobotSpec:
    """The spec described in the module docstring (group ``legs``). Needs gymnasium and mujoco."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(gymnasium_xml("hopper.xml")))
    torque = motor_torque_limits(m)
    joints = [model_joint(m, j, torque) for j in range(m.njnt)]  # model order: the planar root, then the leg
    return RobotSpec(
        name="gym_hopper",
        joints=tuple(joints),
        mjcf=model_xml(),
        floating_base=False,
        groups={"legs": tuple(range(3, 6))},
        description="gymnasium's Hopper-v5 model (hopper.xml, Euler integrator), planar, torque-controlled",
    )
