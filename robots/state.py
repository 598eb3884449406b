"""RobotState: the one batched state that simulators and real robots both produce.

The observed part holds exactly what a real robot reports; everything only a simulator
knows lives in ``PrivilegedState``. Observation builders read RobotState and never reach
into simulator internals, so the code that builds observations in training is the code
that builds them on the robot.

Shapes use ``n`` for the number of environments (1 on a real robot) and ``j`` for the
number of actuated joints, in hardware motor order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np


@dataclass
class PrivilegedState:
    """Simulator-only ground truth (for critics, teachers, rewards and metrics).

    base_pos:      (n, 3) world position of the base body [m]
    base_quat:     (n, 4) world orientation of the base body, w,x,y,z
    base_lin_vel:  (n, 3) base linear velocity in the base frame [m/s]
    base_ang_vel:  (n, 3) base angular velocity in the base frame [rad/s]
    contact_force: (n, c) normal force at each of the spec's foot sites [N]
    foot_pos:      (n, c, 3) world position of each foot site [m] (None if the adapter lacks it)
    extras:        task- or adapter-specific arrays, each with leading dim n (friction, pushes, ...)
    """

    base_pos: np.ndarray
    base_quat: np.ndarray
    base_lin_vel: np.ndarray
    base_ang_vel: np.ndarray
    contact_force: np.ndarray
    foot_pos: np.ndarray | None = None
    extras: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class RobotState:
    """What the robot reports.

    joint_pos:    (n, j) [rad or m]
    joint_vel:    (n, j) [rad/s or m/s]
    joint_torque: (n, j) applied/estimated actuator effort [N·m or N]
    imu_quat:     (n, 4) torso IMU orientation, w,x,y,z (None without an IMU)
    imu_gyro:     (n, 3) angular velocity in the IMU frame [rad/s]
    imu_accel:    (n, 3) specific force in the IMU frame [m/s²] (≈ +9.81 z at rest)
    ee_pos:       (n, 3) end-effector position in the world frame, which is the base frame of an
                  arm mounted at the origin (arms; None otherwise)
    ee_quat:      (n, 4) end-effector orientation, w,x,y,z
    wrench:       (n, 6) raw wrist F/T reading, force [N] then torque [N·m], in the sensor frame:
                  what the flange exerts on the hand and its load (at rest it holds their weight
                  up), as an untared sensor reports it; tasks tare it
    time:         (n,)   seconds since the env's last reset
    motor_temperature: (n, j) motor temperature [°C] (hardware; None in simulation)
    privileged:   simulator ground truth; None on hardware
    """

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    joint_torque: np.ndarray
    time: np.ndarray
    imu_quat: np.ndarray | None = None
    imu_gyro: np.ndarray | None = None
    imu_accel: np.ndarray | None = None
    ee_pos: np.ndarray | None = None
    ee_quat: np.ndarray | None = None
    wrench: np.ndarray | None = None
    motor_temperature: np.ndarray | None = None
    privileged: PrivilegedState | None = None

    @property
    def n_envs(self) -> int:
        """n, the leading dimension of every array."""
        return self.joint_pos.shape[0]

    def select(self, idx) -> RobotState:
        """The state of a subset of envs (index array, mask or slice)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "privileged" and v is not None:
                v = PrivilegedState(
                    **{
                        g.name: None if getattr(v, g.name) is None else getattr(v, g.name)[idx]
                        for g in fields(v)
                        if g.name != "extras"
                    },
                    extras={k: a[idx] for k, a in v.extras.items()},
                )
            elif isinstance(v, np.ndarray):
                v = v[idx]
            out[f.name] = v
        return RobotState(**out)

    def observed(self) -> RobotState:
        """This state without the simulator-only part: exactly what hardware provides."""
        s = self.select(slice(None))
        s.privileged = None
        return s
