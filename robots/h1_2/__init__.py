"""Unitree H1-2 humanoid: 27 actuated joints (legs, waist, arms with wrists), no hands."""

from embody.robots.spec import Joint, RetargetMap, RobotSpec, Sensors

from . import constants as c


def make_spec() -> RobotSpec:
    """The H1-2's spec from ``constants``: 27 joints in motor order with vendor limits, gains and
    default pose; groups per leg, arm and waist plus ``upper_body`` / ``lower_body``."""
    joints = tuple(
        Joint(name, lower=lo, upper=hi, velocity_limit=vel, torque_limit=tau, kp=kp, kd=kd, default=q0, armature=arm)
        for name, (lo, hi), vel, tau, kp, kd, q0, arm in zip(
            c.JOINT_NAMES, c.JOINT_RANGES, c.VELOCITY_LIMITS, c.TORQUE_LIMITS, c.KP, c.KD, c.DEFAULT_POSE, c.ARMATURE
        )
    )
    return RobotSpec(
        name="h1_2",
        joints=joints,
        mjcf=c.XML,
        floating_base=True,
        groups={
            "legs": c.LEGS,
            "left_leg": c.LEFT_LEG,
            "right_leg": c.RIGHT_LEG,
            "waist": c.WAIST,
            "arms": c.ARMS,
            "left_arm": c.LEFT_ARM,
            "right_arm": c.RIGHT_ARM,
            "upper_body": c.UPPER_BODY,
            "lower_body": c.LEGS,
        },
        sensors=Sensors(imu_site=c.IMU_SITE, foot_sites=c.FOOT_SITES),
        base_body=c.BASE_BODY,
        default_base_pos=c.DEFAULT_BASE_POS,
        mirror_joint=c.MIRROR_JOINT,
        mirror_sign=c.MIRROR_SIGN,
        retarget=RetargetMap(c.RETARGET_BODIES, c.RETARGET_JOINTS),
        description="Unitree H1-2 humanoid, 27 DoF without hands; vendor kinematics, inertia and gains",
    )


__all__ = ["make_spec"]
