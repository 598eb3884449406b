"""peg_arm: a 7-DoF Franka Emika Panda holding a cylindrical peg above a board with a hole.

The peg is held rigidly in a closed parallel gripper (no finger joints: insertion needs no
gripper actuation). The arm is authored once in assets/peg_arm/peg_arm.xml; ``make_spec``
writes a scene with the peg and board sized from its parameters (robots/peg_arm/model.py)
into the cache folder, named by a hash of its content. Gravity compensation is not part of
the model: the task layer adds it.
"""

from __future__ import annotations

from embody.robots.spec import Joint, RobotSpec, Sensors

from . import constants as C
from .model import PegBoard, read_board, write_scene


def make_spec(
    hole_pos=(0.5, 0.0, 0.0), hole_yaw=0.0, clearance=0.001, peg_radius=0.012, peg_length=0.08, hole_depth=0.04
) -> RobotSpec:
    """Lengths in m, angles in rad; ``hole_pos`` is the centre of the hole's mouth in the base frame."""
    b = PegBoard(hole_pos, hole_yaw, clearance, peg_radius, peg_length, hole_depth)
    joints = tuple(
        Joint(name, lower=lo, upper=hi, velocity_limit=v, torque_limit=t, kp=kp, kd=kd, default=q0)
        for name, lo, hi, v, t, kp, kd, q0 in zip(
            C.JOINT_NAMES, C.Q_LOWER, C.Q_UPPER, C.VELOCITY_LIMIT, C.TORQUE_LIMIT, C.KP, C.KD, C.DEFAULT_POSE
        )
    )
    x, y, z = b.hole_pos
    return RobotSpec(
        name="peg_arm",
        joints=joints,
        mjcf=write_scene(b),
        floating_base=False,
        groups={"arm": tuple(range(7))},
        sensors=Sensors(ee_site=C.EE_SITE, ft_site=C.FT_SITE),
        base_body=C.BASE_BODY,
        description=(
            f"Franka Emika Panda with a peg (r={peg_radius * 1e3:g} mm, L={peg_length * 1e3:g} mm) in a "
            f"closed gripper; hole at ({x:g}, {y:g}, {z:g}) m, yaw {hole_yaw:g} rad, "
            f"clearance {clearance * 1e3:g} mm, depth {hole_depth * 1e3:g} mm"
        ),
    )


def board_params(spec: RobotSpec) -> PegBoard:
    """The hole pose and peg fit a peg_arm spec was made with (read from its scene file)."""
    return read_board(spec.mjcf)


__all__ = ["PegBoard", "board_params", "make_spec"]
