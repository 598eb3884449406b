"""``embody deploy --record DIR``: everything a deployment sent and received, as a dataset episode.

One frame per policy tick, in the LeRobot v3.0 layout of ``embody.datasets``: the joint positions
as ``observation.state`` and the policy's ``action``, then embody's columns — the policy
observation, joint velocities and torques, the torso IMU, the command the supervisor actually
sent (targets, gains, feed-forward torque, enabled motors) and the targets the policy asked for
before it, the supervisor's phase and clock, and the age of the state the tick used.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from .interface import JointCommand
from .supervisor import Phase

PHASES = list(Phase)


def deploy_features(robot, imu: bool, task=None) -> dict:
    """The dataset features of a supervised run's recording: LeRobot's ``observation.state`` (and, with the policy's
    ``task``, ``action`` and the policy observation), and ``embody.*`` columns (joint velocities and torques, the
    asked and sent commands, supervisor phase and clock, state age, IMU when ``imu``)."""
    from embody.datasets.format import feature

    joints, j = list(robot.joint_names), robot.n_joints
    out = {"observation.state": feature("float32", (j,), joints)}
    if task is not None:
        out["action"] = feature("float32", (task.action_size,), task.action_names())
        out["embody.observation"] = feature("float32", (task.observation_size,))
    out |= {
        "embody.joint_vel": feature("float32", (j,), joints),
        "embody.joint_torque": feature("float32", (j,), joints),
        "embody.asked.q": feature("float32", (j,), joints),  # the policy's (or replay's) targets, before the supervisor
        **{f"embody.sent.{k}": feature("float32", (j,), joints) for k in ("q", "dq", "tau", "kp", "kd")},
        "embody.sent.enable": feature("bool", (j,), joints),
        "embody.supervisor_phase": feature("int64", (1,), [p.name for p in PHASES]),
        "embody.state_age": feature("float32", (1,)),
        "embody.supervisor_time": feature("float64", (1,)),  # the supervisor's clock: its events' time base
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
    """Frames of one supervised run into ``root`` (a new dataset, or one recorded before with the same run): a
    policy's (``task``: its observation and action are recorded too) or a replay's (``task`` None)."""

    def __init__(self, root: Path, robot, fps: int, recording: dict, task=None):
        from embody.datasets.format import DatasetWriter

        self.imu = robot.sensors.imu_site is not None
        self.writer = DatasetWriter(
            root, fps=fps, robot_type=robot.name, recording=recording, features=deploy_features(robot, self.imu, task)
        )
        self.task = task.name if task is not None else recording.get("task", "replay")

    def add(
        self,
        state,
        obs: np.ndarray | None,
        action: np.ndarray | None,
        asked: JointCommand,
        sent: JointCommand,
        phase: Phase,
        age: float,
        now: float,
    ) -> None:
        """Add one tick as a frame: the state (n = 1), the policy's observation and action (1, ·; None for a replay),
        the command asked for and the one the supervisor sent, its phase, the state's age [s] and its clock [s]."""
        frame = {
            "observation.state": state.joint_pos[0],
            **({"action": action[0], "embody.observation": obs[0]} if action is not None else {}),
            "embody.joint_vel": state.joint_vel[0],
            "embody.joint_torque": state.joint_torque[0],
            "embody.asked.q": asked.q,
            **{f"embody.sent.{k}": getattr(sent, k) for k in ("q", "dq", "tau", "kp", "kd", "enable")},
            "embody.supervisor_phase": np.array([PHASES.index(phase)]),
            "embody.state_age": np.array([age]),
            "embody.supervisor_time": np.array([now]),
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


class RunRecording:
    """``--record DIR`` and ``--log FILE`` of a supervised run: a :class:`DeployRecorder` into DIR (into a scratch
    dataset when only a log is asked for, none when neither is); ``finish(events)`` saves the episode, writes the log
    and returns what the summary reports of them."""

    def __init__(
        self, robot, fps: int, recording: dict, task=None, record: Path | None = None, log: Path | None = None
    ):
        if log is not None:
            from embody.datasets.content import check_log_path

            check_log_path(log)
        self.record, self.log = record, log
        self._scratch = tempfile.TemporaryDirectory(prefix="embody-run-") if log and record is None else None
        self.root = record or (Path(self._scratch.name) / "recording" if self._scratch else None)
        self.recorder = DeployRecorder(self.root, robot, fps, recording, task) if self.root else None

    def add(self, *frame) -> None:
        """``DeployRecorder.add``'s arguments; nothing when nothing is recorded."""
        if self.recorder is not None:
            self.recorder.add(*frame)

    def finish(self, events: list[dict]) -> dict:
        """Save the episode and write the log with the supervisor's ``events`` (``session.events_of``'s dicts)."""
        out = {}
        try:
            episodes = self.recorder.close() if self.recorder is not None else 0
            if self.record is not None:
                out["recorded"] = {"dataset": str(self.record), "episodes": episodes}
            if self.log is not None and episodes:
                out["log"] = str(write_log(self.root, events, self.log))
        finally:
            if self._scratch is not None:
                self._scratch.cleanup()
        return out


def write_log(dataset: Path, events: list[dict], out: Path) -> Path:
    """The dataset's last episode (a supervised run's recording) with the supervisor's phase changes and their
    reasons (``events_of``'s dicts) on its timeline, as Rerun or MCAP by ``out``'s suffix."""
    from embody.datasets.content import add_clock_events, episode_content, save
    from embody.datasets.format import load

    ds = load(dataset)
    content = episode_content(ds, ds.num_episodes - 1)
    clock = ds.episode(ds.num_episodes - 1)["embody.supervisor_time"].reshape(-1)
    texts = [
        (e["t"], f"supervisor {e['from']} -> {e['to']} at {e['t'] - clock[0]:+.3f} s: {e['reason']}") for e in events
    ]
    add_clock_events(content, clock, texts)
    return save(content, out)
