"""embody's own DDS messages for the simulated peg arm (no vendor protocol exists for it).

Every field is 4 bytes wide, so the XCDR1 payload is exactly the packed little-endian struct
(``ARM_CMD_DTYPE`` / ``ARM_STATE_DTYPE``) and the CRC (CRC-32/MPEG-2 over all words but the
last, as unitree_hg does) is computed on it directly. No ``from __future__ import annotations``:
cyclonedds resolves the field types at runtime.
"""

from dataclasses import dataclass

import numpy as np
from cyclonedds.idl import IdlStruct, annotations
from cyclonedds.idl.types import array, float32, uint32

ARM_JOINTS = 7
TOPIC_ARM_CMD = "rt/embody/arm_cmd"
TOPIC_ARM_STATE = "rt/embody/arm_state"


@dataclass
@annotations.final
class ArmCmd_(IdlStruct, typename="embody_arm.msg.dds_.ArmCmd_"):
    """The simulated arm's joint command: PD targets and gains, feed-forward torque per joint, float32."""

    seq: uint32  # free for the client (numbered commands when tracing)
    q: array[float32, ARM_JOINTS]
    dq: array[float32, ARM_JOINTS]
    tau: array[float32, ARM_JOINTS]
    kp: array[float32, ARM_JOINTS]
    kd: array[float32, ARM_JOINTS]
    enable: uint32  # bit i enables joint i
    crc: uint32


@dataclass
@annotations.final
class ArmState_(IdlStruct, typename="embody_arm.msg.dds_.ArmState_"):
    """The simulated arm's state: joints, end-effector pose (base frame) and the raw wrist wrench, float32."""

    tick: uint32  # ms of simulated time
    applied: uint32  # crc of the command last applied
    q: array[float32, ARM_JOINTS]
    dq: array[float32, ARM_JOINTS]
    tau: array[float32, ARM_JOINTS]
    ee_pos: array[float32, 3]
    ee_quat: array[float32, 4]  # w, x, y, z
    wrench: array[float32, 6]  # wrist F/T, raw: force [N] then torque [N·m], sensor frame
    crc: uint32


_J = ("<f4", (ARM_JOINTS,))
ARM_CMD_DTYPE = np.dtype(
    [("seq", "<u4"), ("q", *_J), ("dq", *_J), ("tau", *_J), ("kp", *_J), ("kd", *_J), ("enable", "<u4"), ("crc", "<u4")]
)
ARM_STATE_DTYPE = np.dtype(
    [
        ("tick", "<u4"),
        ("applied", "<u4"),
        ("q", *_J),
        ("dq", *_J),
        ("tau", *_J),
        ("ee_pos", "<f4", (3,)),
        ("ee_quat", "<f4", (4,)),
        ("wrench", "<f4", (6,)),
        ("crc", "<u4"),
    ]
)
