"""Published Franka Emika Panda numbers and the names peg_arm's model file uses.

Limits: Franka "Robot and interface specifications",
https://frankaemika.github.io/docs/control_parameters.html (joint space limits).
"""

JOINT_NAMES = tuple(f"joint{i}" for i in range(1, 8))  # motor order

Q_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973)  # rad
Q_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973)  # rad
VELOCITY_LIMIT = (2.1750, 2.1750, 2.1750, 2.1750, 2.6100, 2.6100, 2.6100)  # rad/s
TORQUE_LIMIT = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # N·m

# The "ready" pose of franka_ros / libfranka examples.
DEFAULT_POSE = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)

# Joint impedance gains of franka_ros' joint_impedance_example_controller (also the
# panda-py / libfranka-example defaults), common in Panda simulation setups.
KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)  # N·m/rad
KD = (50.0, 50.0, 50.0, 20.0, 20.0, 20.0, 10.0)  # N·m·s/rad

BASE_BODY = "link0"
EE_SITE = "ee"  # peg tip, z along the peg axis away from the hand
FT_SITE = "wrist_ft"  # flange; measures the wrench of hand + fingers + peg
FT_BODY = "ft_sensor"
PEG_BODY = "peg"
BOARD_BODY = "board"

GRASP_LENGTH = 0.02  # m of the peg's top held between the fingers (assets/peg_arm/peg_arm.xml)
PEG_DENSITY = 2700.0  # kg/m³, aluminium (peg geom density in the model file)
HAND_MASS = 0.73 + 2 * 0.015  # kg, Franka Hand + two fingers (model file)
