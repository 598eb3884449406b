"""``embody deploy --record DIR``: everything a deployment sent and received, as a dataset episode.

One frame per policy tick, in the LeRobot v3.0 layout of ``embody.datasets``: the joint positions
as ``observation.state`` and the policy's ``action``, then embody's columns — the policy
observation, joint velocities and torques, the torso IMU, the command the supervisor actually
sent (targets, gains, feed-forward torque, enabled motors), the supervisor's phase and the age
of the state the tick used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .interface import JointCommand
from .supervisor import Phase

PHASES = list(Phase)


def deploy_features(robot, obs_size: int, action_size: int, imu: bool, action_names: list[str] | None = None) -> dict:
    """The dataset features of a deployment recording: LeRobot's ``observation.state`` and ``action``, and ``embody.*``
    columns (observation, joint velocities and torques, the sent command, supervisor phase, state age, IMU when
    ``imu``)."""
    from embody.datasets.format import feature

    joints, j = list(robot.joint_names), robot.n_joints
    out = {
        "observation.state": feature("float32", (j,), joints),
        "action": feature("float32", (action_size,), action_names),
        "embody.observation": feature("float32", (obs_size,)),
        "embody.joint_vel": feature("float32", (j,), joints),
        "embody.joint_torque": feature("float32", (j,), joints),
        **{f"embody.sent.{k}": feature("float32", (j,), joints) for k in ("q", "dq", "tau", "kp", "kd")},
        "embody.sent.enable": feature("bool", (j,), joints),
        "embody.supervisor_phase": feature("int64", (1,), [p.name for p in PHASES]),
        "embody.state_age": feature("float32", (1,)),
    }
    if imu:
        out.update(
            {
                "embody.imu_quat": feature("float32", (4,), ["w", "x", "y", "z"]),
                "embody.imu_gyro": feature("float32", (3,), ["x", "y", "z"]),
            }
        )
    return out


class DeployRecorder:
    """Frames of one deployment into ``root`` (a new dataset, or one recorded before with the same run)."""

    def __init__(self, root: Path, runner, fps: int, recording: dict):
        from embody.datasets.format import DatasetWriter

        self.imu = runner.robot.sensors.imu_site is not None
        self.writer = DatasetWriter(
            root,
            fps=fps,
            robot_type=runner.robot.name,
            recording=recording,
            features=deploy_features(
                runner.robot,
                runner.task.observation_size,
                runner.task.action_size,
                self.imu,
                runner.task.action_names(),
            ),
        )
        self.task = runner.task.name

    def add(self, state, obs: np.ndarray, action: np.ndarray, sent: JointCommand, phase: Phase, age: float) -> None:
        """Add one policy tick as a frame: the state (n = 1), observation and action (1, ·), the sent command, phase and
        state age [s]."""
        frame = {
            "observation.state": state.joint_pos[0],
            "action": action[0],
            "embody.observation": obs[0],
            "embody.joint_vel": state.joint_vel[0],
            "embody.joint_torque": state.joint_torque[0],
            **{f"embody.sent.{k}": getattr(sent, k) for k in ("q", "dq", "tau", "kp", "kd", "enable")},
            "embody.supervisor_phase": np.array([PHASES.index(phase)]),
            "embody.state_age": np.array([age]),
        }
        if self.imu:
            frame.update({"embody.imu_quat": state.imu_quat[0], "embody.imu_gyro": state.imu_gyro[0]})
        self.writer.add_frame(frame, task=self.task)

    def close(self) -> int:
        """Save the episode (if any frame was added); returns the number of episodes in the dataset."""
        if self.writer.pending_frames:
            self.writer.save_episode()
        self.writer.close()
        return self.writer.num_episodes
