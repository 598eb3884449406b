"""Unitree H1-2 low-level messages (``unitree_hg::msg::dds_``): DDS types, packed C layout and CRC.

One message has three forms here:

- the cyclonedds ``IdlStruct`` (``LowCmd_``, ``LowState_``): what DDS publishes (CDR on the wire);
  type names and field order are the vendor's, so vendor peers match the topic type;
- the packed little-endian C struct (``LOWCMD_DTYPE`` 1004 B, ``LOWSTATE_DTYPE`` 2092 B, 4-byte
  alignment, pad bytes zero): what the robot computes the CRC over;
- ``(35,)`` numpy arrays in motor order: what drivers and policies use.

Conversions from arrays go arrays → packed record → CRC → ``IdlStruct``, so the CRC is computed
from exactly the float32 values that go on the wire. Units: q [rad], dq [rad/s], ddq [rad/s²],
tau/tau_est [N·m], kp [N·m/rad], kd [N·m·s/rad], gyroscope [rad/s], accelerometer [m/s²],
rpy [rad], temperatures [°C]. See design.md, "The Unitree H1-2 on the wire".
"""

import operator
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import cyclonedds.idl as idl
import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
import numpy as np

NUM_MOTORS = 35
TOPIC_LOWCMD = "rt/lowcmd"
TOPIC_LOWSTATE = "rt/lowstate"

# --------------------------------------------------------------------------------------------
# DDS types: the vendor's IDL (unitree_hg/msg/dds_), field for field. @final + sequential ids is
# what the vendor's idlc output declares; changing either changes the type and breaks matching.
# --------------------------------------------------------------------------------------------


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorCmd_"):
    """One motor's command: ``mode`` 1 enables it; PD targets and gains and feed-forward torque."""

    mode: types.uint8
    q: types.float32
    dq: types.float32
    tau: types.float32
    kp: types.float32
    kd: types.float32
    reserve: types.uint32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowCmd_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowCmd_"):
    """unitree_hg's low-level command: 35 motor slots, CRC32 over the preceding words."""

    mode_pr: types.uint8
    mode_machine: types.uint8
    motor_cmd: types.array[MotorCmd_, 35]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32


@dataclass
@annotate.final
@annotate.autoid("sequential")
class IMUState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.IMUState_"):
    """The torso IMU: quaternion w,x,y,z, gyroscope [rad/s], accelerometer [m/s²], roll/pitch/yaw [rad]."""

    quaternion: types.array[types.float32, 4]
    gyroscope: types.array[types.float32, 3]
    accelerometer: types.array[types.float32, 3]
    rpy: types.array[types.float32, 3]
    temperature: types.int16


@dataclass
@annotate.final
@annotate.autoid("sequential")
class MotorState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.MotorState_"):
    """One motor's state: position, velocity, acceleration, estimated torque, temperatures."""

    mode: types.uint8
    q: types.float32
    dq: types.float32
    ddq: types.float32
    tau_est: types.float32
    temperature: types.array[types.int16, 2]
    vol: types.float32
    sensor: types.array[types.uint32, 2]
    motorstate: types.uint32
    reserve: types.array[types.uint32, 4]


@dataclass
@annotate.final
@annotate.autoid("sequential")
class LowState_(idl.IdlStruct, typename="unitree_hg.msg.dds_.LowState_"):
    """unitree_hg's low-level state: IMU, 35 motor slots, the remote's bytes, CRC32 over the preceding words."""

    version: types.array[types.uint32, 2]
    mode_pr: types.uint8
    mode_machine: types.uint8
    tick: types.uint32
    imu_state: IMUState_
    motor_state: types.array[MotorState_, 35]
    wireless_remote: types.array[types.uint8, 40]
    reserve: types.array[types.uint32, 4]
    crc: types.uint32


# --------------------------------------------------------------------------------------------
# Packed C layout (little-endian, 4-byte alignment). Field names and order equal the IDL's, so
# one generic walk converts records to messages. Offsets are spelled out rather than derived
# with align=True so that the layout reads exactly as design.md states it.
# --------------------------------------------------------------------------------------------


def _c_struct(fields: list[tuple[str, Any, int]], itemsize: int) -> np.dtype:
    names, formats, offsets = zip(*fields)
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets), "itemsize": itemsize})


MOTORCMD_DTYPE = _c_struct(  # 28 B: mode, 3 pad, 5 × f32, reserve
    [
        ("mode", "u1", 0),
        ("q", "<f4", 4),
        ("dq", "<f4", 8),
        ("tau", "<f4", 12),
        ("kp", "<f4", 16),
        ("kd", "<f4", 20),
        ("reserve", "<u4", 24),
    ],
    28,
)
LOWCMD_DTYPE = _c_struct(  # 1004 B: mode_pr, mode_machine, 2 pad, 35 motors @4, reserve @984, crc @1000
    [
        ("mode_pr", "u1", 0),
        ("mode_machine", "u1", 1),
        ("motor_cmd", (MOTORCMD_DTYPE, (NUM_MOTORS,)), 4),
        ("reserve", ("<u4", (4,)), 984),
        ("crc", "<u4", 1000),
    ],
    1004,
)
IMUSTATE_DTYPE = _c_struct(  # 56 B: 13 × f32, temperature i16, 2 pad
    [
        ("quaternion", ("<f4", (4,)), 0),
        ("gyroscope", ("<f4", (3,)), 16),
        ("accelerometer", ("<f4", (3,)), 28),
        ("rpy", ("<f4", (3,)), 40),
        ("temperature", "<i2", 52),
    ],
    56,
)
MOTORSTATE_DTYPE = _c_struct(  # 56 B: mode, 3 pad, 4 × f32, i16[2], vol, sensor[2], motorstate, reserve[4]
    [
        ("mode", "u1", 0),
        ("q", "<f4", 4),
        ("dq", "<f4", 8),
        ("ddq", "<f4", 12),
        ("tau_est", "<f4", 16),
        ("temperature", ("<i2", (2,)), 20),
        ("vol", "<f4", 24),
        ("sensor", ("<u4", (2,)), 28),
        ("motorstate", "<u4", 36),
        ("reserve", ("<u4", (4,)), 40),
    ],
    56,
)
LOWSTATE_DTYPE = _c_struct(  # 2092 B
    [
        ("version", ("<u4", (2,)), 0),
        ("mode_pr", "u1", 8),
        ("mode_machine", "u1", 9),
        ("tick", "<u4", 12),
        ("imu_state", IMUSTATE_DTYPE, 16),
        ("motor_state", (MOTORSTATE_DTYPE, (NUM_MOTORS,)), 72),
        ("wireless_remote", ("u1", (40,)), 2032),
        ("reserve", ("<u4", (4,)), 2072),
        ("crc", "<u4", 2088),
    ],
    2092,
)

LOWCMD_SIZE = LOWCMD_DTYPE.itemsize
LOWSTATE_SIZE = LOWSTATE_DTYPE.itemsize

# record dtype → IDL class, for the generic record → message walk
_IDL_OF: dict[np.dtype, type] = {
    MOTORCMD_DTYPE: MotorCmd_,
    LOWCMD_DTYPE: LowCmd_,
    IMUSTATE_DTYPE: IMUState_,
    MOTORSTATE_DTYPE: MotorState_,
    LOWSTATE_DTYPE: LowState_,
}

Message = LowCmd_ | LowState_

# --------------------------------------------------------------------------------------------
# CRC-32/MPEG-2 (poly 0x04C11DB7, init 0xFFFFFFFF, no reflection, no final xor), words fed most
# significant byte first. zlib.crc32 is the reflected CRC-32 with the same polynomial; fed
# bit-reversed bytes it runs the same register mirrored, so
#     mpeg2(data) = rev32(zlib.crc32(rev8(data)) ^ 0xFFFFFFFF)
# (the init 0xFFFFFFFF is its own mirror; the xor undoes zlib's final xor).
# --------------------------------------------------------------------------------------------

_POLY = 0x04C11DB7
_REV8 = bytes(int(f"{b:08b}"[::-1], 2) for b in range(256))  # bytes.translate table


def _rev32(x: int) -> int:
    """Bit-reverse a 32-bit int: reverse the bits of each little-endian byte, read big-endian."""
    return int.from_bytes(x.to_bytes(4, "little").translate(_REV8), "big")


def crc32_mpeg2(data: bytes) -> int:
    """CRC-32/MPEG-2 of a byte string, fast (zlib); check value b"123456789" → 0x0376E6E7."""
    return _rev32(zlib.crc32(bytes(data).translate(_REV8)) ^ 0xFFFFFFFF)


def crc32_mpeg2_bitwise(data: bytes) -> int:
    """CRC-32/MPEG-2 of a byte string, bit by bit (reference for ``crc32_mpeg2``)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ _POLY if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


def crc32_core(words: np.ndarray) -> int:
    """The vendor's ``crc32_core`` over all of ``words`` ((n,) uint32), fast: a few µs per LowCmd_.

    Callers of a message leave out its last word (the crc itself); see ``lowcmd_crc``.
    """
    return crc32_mpeg2(np.ascontiguousarray(words, dtype=">u4").tobytes())


def crc32_core_bitwise(words: np.ndarray) -> int:
    """The vendor's C ``crc32_core(uint32_t* ptr, uint32_t len)``, translated literally (slow, ~ms)."""
    crc = 0xFFFFFFFF
    for data in np.asarray(words, dtype=np.uint32).tolist():
        xbit = 1 << 31
        for _ in range(32):
            if crc & 0x80000000:
                crc = ((crc << 1) & 0xFFFFFFFF) ^ _POLY
            else:
                crc = (crc << 1) & 0xFFFFFFFF
            if data & xbit:
                crc ^= _POLY
            xbit >>= 1
    return crc


def _crc_of_packed(data: bytes) -> int:
    """CRC of a packed message: its little-endian words but the last (crc), each MSB first."""
    words = np.frombuffer(data, dtype="<u4", count=len(data) // 4 - 1)
    return crc32_mpeg2(words.astype(">u4").tobytes())


# --------------------------------------------------------------------------------------------
# Message ↔ packed record
# --------------------------------------------------------------------------------------------


def _from_record(cls: type, rec: np.ndarray) -> Any:
    """IDL message(s) from a record: a 0-d record gives one instance, an (n,) record a list."""
    cols = []
    for name in rec.dtype.names:
        col = rec[name]
        if col.dtype.names:
            cols.append(_from_record(_IDL_OF[col.dtype], col))
        elif col.dtype == np.uint8 and col.ndim > rec.ndim:
            cols.append(col.tobytes())  # cyclonedds holds uint8 arrays as bytes (as deserialize returns)
        else:
            cols.append(col.tolist())
    return cls(*cols) if rec.ndim == 0 else list(map(cls, *cols))


def _record(dtype: np.dtype, data: bytes | np.ndarray, name: str) -> np.ndarray:
    if len(data) != dtype.itemsize:
        raise ValueError(f"{name}: expected {dtype.itemsize} bytes (packed C struct), got {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(())


def _check_motors(msg: Message, field: str) -> list:
    motors = getattr(msg, field)
    if len(motors) != NUM_MOTORS:
        raise ValueError(f"{type(msg).__name__}.{field}: expected {NUM_MOTORS} entries, got {len(motors)}")
    return motors


# msg → bytes goes through precompiled struct formats equal to the dtypes above (the tests check
# byte equality with numpy records): reading 35 Python objects is the cost either way, and
# struct.pack measured ~2.5× faster than a numpy structured assignment from nested tuples.
_LOWCMD_FMT = "<2B2x" + "B3x5fI" * NUM_MOTORS + "5I"
_LOWSTATE_FMT = "<2I2B2xI" + "13fh2x" + "B3x4f2hf7I" * NUM_MOTORS + "40B5I"
_LOWCMD_STRUCT = struct.Struct(_LOWCMD_FMT)
_LOWSTATE_STRUCT = struct.Struct(_LOWSTATE_FMT)
assert _LOWCMD_STRUCT.size == LOWCMD_DTYPE.itemsize and _LOWSTATE_STRUCT.size == LOWSTATE_DTYPE.itemsize


def pack_lowcmd(msg: LowCmd_) -> bytes:
    """LowCmd_ as the packed little-endian C struct (1004 bytes, layout ``LOWCMD_DTYPE``), crc as in ``msg``."""
    values: list = [msg.mode_pr, msg.mode_machine]
    for m in _check_motors(msg, "motor_cmd"):
        values += (m.mode, m.q, m.dq, m.tau, m.kp, m.kd, m.reserve)
    values += msg.reserve
    values.append(msg.crc)
    return _pack(_LOWCMD_STRUCT, values, "LowCmd_")


def pack_lowstate(msg: LowState_) -> bytes:
    """LowState_ as the packed little-endian C struct (2092 bytes, layout ``LOWSTATE_DTYPE``), crc as in ``msg``."""
    imu = msg.imu_state
    values: list = [
        *msg.version,
        msg.mode_pr,
        msg.mode_machine,
        msg.tick,
        *imu.quaternion,
        *imu.gyroscope,
        *imu.accelerometer,
        *imu.rpy,
        imu.temperature,
    ]
    for m in _check_motors(msg, "motor_state"):
        values += (m.mode, m.q, m.dq, m.ddq, m.tau_est, *m.temperature, m.vol, *m.sensor, m.motorstate, *m.reserve)
    values += msg.wireless_remote
    values += msg.reserve
    values.append(msg.crc)
    return _pack(_LOWSTATE_STRUCT, values, "LowState_")


def _pack(fmt: struct.Struct, values: list, name: str) -> bytes:
    try:
        return fmt.pack(*values)
    except (struct.error, OverflowError) as e:  # wrong array lengths, integers or floats out of range
        raise ValueError(f"{name}: cannot pack as the C struct ({e})") from None


def unpack_lowcmd(data: bytes) -> LowCmd_:
    """LowCmd_ from its packed C struct (1004 bytes); ValueError on any other size. CRC not checked."""
    return _from_record(LowCmd_, _record(LOWCMD_DTYPE, data, "LowCmd_"))


def unpack_lowstate(data: bytes) -> LowState_:
    """LowState_ from its packed C struct (2092 bytes); ValueError on any other size. CRC not checked."""
    return _from_record(LowState_, _record(LOWSTATE_DTYPE, data, "LowState_"))


def lowcmd_crc(msg: LowCmd_) -> int:
    """The CRC the robot expects in ``msg.crc``."""
    return _crc_of_packed(pack_lowcmd(msg))


def lowstate_crc(msg: LowState_) -> int:
    """The CRC the robot puts in ``msg.crc``."""
    return _crc_of_packed(pack_lowstate(msg))


def packed_crc_ok(data: bytes | np.ndarray) -> bool:
    """Whether a packed LowCmd_/LowState_ (C struct bytes) carries the right crc in its last word."""
    return _crc_of_packed(data) == int(np.frombuffer(data, dtype="<u4")[-1])


def crc_ok(msg: Message) -> bool:
    """Whether ``msg.crc`` matches its contents (LowCmd_ or LowState_)."""
    if isinstance(msg, LowCmd_):
        return lowcmd_crc(msg) == msg.crc
    if isinstance(msg, LowState_):
        return lowstate_crc(msg) == msg.crc
    raise TypeError(f"crc_ok: expected LowCmd_ or LowState_, got {type(msg).__name__}")


# --------------------------------------------------------------------------------------------
# Arrays ↔ messages. Builders write straight into flat views of a zeroed packed buffer (one
# vectorized assignment per field group), CRC the buffer, then build the IdlStruct from it.
# --------------------------------------------------------------------------------------------

_F32_MAX = float(np.finfo(np.float32).max)


def _floats(msg: str, names: tuple[str, ...], values: tuple, shapes: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Float fields stacked into one float64 array; ValueError naming the field on bad input.

    Returns (len(values), n) when all shapes are (n,), else the fields concatenated flat.
    """
    for name, x, shape in zip(names, values, shapes):
        if np.shape(x) != shape:
            raise ValueError(f"{msg}.{name}: expected shape {shape}, got {np.shape(x)}")
    if len(set(shapes)) == 1:
        flat = np.array(values, dtype=np.float64)
    else:
        flat = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in values])
    # one reduction catches NaN (max propagates it), ±inf and values that overflow float32 on the wire
    if not np.abs(flat).max() <= _F32_MAX:
        for name, x in zip(names, values):
            part = np.asarray(x, dtype=np.float64).ravel()
            bad = np.flatnonzero(~(np.abs(part) <= _F32_MAX))
            if bad.size:
                raise ValueError(f"{msg}.{name}: values must be finite float32, got {part[bad[0]]} at index {bad[0]}")
    return flat


_BOUNDS = {np.uint8: (0, 0xFF), np.int16: (-0x8000, 0x7FFF), np.uint32: (0, 0xFFFFFFFF)}  # np.iinfo is slow


def _ints(msg: str, name: str, x: Any, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """``x`` as an integer array of ``dtype``; ValueError naming the field if it does not fit."""
    a = np.asarray(x)
    if a.shape != shape:
        raise ValueError(f"{msg}.{name}: expected shape {shape}, got {a.shape}")
    if a.dtype == dtype or a.dtype == np.bool_:
        return a
    lo, hi = _BOUNDS[dtype]
    kind = a.dtype.kind
    if kind in "iu":
        if a.min() >= lo and a.max() <= hi:
            return a
    elif kind != "f":
        raise ValueError(f"{msg}.{name}: expected integers, got dtype {a.dtype}")
    ok = (a >= lo) & (a <= hi) & (a == np.trunc(a))  # NaN fails every comparison
    if not ok.all():
        i = int(np.flatnonzero(~ok.ravel())[0])
        raise ValueError(f"{msg}.{name}: expected integers in [{lo}, {hi}], got {a.ravel()[i]} at index {i}")
    return a


def _scalar(msg: str, name: str, x: Any, dtype: type) -> int:
    try:
        v = operator.index(x)
    except TypeError:
        raise ValueError(f"{msg}.{name}: expected an integer, got {x!r}") from None
    lo, hi = _BOUNDS[dtype]
    if not lo <= v <= hi:
        raise ValueError(f"{msg}.{name}: expected an integer in [{lo}, {hi}], got {v}")
    return v


_M = (NUM_MOTORS,)
_CMD_FLOATS = ("q", "dq", "tau", "kp", "kd")


def lowcmd_record(
    q: np.ndarray,
    dq: np.ndarray,
    tau: np.ndarray,
    kp: np.ndarray,
    kd: np.ndarray,
    mode: np.ndarray,
    mode_pr: int = 0,
    mode_machine: int = 0,
    reserve: np.ndarray | None = None,
) -> np.ndarray:
    """The packed LowCmd_ ((1004,) uint8, little-endian C struct) with its crc filled in.

    q, dq, tau, kp, kd: (35,) float targets and gains (see module docstring for units)
    mode:               (35,) int, 1 enables a motor, 0 leaves it passive
    mode_pr:            0 pitch/roll ankle mode, 1 parallel A/B;  mode_machine: echo of LowState_
    reserve:            (4,) u32, ignored by the robot (default 0)
    """
    vals = _floats("LowCmd_", _CMD_FLOATS, (q, dq, tau, kp, kd), (_M,) * 5)  # (5, 35)
    mode8 = _ints("LowCmd_", "mode", mode, _M, np.uint8)
    buf = np.zeros(LOWCMD_SIZE, np.uint8)
    buf[0] = _scalar("LowCmd_", "mode_pr", mode_pr, np.uint8)
    buf[1] = _scalar("LowCmd_", "mode_machine", mode_machine, np.uint8)
    words = buf.view("<f4")  # 251 words; motor i occupies words 1 + 7i … 7 + 7i
    words[1:246].reshape(NUM_MOTORS, 7)[:, 1:6] = vals.T
    buf[4:984:28] = mode8
    if reserve is not None:
        buf[984:1000].view("<u4")[:] = _ints("LowCmd_", "reserve", reserve, (4,), np.uint32)
    buf[1000:].view("<u4")[0] = _crc_of_packed(buf)
    return buf


def lowcmd_from_arrays(
    q: np.ndarray,
    dq: np.ndarray,
    tau: np.ndarray,
    kp: np.ndarray,
    kd: np.ndarray,
    mode: np.ndarray,
    mode_pr: int = 0,
    mode_machine: int = 0,
    reserve: np.ndarray | None = None,
) -> LowCmd_:
    """A LowCmd_ with crc filled from (35,) arrays; arguments as ``lowcmd_record``."""
    buf = lowcmd_record(q, dq, tau, kp, kd, mode, mode_pr, mode_machine, reserve)
    return _from_record(LowCmd_, buf.view(LOWCMD_DTYPE).reshape(()))


def lowcmd_arrays(msg: LowCmd_ | bytes) -> dict[str, Any]:
    """The arrays of a LowCmd_ (or of its packed C struct): q, dq, tau, kp, kd (35,) float64,
    mode (35,) uint8, mode_pr, mode_machine, reserve (4,) uint32.

    ``lowcmd_from_arrays(**lowcmd_arrays(msg))`` rebuilds ``msg`` (with a fresh crc).
    """
    rec = _record(LOWCMD_DTYPE, msg if isinstance(msg, (bytes, np.ndarray)) else pack_lowcmd(msg), "LowCmd_")
    motors = rec["motor_cmd"]
    out: dict[str, Any] = {name: motors[name].astype(np.float64) for name in _CMD_FLOATS}
    out.update(
        mode=motors["mode"].copy(),
        mode_pr=int(rec["mode_pr"]),
        mode_machine=int(rec["mode_machine"]),
        reserve=rec["reserve"].copy(),
    )
    return out


_STATE_FLOATS = ("q", "dq", "ddq", "tau_est", "quaternion", "gyroscope", "accelerometer", "rpy")
_STATE_SHAPES = (_M, _M, _M, _M, (4,), (3,), (3,), (3,))


def lowstate_record(
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
    tau_est: np.ndarray,
    temperature: np.ndarray,
    quaternion: np.ndarray,
    gyroscope: np.ndarray,
    accelerometer: np.ndarray,
    rpy: np.ndarray,
    *,
    tick: int = 0,
    mode_machine: int = 0,
    mode_pr: int = 0,
    mode: np.ndarray | None = None,
    imu_temperature: int = 0,
    reserve: np.ndarray | None = None,
) -> np.ndarray:
    """The packed LowState_ ((2092,) uint8, little-endian C struct) with its crc filled in.

    q, dq, ddq, tau_est: (35,) motor state;  temperature: (35,) int °C (into temperature[0])
    quaternion: (4,) w, x, y, z;  gyroscope, accelerometer, rpy: (3,) torso IMU
    tick: u32 ms counter;  mode: (35,) motor modes (default 0);  reserve: (4,) u32;  other fields stay 0
    """
    flat = _floats(
        "LowState_", _STATE_FLOATS, (q, dq, ddq, tau_est, quaternion, gyroscope, accelerometer, rpy), _STATE_SHAPES
    )
    temp = _ints("LowState_", "temperature", temperature, _M, np.int16)
    mode8 = _ints("LowState_", "mode", np.zeros(_M, np.uint8) if mode is None else mode, _M, np.uint8)
    buf = np.zeros(LOWSTATE_SIZE, np.uint8)
    buf[8] = _scalar("LowState_", "mode_pr", mode_pr, np.uint8)
    buf[9] = _scalar("LowState_", "mode_machine", mode_machine, np.uint8)
    buf[12:16].view("<u4")[0] = _scalar("LowState_", "tick", tick, np.uint32)
    words = buf.view("<f4")  # 523 words; IMU floats are words 4…16, motor i words 18 + 14i … 31 + 14i
    words[4:17] = flat[4 * NUM_MOTORS :]
    words[18:508].reshape(NUM_MOTORS, 14)[:, 1:5] = flat[: 4 * NUM_MOTORS].reshape(4, NUM_MOTORS).T
    halves = buf.view("<i2")
    halves[34] = _scalar("LowState_", "imu_temperature", imu_temperature, np.int16)
    halves[46 : 46 + 28 * NUM_MOTORS : 28] = temp  # motor_state[i].temperature[0] at byte 72 + 56 i + 20
    buf[72:2032:56] = mode8
    if reserve is not None:
        buf[2072:2088].view("<u4")[:] = _ints("LowState_", "reserve", reserve, (4,), np.uint32)
    buf[2088:].view("<u4")[0] = _crc_of_packed(buf)
    return buf


def lowstate_from_arrays(
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
    tau_est: np.ndarray,
    temperature: np.ndarray,
    quaternion: np.ndarray,
    gyroscope: np.ndarray,
    accelerometer: np.ndarray,
    rpy: np.ndarray,
    *,
    tick: int = 0,
    mode_machine: int = 0,
    mode_pr: int = 0,
    mode: np.ndarray | None = None,
    imu_temperature: int = 0,
    reserve: np.ndarray | None = None,
) -> LowState_:
    """A LowState_ with crc filled from arrays; arguments as ``lowstate_record``."""
    buf = lowstate_record(
        q,
        dq,
        ddq,
        tau_est,
        temperature,
        quaternion,
        gyroscope,
        accelerometer,
        rpy,
        tick=tick,
        mode_machine=mode_machine,
        mode_pr=mode_pr,
        mode=mode,
        imu_temperature=imu_temperature,
        reserve=reserve,
    )
    return _from_record(LowState_, buf.view(LOWSTATE_DTYPE).reshape(()))


def lowstate_arrays(msg: LowState_ | bytes) -> dict[str, Any]:
    """The arrays of a LowState_ (or of its packed C struct), keyed as ``lowstate_from_arrays``'s arguments.

    q, dq, ddq, tau_est (35,) float64; temperature (35,) int16 (temperature[0]); mode (35,) uint8;
    quaternion (4,), gyroscope, accelerometer, rpy (3,) float64; tick, mode_machine, mode_pr,
    imu_temperature ints.
    """
    rec = _record(LOWSTATE_DTYPE, msg if isinstance(msg, (bytes, np.ndarray)) else pack_lowstate(msg), "LowState_")
    motors, imu = rec["motor_state"], rec["imu_state"]
    out: dict[str, Any] = {name: motors[name].astype(np.float64) for name in ("q", "dq", "ddq", "tau_est")}
    out.update({name: imu[name].astype(np.float64) for name in ("quaternion", "gyroscope", "accelerometer", "rpy")})
    out.update(
        temperature=motors["temperature"][:, 0].copy(),
        mode=motors["mode"].copy(),
        tick=int(rec["tick"]),
        mode_machine=int(rec["mode_machine"]),
        mode_pr=int(rec["mode_pr"]),
        imu_temperature=int(imu["temperature"]),
        reserve=rec["reserve"].copy(),
    )
    return out


# --------------------------------------------------------------------------------------------
# Deliberately straightforward baselines (the vendor SDK's way: one value appended per field, the
# format string parsed on every call, then the bitwise CRC). Kept for the benchmark.
# --------------------------------------------------------------------------------------------


def pack_lowcmd_struct(msg: LowCmd_) -> bytes:
    """LowCmd_ packed with ``struct.pack`` field by field (1004 bytes; baseline)."""
    values = [msg.mode_pr, msg.mode_machine]
    for i in range(NUM_MOTORS):
        values.append(msg.motor_cmd[i].mode)
        values.append(msg.motor_cmd[i].q)
        values.append(msg.motor_cmd[i].dq)
        values.append(msg.motor_cmd[i].tau)
        values.append(msg.motor_cmd[i].kp)
        values.append(msg.motor_cmd[i].kd)
        values.append(msg.motor_cmd[i].reserve)
    values.extend(msg.reserve)
    values.append(msg.crc)
    return struct.pack("<2B2x" + "B3x5fI" * 35 + "5I", *values)


def pack_lowstate_struct(msg: LowState_) -> bytes:
    """LowState_ packed with ``struct.pack`` field by field (2092 bytes; baseline)."""
    imu = msg.imu_state
    values = [*msg.version, msg.mode_pr, msg.mode_machine, msg.tick]
    values += [*imu.quaternion, *imu.gyroscope, *imu.accelerometer, *imu.rpy, imu.temperature]
    for i in range(NUM_MOTORS):
        m = msg.motor_state[i]
        values += [m.mode, m.q, m.dq, m.ddq, m.tau_est, *m.temperature, m.vol, *m.sensor, m.motorstate, *m.reserve]
    values += [*msg.wireless_remote, *msg.reserve, msg.crc]
    return struct.pack("<2I2B2xI" + "13fh2x" + "B3x4f2hf7I" * 35 + "40B5I", *values)


def lowcmd_crc_baseline(msg: LowCmd_) -> int:
    """``lowcmd_crc`` the straightforward way: ``pack_lowcmd_struct`` + ``crc32_core_bitwise`` (~ms)."""
    return crc32_core_bitwise(np.frombuffer(pack_lowcmd_struct(msg), dtype="<u4")[:-1])
