"""Unitree H1-2 constants (27 actuated joints, no hands), MuJoCo Playground style.

Everything is in hardware motor order. Sources (vendor, unitree_rl_gym):
  joint names, ranges, torque limits: h1_2.xml; velocity limits: h1_2.urdf <limit velocity>;
  gains and default pose: deploy_configs/real_h1_2.yaml; armature: the motor table (below).
"""

from embody.assets import asset_path

XML = asset_path("h1_2/h1_2.xml")

_LEG = ("hip_yaw", "hip_pitch", "hip_roll", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch", "elbow_roll", "wrist_pitch", "wrist_yaw")

JOINT_NAMES: tuple[str, ...] = (
    *(f"left_{j}_joint" for j in _LEG),
    *(f"right_{j}_joint" for j in _LEG),
    "torso_joint",
    *(f"left_{j}_joint" for j in _ARM),
    *(f"right_{j}_joint" for j in _ARM),
)
NUM_JOINTS = len(JOINT_NAMES)  # 27

LEFT_LEG = tuple(range(0, 6))
RIGHT_LEG = tuple(range(6, 12))
LEGS = LEFT_LEG + RIGHT_LEG
WAIST = (12,)
LEFT_ARM = tuple(range(13, 20))
RIGHT_ARM = tuple(range(20, 27))
ARMS = LEFT_ARM + RIGHT_ARM
UPPER_BODY = WAIST + ARMS

# Left-right mirror (reflection through the sagittal x-z plane): joint i's mirror image is joint
# MIRROR_JOINT[i] times MIRROR_SIGN[i]. Every joint turns about its body's x, y or z axis, and the
# two sides' bodies are mirror images; a reflection keeps rotations about y (pitch) and reverses
# those about x and z (roll, yaw) — the vendor's ranges agree (left roll (-0.43, 3.14), right (-3.14, 0.43)).
MIRROR_JOINT: tuple[int, ...] = RIGHT_LEG + LEFT_LEG + WAIST + RIGHT_ARM + LEFT_ARM
MIRROR_SIGN: tuple[float, ...] = tuple(1.0 if ("pitch" in n or "knee" in n) else -1.0 for n in JOINT_NAMES)

# Joint ranges [rad] and torque limits [N·m] (vendor h1_2.xml range / actuatorfrcrange).
_LEFT_LEG_RANGE = (
    (-0.43, 0.43),
    (-3.14, 2.5),
    (-0.43, 3.14),
    (-0.26, 2.05),
    (-0.897334, 0.523598),
    (-0.261799, 0.261799),
)
_RIGHT_LEG_RANGE = (
    (-0.43, 0.43),
    (-3.14, 2.5),
    (-3.14, 0.43),
    (-0.26, 2.05),
    (-0.897334, 0.523598),
    (-0.261799, 0.261799),
)
_LEFT_ARM_RANGE = (
    (-3.14, 1.57),
    (-0.38, 3.4),
    (-2.66, 3.01),
    (-0.95, 3.18),
    (-3.01, 2.75),
    (-0.47, 0.47),
    (-1.27, 1.27),
)
_RIGHT_ARM_RANGE = (
    (-3.14, 1.57),
    (-3.4, 0.38),
    (-3.01, 2.66),
    (-0.95, 3.18),
    (-2.75, 3.01),
    (-0.47, 0.47),
    (-1.27, 1.27),
)
JOINT_RANGES: tuple[tuple[float, float], ...] = (
    _LEFT_LEG_RANGE + _RIGHT_LEG_RANGE + ((-2.35, 2.35),) + _LEFT_ARM_RANGE + _RIGHT_ARM_RANGE
)

_LEG_TORQUE = (200.0, 200.0, 200.0, 300.0, 60.0, 40.0)
_ARM_TORQUE = (40.0, 40.0, 18.0, 18.0, 19.0, 19.0, 19.0)
TORQUE_LIMITS = _LEG_TORQUE * 2 + (200.0,) + _ARM_TORQUE * 2

_LEG_VELOCITY = (23.0, 23.0, 23.0, 14.0, 9.0, 9.0)
_ARM_VELOCITY = (9.0, 9.0, 20.0, 20.0, 31.4, 31.4, 31.4)
VELOCITY_LIMITS = _LEG_VELOCITY * 2 + (23.0,) + _ARM_VELOCITY * 2

# Armature [kg·m²]: each joint's motor rotor inertia reflected through its gearbox, from the H1-2 motor table
# (M107-15: hip yaw, torso; M107-24: hip pitch and roll, knee; N7520-14.3: ankles (through their linkage, taken
# as one motor's), shoulder yaw; N7520-22.5: shoulder pitch and roll, elbow; N5020-16: wrists). The vendor's MJCF
# gives every joint 0.01, 16x less than the knee's motor: ``SimConfig.armature = "motors"`` uses these instead.
_M107_15, _M107_24, _N7520_14, _N7520_22, _N5020 = 0.063259741, 0.160478022, 0.010177520, 0.025101925, 0.003609725
_LEG_ARMATURE = (_M107_15, _M107_24, _M107_24, _M107_24, _N7520_14, _N7520_14)
_ARM_ARMATURE = (_N7520_22, _N7520_22, _N7520_14, _N7520_22, _N5020, _N5020, _N5020)
ARMATURE = _LEG_ARMATURE * 2 + (_M107_15,) + _ARM_ARMATURE * 2

# PD gains and default pose (vendor deploy config).
_LEG_KP, _LEG_KD = (200.0, 200.0, 200.0, 300.0, 40.0, 40.0), (2.5, 2.5, 2.5, 4.0, 2.0, 2.0)
_ARM_KP, _ARM_KD = (120.0, 120.0, 120.0, 80.0, 80.0, 80.0, 80.0), (2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0)
KP = _LEG_KP * 2 + (300.0,) + _ARM_KP * 2
KD = _LEG_KD * 2 + (3.0,) + _ARM_KD * 2
_LEG_POSE = (0.0, -0.16, 0.0, 0.36, -0.2, 0.0)
DEFAULT_POSE = _LEG_POSE * 2 + (0.0,) * 15

# Pelvis position that puts the soles on z=0 at DEFAULT_POSE (also the MJCF's pelvis pos and
# its "home" keyframe). The straight-leg zero pose is 1.3 cm taller than this.
DEFAULT_BASE_POS = (0.0, 0.0, 1.0151)

BASE_BODY = "pelvis"
TORSO_BODY = "torso_link"
ROOT_JOINT = "floating_base_joint"
IMU_SITE = "imu"  # in torso_link, at the vendor MJCF's imu site
FOOT_SITES = ("left_foot", "right_foot")  # box sites covering the soles (touch sensing)
FEET_GEOMS = ("left_foot_sole", "right_foot_sole")

# Published reference totals (vendor model without the hand links: 2 hand bases + 24 finger links).
REFERENCE_MASS_NO_HANDS = 66.984  # kg; vendor with hands: 67.3676 kg
REFERENCE_BASE_HEIGHT = 1.01512  # m, vendor pelvis height at DEFAULT_POSE with the lowest sole point on z=0

# Retargeting human motion (embody.robots.retarget): the bodies whose origins are the keypoints (hip yaw,
# shoulder pitch (fixed on the torso), elbow pitch and wrist pitch joints) and the joints solved for (the waist
# and four per arm: ALMI's upper body; forearm twist and wrists are not determined by these points).
RETARGET_BODIES = {
    **{f"{s}_hip": f"{s}_hip_yaw_link" for s in ("left", "right")},
    **{f"{s}_shoulder": f"{s}_shoulder_pitch_link" for s in ("left", "right")},
    **{f"{s}_elbow": f"{s}_elbow_pitch_link" for s in ("left", "right")},
    **{f"{s}_wrist": f"{s}_wrist_pitch_link" for s in ("left", "right")},
}
RETARGET_JOINTS = ("torso_joint",) + tuple(
    f"{s}_{j}_joint"
    for s in ("left", "right")
    for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch")
)
