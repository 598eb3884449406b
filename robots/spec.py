"""RobotSpec: a robot described as data.

Joint order is the hardware motor order everywhere in embody: RobotState arrays, actions,
PD gains and limits all index joints the way the robot's motor bus does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Joint:
    """One actuated joint. Units: rad, rad/s, N·m (m, m/s, N for prismatic joints)."""

    name: str
    lower: float
    upper: float
    velocity_limit: float
    torque_limit: float
    kp: float
    kd: float
    default: float = 0.0
    armature: float | None = None  # the motor's rotor inertia reflected through its gearbox [kg·m²]; None: not tabled
    actuated: bool = True  # False: an encoder-only joint (reported in RobotState, not commanded)


@dataclass(frozen=True)
class Sensors:
    """Names of model sites (not simulator internals) that hold the robot's sensors.

    A simulator adapter places its sensors at these sites; ``None`` means the robot has none.
    """

    imu_site: str | None = None  # torso IMU: quaternion w,x,y,z, gyro and accelerometer in this frame
    foot_sites: tuple[str, ...] = ()  # contact sensing (privileged in simulation)
    ee_site: str | None = None  # end effector pose
    ft_site: str | None = None  # wrist force/torque sensor


@dataclass(frozen=True)
class RetargetMap:
    """A robot's side of motion retargeting (``embody.robots.retarget``): the model body at each keypoint
    (left/right hip, shoulder, elbow, wrist) and the joints solved for."""

    bodies: dict[str, str]
    joints: tuple[str, ...]


@dataclass(frozen=True)
class RobotSpec:
    """Everything the stack needs to know about a robot, independent of any simulator.

    ``mjcf`` is the one source of truth for kinematics and inertia; the URDF for engines that
    need one is generated from it (``embody.robots.urdf``).
    """

    name: str
    joints: tuple[Joint, ...]
    mjcf: Path
    floating_base: bool
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)  # e.g. legs -> motor ids
    sensors: Sensors = Sensors()
    base_body: str | None = None  # the floating base link (pelvis for the H1-2)
    default_base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0)  # standing at the default pose [m]
    description: str = ""
    retarget: RetargetMap | None = None  # keypoints for retargeting human motion onto the robot
    # left-right mirror: joint i's mirror image is joint mirror_joint[i] times mirror_sign[i] (None: not symmetric)
    mirror_joint: tuple[int, ...] | None = None
    mirror_sign: tuple[float, ...] | None = None

    @property
    def n_joints(self) -> int:
        """All joints, actuated or encoder-only (``n_actions`` counts the actuated ones)."""
        return len(self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def actuated(self) -> np.ndarray:
        """Indices of the commanded joints; actions have this many columns."""
        return np.array([i for i, j in enumerate(self.joints) if j.actuated], dtype=np.int64)

    @property
    def n_actions(self) -> int:
        """Columns of an action: the number of actuated joints."""
        return len(self.actuated)

    def _column(self, attr: str) -> np.ndarray:
        return np.array([getattr(j, attr) for j in self.joints], dtype=np.float64)

    @property
    def lower(self) -> np.ndarray:
        """(n_joints,) lower position limits in motor order, every joint (rad, or m for prismatic)."""
        return self._column("lower")

    @property
    def upper(self) -> np.ndarray:
        """(n_joints,) upper position limits in motor order, every joint (rad, or m for prismatic)."""
        return self._column("upper")

    @property
    def velocity_limit(self) -> np.ndarray:
        """(n_joints,) velocity limits in motor order (rad/s, or m/s)."""
        return self._column("velocity_limit")

    @property
    def torque_limit(self) -> np.ndarray:
        """(n_joints,) torque limits in motor order (N·m, or N)."""
        return self._column("torque_limit")

    @property
    def kp(self) -> np.ndarray:
        """(n_joints,) PD position gains in motor order (N·m/rad, or N/m); 0: no PD, torque control."""
        return self._column("kp")

    @property
    def kd(self) -> np.ndarray:
        """(n_joints,) PD damping gains in motor order (N·m·s/rad, or N·s/m)."""
        return self._column("kd")

    def motor_armature(self) -> np.ndarray:
        """(n_joints,) each joint's motor-table armature [kg·m²], for ``SimConfig.armature = "motors"``; a clear error
        when the spec does not table every joint's."""
        missing = [j.name for j in self.joints if j.armature is None]
        if missing:
            raise ValueError(f"robot {self.name!r} has no motor armature for {missing} (SimConfig.armature='motors')")
        return self._column("armature")

    @property
    def default_pose(self) -> np.ndarray:
        """(n_joints,) the default joint positions in motor order (rad, or m)."""
        return self._column("default")

    def group(self, name: str) -> np.ndarray:
        """Motor indices of an actuated group (``legs``, ``waist``, ``arms``, ...)."""
        if name not in self.groups:
            raise KeyError(f"robot {self.name!r} has no joint group {name!r}; groups: {sorted(self.groups)}")
        return np.array(self.groups[name], dtype=np.int64)

    def replace(self, **changes) -> RobotSpec:
        """A copy with the given fields changed (the spec itself is frozen)."""
        return dataclasses.replace(self, **changes)
