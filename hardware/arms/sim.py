"""The simulated peg arm on DDS: embody's arm topics (sim_messages.py) and the driver for them.

``PegArmDriver`` is the generic DDS driver (hardware/dds_driver.py) with ``ArmCodec``, talking to
``embody robot-sim peg_arm``: joint-impedance commands (q, dq, tau, kp, kd per joint) at 500 Hz;
joint state, end-effector pose and the raw wrist wrench back. Its default supervisor holds a
wrist-force limit and a workspace box around the peg board.
"""

from __future__ import annotations

import numpy as np

from embody.robots import RobotSpec, RobotState

from ..dds_driver import CrcMismatch, DdsDriver
from ..interface import HardwareError, JointCommand
from ..supervisor import SafetySupervisor, SupervisorConfig
from ..unitree.wire import XCDR1_LE

MAX_WRIST_FORCE_N = 60.0  # beyond the peg-insert task's contact forces, far below the Panda's
WORKSPACE = (
    (0.2, -0.5, -0.06),
    (0.9, 0.5, 1.0),
)  # m, arm base frame, for the peg tip: in front of the arm, above the board or in the hole


def _words_crc(buf: np.ndarray) -> int:
    from ..unitree.messages import crc32_core

    return crc32_core(buf.view("<u4")[:-1])


class ArmCodec:
    """ArmCmd_/ArmState_ as CDR: with only 4-byte fields, the payload is the packed struct itself."""

    def __init__(self, n_joints: int):
        from . import sim_messages as m

        if n_joints != m.ARM_JOINTS:
            raise HardwareError(f"the arm topics carry {m.ARM_JOINTS} joints; this robot has {n_joints}")
        self.m = m
        self.command_topic, self.command_type = m.TOPIC_ARM_CMD, m.ArmCmd_
        self.state_topic, self.state_type = m.TOPIC_ARM_STATE, m.ArmState_

    def supervisor_config(self) -> SupervisorConfig:
        """Arm limits: no tilt check, the wrist force limit and workspace box, the motors passive until the ramp."""
        return SupervisorConfig(
            max_tilt_rad=None, max_wrench_n=MAX_WRIST_FORCE_N, workspace=WORKSPACE, passive_before_ramp=True
        )

    def check(self) -> None:
        """Refuse to run (HardwareError) if this cyclonedds serializes ArmCmd_ or ArmState_ differently from the
        fixed-layout fast path."""
        m = self.m
        for cls, dtype in ((m.ArmCmd_, m.ARM_CMD_DTYPE), (m.ArmState_, m.ARM_STATE_DTYPE)):
            rec = np.zeros((), dtype)
            for name in dtype.names:
                rec[name] = np.arange(np.size(rec[name])).reshape(np.shape(rec[name])) + 1
            sample = cls(**{name: rec[name].tolist() for name in dtype.names})
            if sample.serialize() != XCDR1_LE + rec.tobytes():
                raise HardwareError(f"{cls.__name__}: this cyclonedds encodes it differently from embody's fast path")

    def _record(self, data: bytes, dtype: np.dtype, name: str) -> np.ndarray:
        if data[:4] != XCDR1_LE or len(data) != 4 + dtype.itemsize:
            raise HardwareError(
                f"{name}: expected a {4 + dtype.itemsize}-byte little-endian CDR sample, got "
                f"{len(data)} bytes starting {bytes(data[:4]).hex()}"
            )
        buf = np.frombuffer(data, np.uint8, offset=4)
        if _words_crc(buf) != int(buf[-4:].view("<u4")[0]):
            raise CrcMismatch(f"{name}: CRC mismatch")
        return buf.view(dtype).reshape(())

    @staticmethod
    def _seal(rec: np.ndarray) -> tuple[bytes, int]:
        buf = np.frombuffer(rec.tobytes(), np.uint8).copy()
        crc = _words_crc(buf)
        buf[-4:].view("<u4")[0] = crc
        return XCDR1_LE + buf.tobytes(), crc

    def decode_state(self, data: bytes, n_joints: int, t: float) -> tuple[RobotState, int, dict]:
        """An ArmState_ sample to (RobotState with ee pose and raw wrench, applied command CRC, {})."""
        r = self._record(data, self.m.ARM_STATE_DTYPE, "ArmState_")
        row = lambda k: r[k].astype(np.float64)[None]  # noqa: E731
        state = RobotState(
            joint_pos=row("q"),
            joint_vel=row("dq"),
            joint_torque=row("tau"),
            time=np.array([t]),
            ee_pos=row("ee_pos"),
            ee_quat=row("ee_quat"),
            wrench=row("wrench"),
        )
        return state, int(r["applied"]), {}

    def encode_command(self, cmd: JointCommand, echo: dict, seq: int | None) -> tuple[bytes, int]:
        """An ArmCmd_ sample (enabled joints as a bit mask) and its CRC."""
        rec = np.zeros((), self.m.ARM_CMD_DTYPE)
        rec["seq"] = seq or 0
        for k in ("q", "dq", "tau", "kp", "kd"):
            rec[k] = getattr(cmd, k)
        rec["enable"] = int(np.sum(np.asarray(cmd.enable, bool) << np.arange(len(cmd.enable))))
        return self._seal(rec)

    def encode_state(self, state: RobotState, applied_id: int, tick: int) -> bytes:
        rec = np.zeros((), self.m.ARM_STATE_DTYPE)
        rec["tick"], rec["applied"] = tick & 0xFFFFFFFF, applied_id
        for k, v in (
            ("q", state.joint_pos),
            ("dq", state.joint_vel),
            ("tau", state.joint_torque),
            ("ee_pos", state.ee_pos),
            ("ee_quat", state.ee_quat),
            ("wrench", state.wrench),
        ):
            rec[k] = v[0]
        return self._seal(rec)[0]

    def decode_command(self, data: bytes) -> tuple[JointCommand, int, dict]:
        """An ArmCmd_ sample to (JointCommand, its CRC, {}); HardwareError if malformed, CrcMismatch on a bad CRC."""
        r = self._record(data, self.m.ARM_CMD_DTYPE, "ArmCmd_")
        f = lambda k: r[k].astype(np.float64)  # noqa: E731
        enable = (int(r["enable"]) >> np.arange(self.m.ARM_JOINTS)) & 1 == 1
        return (
            JointCommand(q=f("q"), dq=f("dq"), tau=f("tau"), kp=f("kp"), kd=f("kd"), enable=enable),
            int(r["crc"]),
            {},
        )


class PegArmDriver(DdsDriver):
    """The simulated peg arm of ``embody robot-sim peg_arm`` on ``iface``, DDS domain ``domain``."""

    def __init__(
        self,
        iface: str = "lo",
        domain: int = 0,
        supervisor: SafetySupervisor | None = None,
        robot: RobotSpec | None = None,
        rate_hz: float = 500.0,
    ):
        from embody.robots import get_robot

        robot = robot or get_robot("peg_arm")
        super().__init__(ArmCodec(robot.n_joints), robot, iface, domain, supervisor, rate_hz)
