"""The fast path on the wire: CDR bytes to and from packed C structs, without per-field Python.

cyclonedds's Python serializer walks the 35 nested motor structs field by field (~0.3 ms per
LowCmd_, ~0.5 ms per LowState_ measured), a large share of a 2 ms tick at 500 Hz, in both the
driver and the simulated robot. These final types hold only 1-, 2- and 4-byte fields, so their
XCDR1 encoding is the packed C struct the CRC is computed over, except before motor 0: CDR puts
motor 0's ``mode`` (u8) right after the preceding field and pads 1 byte to its ``q``, where the C
struct pads to 4 bytes first and 3 bytes after ``mode``. From motor 0's ``q`` on, CDR is the C
layout shifted by 4 bytes. ``check_against_cyclonedds`` proves the equivalence at connect time.
"""

from __future__ import annotations

import numpy as np

from ..interface import HardwareError
from . import messages as msg

XCDR1_LE = b"\x00\x01\x00\x00"  # encapsulation header cyclonedds writes for these types
_XCDR2_LE = b"\x00\x07\x00\x00"  # same payload layout for final types of ≤ 4-byte fields
# bytes of the message before motor 0 (mode_pr, mode_machine / version … IMU temperature), C size
_LAYOUT = {"LowCmd_": (2, msg.LOWCMD_SIZE), "LowState_": (70, msg.LOWSTATE_SIZE)}


def to_cdr(packed: bytes | np.ndarray, name: str) -> bytes:
    """CDR sample (header + payload) of a packed C struct ``name`` ("LowCmd_" or "LowState_")."""
    head, size = _LAYOUT[name]
    b = bytes(packed)
    if len(b) != size:
        raise HardwareError(f"{name}: expected {size} packed bytes, got {len(b)}")
    return XCDR1_LE + b[:head] + b[head + 2 : head + 3] + b"\0" + b[head + 6 :]


def from_cdr(data: bytes, name: str) -> np.ndarray:
    """The packed C struct ((size,) uint8) of a received CDR sample; HardwareError if malformed."""
    head, size = _LAYOUT[name]
    if data[:4] not in (XCDR1_LE, _XCDR2_LE):
        raise HardwareError(f"{name}: unsupported CDR encapsulation {bytes(data[:4]).hex()} (expected little endian)")
    payload = np.frombuffer(data, dtype=np.uint8, offset=4)
    if len(payload) != size - 4:
        raise HardwareError(f"{name}: expected a {size - 4}-byte CDR payload, got {len(payload)}")
    out = np.zeros(size, np.uint8)
    out[:head] = payload[:head]
    out[head + 2] = payload[head]
    out[head + 6 :] = payload[head + 2 :]
    return out


def check_against_cyclonedds() -> None:
    """Refuse to run if this cyclonedds serializes the messages differently from ``to_cdr``."""
    rng = np.random.default_rng(0)
    m = lambda: rng.normal(size=msg.NUM_MOTORS)  # noqa: E731
    cmd = msg.lowcmd_record(m(), m(), m(), m(), m(), rng.integers(0, 2, msg.NUM_MOTORS), mode_pr=1, mode_machine=7)
    state = msg.lowstate_record(
        m(),
        m(),
        m(),
        m(),
        rng.integers(20, 60, msg.NUM_MOTORS),
        rng.normal(size=4),
        rng.normal(size=3),
        rng.normal(size=3),
        rng.normal(size=3),
        tick=12345,
        mode_machine=7,
        mode=rng.integers(0, 2, msg.NUM_MOTORS),
        imu_temperature=33,
    )
    for name, packed, unpack in (("LowCmd_", cmd, msg.unpack_lowcmd), ("LowState_", state, msg.unpack_lowstate)):
        reference = unpack(packed.tobytes()).serialize()
        if to_cdr(packed, name) != reference or not np.array_equal(from_cdr(reference, name), packed):
            raise HardwareError(
                f"{name}: this cyclonedds encodes it differently from embody's fast path; "
                "please report the cyclonedds version"
            )
