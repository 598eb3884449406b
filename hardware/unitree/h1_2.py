"""The Unitree H1-2 on DDS: unitree_hg LowCmd_ on rt/lowcmd, LowState_ on rt/lowstate (extra ``hardware``).

``H1_2Driver`` is the generic DDS driver (hardware/dds_driver.py) with the vendor's codec: 500 Hz
commands that echo the robot's mode_machine, mode_pr 0 (pitch/roll ankles), motor mode 1 for
enabled joints, the CRC in the last word; the robot's torso IMU and joint encoders as RobotState.
"""

from __future__ import annotations

import numpy as np

from embody.robots import RobotSpec, RobotState
from embody.rotations import quat_to_rpy

from ..dds_driver import CrcMismatch, DdsDriver
from ..interface import JointCommand
from ..realtime import DEFAULT_PRIORITY
from ..supervisor import SafetySupervisor, SupervisorConfig
from . import messages as msg
from . import wire

WRITER_HZ = 500.0


def state_from_lowstate(arrays: dict, n_joints: int, t: float) -> RobotState:
    """RobotState (n = 1) from ``messages.lowstate_arrays``: the first ``n_joints`` motors, torso IMU."""
    row = lambda a: np.asarray(a, dtype=np.float64)[None]  # noqa: E731
    return RobotState(
        joint_pos=row(arrays["q"][:n_joints]),
        joint_vel=row(arrays["dq"][:n_joints]),
        joint_torque=row(arrays["tau_est"][:n_joints]),
        time=np.array([t]),
        imu_quat=row(arrays["quaternion"]),
        imu_gyro=row(arrays["gyroscope"]),
        imu_accel=row(arrays["accelerometer"]),
        motor_temperature=row(arrays["temperature"][:n_joints]),
    )


def lowcmd_packed(cmd: JointCommand, mode_machine: int, reserve: tuple | None = None) -> np.ndarray:
    """The packed LowCmd_ (crc filled) for ``cmd`` over the first j of the 35 motor slots; the rest stay
    passive (mode 0). mode_pr 0: the pitch/roll ankle mode the spec's joints describe."""
    rows = np.zeros((6, msg.NUM_MOTORS))  # np.pad costs ~30 µs per call; this is the hot path
    rows[:, : len(cmd.q)] = (cmd.q, cmd.dq, cmd.tau, cmd.kp, cmd.kd, cmd.enable)
    q, dq, tau, kp, kd, mode = rows
    return msg.lowcmd_record(
        q=q,
        dq=dq,
        tau=tau,
        kp=kp,
        kd=kd,
        mode=mode.astype(np.uint8),
        mode_pr=0,
        mode_machine=mode_machine,
        reserve=reserve,
    )


class UnitreeHgCodec:
    """unitree_hg LowCmd_/LowState_ as CDR, through the packed C structs (hardware/unitree/wire.py)."""

    command_topic, command_type = msg.TOPIC_LOWCMD, msg.LowCmd_
    state_topic, state_type = msg.TOPIC_LOWSTATE, msg.LowState_
    check = staticmethod(wire.check_against_cyclonedds)

    def __init__(self, mode_machine: int = 0):
        self.mode_machine = mode_machine  # what a (simulated) robot reports; clients echo the robot's

    def supervisor_config(self) -> SupervisorConfig:
        """The supervisor defaults (made for the H1-2)."""
        return SupervisorConfig()

    def decode_state(self, data: bytes, n_joints: int, t: float) -> tuple[RobotState, int, dict]:
        """A LowState_ sample to (RobotState, the applied command's CRC from ``reserve[0]`` (0 when unset),
        ``{"mode_machine": …}`` to echo)."""
        packed = wire.from_cdr(data, "LowState_")
        if not msg.packed_crc_ok(packed):
            raise CrcMismatch("LowState_: CRC mismatch")
        a = msg.lowstate_arrays(packed)
        return state_from_lowstate(a, n_joints, t), int(a["reserve"][0]), {"mode_machine": a["mode_machine"]}

    def encode_command(self, cmd: JointCommand, echo: dict, seq: int | None) -> tuple[bytes, int]:
        """A LowCmd_ sample echoing ``mode_machine``, ``seq`` in ``reserve[0]``, and its CRC."""
        packed = lowcmd_packed(cmd, echo.get("mode_machine", 0), None if seq is None else (seq, 0, 0, 0))
        return wire.to_cdr(packed, "LowCmd_"), int(packed[-4:].view("<u4")[0])

    def encode_state(self, state: RobotState, applied_id: int, tick: int) -> bytes:
        """robot-sim's side: a LowState_ sample (ddq 0, motors past the robot's joints 0) with ``applied_id`` in
        ``reserve[0]``."""
        j = state.joint_pos.shape[1]
        motors = np.zeros((4, msg.NUM_MOTORS))  # q, dq, ddq (not simulated: 0), tau_est; motors past j: 0
        motors[[0, 1, 3], :j] = state.joint_pos[0], state.joint_vel[0], state.joint_torque[0]
        temperature = np.zeros(msg.NUM_MOTORS, np.int16)
        temperature[:j] = np.rint(state.motor_temperature[0]) if state.motor_temperature is not None else 0
        quat = state.imu_quat[0]
        packed = msg.lowstate_record(
            *motors,
            temperature=temperature,
            quaternion=quat,
            gyroscope=state.imu_gyro[0],
            accelerometer=state.imu_accel[0],
            rpy=quat_to_rpy(quat[None])[0],
            tick=tick & 0xFFFFFFFF,
            mode_machine=self.mode_machine,
            reserve=(applied_id, 0, 0, 0),
        )
        return wire.to_cdr(packed, "LowState_")

    def decode_command(self, data: bytes) -> tuple[JointCommand, int, dict]:
        """robot-sim's side: a LowCmd_ sample to (JointCommand, its CRC, ``{"mode_machine": …}``); CrcMismatch on a bad
        CRC."""
        packed = wire.from_cdr(data, "LowCmd_")
        if not msg.packed_crc_ok(packed):
            raise CrcMismatch("LowCmd_: CRC mismatch")
        a = msg.lowcmd_arrays(packed)
        cmd = JointCommand(q=a["q"], dq=a["dq"], tau=a["tau"], kp=a["kp"], kd=a["kd"], enable=a["mode"] == 1)
        return cmd, int(packed[-4:].view("<u4")[0]), {"mode_machine": a["mode_machine"]}


class H1_2Driver(DdsDriver):
    """The H1-2 (or ``embody robot-sim h1_2``) on ``iface``, DDS domain ``domain``."""

    def __init__(
        self,
        iface: str = "lo",
        domain: int = 0,
        supervisor: SafetySupervisor | None = None,
        robot: RobotSpec | None = None,
        rate_hz: float = WRITER_HZ,
        realtime_priority: int | None = DEFAULT_PRIORITY,
    ):
        from embody.robots import get_robot

        robot = robot or get_robot("h1_2")
        super().__init__(UnitreeHgCodec(), robot, iface, domain, supervisor, rate_hz, realtime_priority)
