"""An in-process RobotInterface for session tests: a writer thread steps the real SafetySupervisor at
500 Hz, as DdsDriver does, with a state the test controls; one fault is injected the first time the
supervisor is in a chosen phase. No DDS, no physics: the state stays at the default pose (an arm's
tip where its kinematics put it).

Faults: ``lost`` (no new state from then on: the watchdog's stale state), ``fall`` (the torso tilted
90°), ``estop`` (the e-stop button), ``nan`` (every command from then on has a NaN target, as a broken
policy or input device sends it; the supervisor refuses requests in POLICY only).
"""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from embody.hardware.interface import JointCommand
from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig
from embody.robots import RobotSpec, RobotState

FAULTS = ("lost", "fall", "estop", "nan")


def resting_state(robot: RobotSpec) -> RobotState:
    n, q = robot.n_joints, robot.default_pose.copy()
    arm = robot.sensors.ee_site is not None
    ee_pos = ee_quat = wrench = None
    if arm:
        from embody.robots.peg_arm.kinematics import ArmModel

        ee_pos, rot = ArmModel(robot).ee_pose(q[None])
        ee_quat, wrench = np.array([[0.0, 1.0, 0.0, 0.0]]), np.array([[0.0, 0.0, 8.4, 0.0, 0.0, 0.0]])
    imu = robot.sensors.imu_site is not None
    return RobotState(
        joint_pos=q[None],
        joint_vel=np.zeros((1, n)),
        joint_torque=np.zeros((1, n)),
        time=np.zeros(1),
        imu_quat=np.array([[1.0, 0.0, 0.0, 0.0]]) if imu else None,
        imu_gyro=np.zeros((1, 3)) if imu else None,
        imu_accel=np.array([[0.0, 0.0, 9.81]]) if imu else None,
        ee_pos=ee_pos,
        ee_quat=ee_quat,
        wrench=wrench,
    )


class FakeRobot:
    """RobotInterface; ``fault`` in FAULTS injected when the supervisor first is in phase ``at``."""

    def __init__(
        self,
        robot: RobotSpec,
        config: SupervisorConfig | None = None,
        fault: str | None = None,
        at: Phase | None = None,
        period: float = 0.002,
    ):
        self.robot, self.fault, self.at, self.period = robot, fault, at, period
        arm = robot.sensors.imu_site is None
        config = config or SupervisorConfig(ramp_s=0.3, max_tilt_rad=None if arm else 1.0)
        self.supervisor = SafetySupervisor(robot, config)
        if fault and at is Phase.HOLD:
            self._hold_until_the_fault_lands()
        self.state, self.injected_in = resting_state(robot), None
        self._lock = threading.Condition()
        self._request = self._sent = None
        self._state_t, self._lost, self._nan, self._ticks = -np.inf, False, False, 0
        self._stop, self._thread = threading.Event(), None
        self.stats = {"commands": 0}

    def connect(self, timeout_s: float = 5.0) -> None:
        self._state_t = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def read_state(self) -> RobotState:
        with self._lock:
            return dataclasses.replace(self.state)

    def state_age(self) -> float:
        with self._lock:
            return time.monotonic() - self._state_t

    def send_command(self, command: JointCommand) -> JointCommand:
        with self._lock:
            self._request = command.copy()
            if self._nan:
                self._request.q[0] = np.nan
            ticks = self._ticks
            self._lock.wait_for(lambda: self._ticks > ticks, 10 * self.period)
            return self._sent

    def close(self) -> None:
        if self._thread is None:
            return
        self.supervisor.estop("driver closing")  # its last ticks send damping, as DdsDriver.close does
        time.sleep(10 * self.period)
        self._stop.set()
        self._thread.join(1.0)
        self._thread = None

    def __enter__(self) -> FakeRobot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if not self._lost:
                    self._state_t = time.monotonic()
                if self.fault and self.injected_in is None and self.supervisor.phase is self.at:
                    self._inject()
                state, request, age = self.state, self._request, time.monotonic() - self._state_t
            sent = self.supervisor.step(state, age, request)
            with self._lock:
                self._sent, self._ticks = sent, self._ticks + 1
                self.stats["commands"] += 1
                self._lock.notify_all()
            time.sleep(self.period)

    def _hold_until_the_fault_lands(self) -> None:
        """A session may leave HOLD at once (replay holds 0 s), before the writer thread has seen HOLD:
        its start_policy waits (at most 1 s) until the fault injected in HOLD has damped the robot."""
        start_policy = self.supervisor.start_policy

        def start_policy_after_the_fault() -> None:
            deadline = time.monotonic() + 1.0
            while self.supervisor.phase is Phase.HOLD and time.monotonic() < deadline:
                time.sleep(self.period)
            start_policy()

        self.supervisor.start_policy = start_policy_after_the_fault

    def _inject(self) -> None:
        self.injected_in = self.at
        if self.fault == "lost":
            self._lost = True
        elif self.fault == "fall":
            self.state = dataclasses.replace(
                self.state, imu_quat=np.array([[np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0]])
            )
        elif self.fault == "estop":
            self.supervisor.estop("e-stop button")
        elif self.fault == "nan":
            self._nan = True
        else:
            raise ValueError(f"unknown fault {self.fault!r}; faults: {FAULTS}")
