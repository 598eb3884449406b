"""Unitree H1-2 wire messages: DDS type names, packed C layout, CRC, conversions, bad input."""

import struct
import time

import numpy as np
import pytest

from embody.hardware.unitree.messages import (
    LOWCMD_DTYPE,
    LOWSTATE_DTYPE,
    MOTORSTATE_DTYPE,
    NUM_MOTORS,
    TOPIC_LOWCMD,
    TOPIC_LOWSTATE,
    IMUState_,
    LowCmd_,
    LowState_,
    MotorCmd_,
    MotorState_,
    crc32_core,
    crc32_core_bitwise,
    crc32_mpeg2,
    crc32_mpeg2_bitwise,
    crc_ok,
    lowcmd_arrays,
    lowcmd_crc,
    lowcmd_crc_baseline,
    lowcmd_from_arrays,
    lowcmd_record,
    lowstate_arrays,
    lowstate_crc,
    lowstate_from_arrays,
    lowstate_record,
    pack_lowcmd,
    pack_lowcmd_struct,
    pack_lowstate,
    pack_lowstate_struct,
    unpack_lowcmd,
    unpack_lowstate,
)


def cmd_arrays(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    a = {
        k: rng.normal(scale=s, size=NUM_MOTORS)
        for k, s in (("q", 1.0), ("dq", 3.0), ("tau", 20.0), ("kp", 100.0), ("kd", 3.0))
    }
    return dict(
        a, mode=rng.integers(0, 2, NUM_MOTORS), mode_pr=int(rng.integers(0, 2)), mode_machine=int(rng.integers(0, 256))
    )


def state_arrays(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=4)
    return dict(
        q=rng.normal(size=NUM_MOTORS),
        dq=rng.normal(size=NUM_MOTORS),
        ddq=rng.normal(size=NUM_MOTORS),
        tau_est=rng.normal(size=NUM_MOTORS),
        temperature=rng.integers(20, 80, NUM_MOTORS),
        quaternion=quat / np.linalg.norm(quat),
        gyroscope=rng.normal(size=3),
        accelerometer=rng.normal(size=3) + [0, 0, 9.81],
        rpy=rng.normal(size=3),
        tick=int(rng.integers(0, 2**32)),
        mode_machine=6,
        mode_pr=0,
        mode=rng.integers(0, 2, NUM_MOTORS),
        imu_temperature=41,
        reserve=rng.integers(0, 2**32, 4, dtype=np.uint32),
    )


def test_dds_type_names_match_the_vendor():
    for cls in (MotorCmd_, LowCmd_, IMUState_, MotorState_, LowState_):
        assert cls.__idl__.idl_transformed_typename == f"unitree_hg::msg::dds_::{cls.__name__}"
    assert (TOPIC_LOWCMD, TOPIC_LOWSTATE, NUM_MOTORS) == ("rt/lowcmd", "rt/lowstate", 35)


def test_crc32_mpeg2_check_value():
    assert crc32_mpeg2(b"123456789") == crc32_mpeg2_bitwise(b"123456789") == 0x0376E6E7


@pytest.mark.parametrize(
    "words",
    [
        np.zeros(250, np.uint32),
        np.full(250, 0xFFFFFFFF, np.uint32),
        np.array([], np.uint32),
        np.array([0x80000000], np.uint32),
        *[np.random.default_rng(s).integers(0, 2**32, n, dtype=np.uint32) for s, n in ((0, 250), (1, 522), (2, 7))],
    ],
)
def test_fast_crc_equals_vendor_bitwise_loop(words):
    expected = crc32_core_bitwise(words)
    assert crc32_core(words) == expected
    # the vendor's word loop is CRC-32/MPEG-2 over the words fed most significant byte first
    assert crc32_mpeg2_bitwise(words.astype(">u4").tobytes()) == expected


def test_packed_layout_offsets():
    assert (LOWCMD_DTYPE.itemsize, LOWSTATE_DTYPE.itemsize, MOTORSTATE_DTYPE.itemsize) == (1004, 2092, 56)
    offsets = {name: LOWSTATE_DTYPE.fields[name][1] for name in LOWSTATE_DTYPE.names}
    assert offsets == dict(
        version=0,
        mode_pr=8,
        mode_machine=9,
        tick=12,
        imu_state=16,
        motor_state=72,
        wireless_remote=2032,
        reserve=2072,
        crc=2088,
    )
    assert MOTORSTATE_DTYPE.fields["temperature"][1] == 20 and MOTORSTATE_DTYPE.fields["reserve"][1] == 40
    rec = np.zeros((), LOWCMD_DTYPE)
    rec["motor_cmd"]["q"][0], rec["motor_cmd"]["kd"][1], rec["crc"] = 1.5, -2.25, 0xDEADBEEF
    data = rec.tobytes()
    assert struct.unpack_from("<f", data, 8)[0] == 1.5  # motor_cmd[0].q
    assert struct.unpack_from("<f", data, 4 + 28 + 20)[0] == -2.25  # motor_cmd[1].kd
    assert struct.unpack_from("<I", data, 1000)[0] == 0xDEADBEEF


def test_lowcmd_pack_equals_numpy_record_and_struct_baseline():
    a = cmd_arrays(0)
    msg = lowcmd_from_arrays(**a)
    assert lowcmd_record(**a).tobytes() == pack_lowcmd(msg) == pack_lowcmd_struct(msg)
    assert msg.crc == lowcmd_crc(msg) == lowcmd_crc_baseline(msg) and crc_ok(msg)
    # fields the array builder leaves at zero pack the same way too
    msg.reserve, msg.motor_cmd[5].reserve = [1, 2, 3, 0xFFFFFFFF], 77
    assert pack_lowcmd(msg) == pack_lowcmd_struct(msg)
    assert unpack_lowcmd(pack_lowcmd(msg)) == msg


def test_lowstate_pack_equals_numpy_record_and_struct_baseline():
    a = state_arrays(1)
    msg = lowstate_from_arrays(**a)
    packed = pack_lowstate(msg)
    assert lowstate_record(**a).tobytes() == packed == pack_lowstate_struct(msg)
    words = np.frombuffer(packed, "<u4")[:-1]
    assert msg.crc == lowstate_crc(msg) == crc32_core(words) == crc32_core_bitwise(words) and crc_ok(msg)
    msg.version, msg.wireless_remote, msg.motor_state[2].sensor = [1, 2], bytes(range(40)), [5, 6]
    assert pack_lowstate(msg) == pack_lowstate_struct(msg)
    assert unpack_lowstate(pack_lowstate(msg)) == msg


def test_lowcmd_arrays_round_trip():
    a = cmd_arrays(2)
    msg = lowcmd_from_arrays(**a)
    out = lowcmd_arrays(msg)
    for k in ("q", "dq", "tau", "kp", "kd"):
        np.testing.assert_array_equal(out[k], a[k].astype(np.float32))  # float32 on the wire
        assert out[k].shape == (NUM_MOTORS,) and out[k].dtype == np.float64
    np.testing.assert_array_equal(out["mode"], a["mode"])
    assert (out["mode_pr"], out["mode_machine"]) == (a["mode_pr"], a["mode_machine"])
    assert lowcmd_from_arrays(**out) == msg


def test_lowstate_arrays_round_trip():
    a = state_arrays(3)
    msg = lowstate_from_arrays(**a)
    out = lowstate_arrays(msg)
    assert out.keys() == a.keys()
    for k in ("q", "dq", "ddq", "tau_est", "quaternion", "gyroscope", "accelerometer", "rpy"):
        np.testing.assert_array_equal(out[k], np.asarray(a[k]).astype(np.float32))
    for k in ("temperature", "mode", "reserve"):
        np.testing.assert_array_equal(out[k], a[k])
    assert [out[k] for k in ("tick", "mode_machine", "mode_pr", "imu_temperature")] == [
        a[k] for k in ("tick", "mode_machine", "mode_pr", "imu_temperature")
    ]
    assert msg.motor_state[4].temperature == [a["temperature"][4], 0]
    assert lowstate_from_arrays(**out) == msg


def test_cdr_round_trip_through_cyclonedds():
    cmd = lowcmd_from_arrays(**cmd_arrays(4))
    back = LowCmd_.deserialize(cmd.serialize())
    assert back == cmd and crc_ok(back)
    state = lowstate_from_arrays(**state_arrays(5))
    back = LowState_.deserialize(state.serialize())
    assert back == state and crc_ok(back)


def test_crc_ok_detects_a_changed_field():
    cmd = lowcmd_from_arrays(**cmd_arrays(6))
    cmd.motor_cmd[3].kp += 1.0
    assert not crc_ok(cmd)
    state = lowstate_from_arrays(**state_arrays(7))
    state.tick = (state.tick + 1) % 2**32
    assert not crc_ok(state)
    with pytest.raises(TypeError, match="LowCmd_ or LowState_"):
        crc_ok(MotorCmd_(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0))


def test_unpack_wrong_size_names_the_message():
    with pytest.raises(ValueError, match=r"LowCmd_: expected 1004 bytes.*got 1003"):
        unpack_lowcmd(bytes(1003))
    with pytest.raises(ValueError, match=r"LowState_: expected 2092 bytes.*got 1004"):
        unpack_lowstate(bytes(1004))


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("q", np.zeros(34), r"LowCmd_\.q: expected shape \(35,\)"),
        ("kd", np.zeros((35, 1)), r"LowCmd_\.kd: expected shape"),
        ("kd", np.r_[np.zeros(34), np.nan], r"LowCmd_\.kd: values must be finite"),
        ("tau", np.r_[np.inf, np.zeros(34)], r"LowCmd_\.tau: values must be finite"),
        ("kp", np.full(35, 1e39), r"LowCmd_\.kp: values must be finite float32"),  # overflows float32
        ("mode", np.full(35, 256), r"LowCmd_\.mode: expected integers in \[0, 255\]"),
        ("mode", np.full(35, 0.5), r"LowCmd_\.mode: expected integers"),
        ("mode_machine", 300, r"LowCmd_\.mode_machine"),
        ("mode_pr", 0.0, r"LowCmd_\.mode_pr: expected an integer"),
    ],
)
def test_bad_lowcmd_input_names_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        lowcmd_from_arrays(**dict(cmd_arrays(8), **{field: value}))


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("quaternion", np.zeros(3), r"LowState_\.quaternion: expected shape \(4,\)"),
        ("gyroscope", [0.0, np.nan, 0.0], r"LowState_\.gyroscope: values must be finite"),
        ("temperature", np.full(35, 40000), r"LowState_\.temperature: expected integers"),
        ("tick", 2**32, r"LowState_\.tick"),
    ],
)
def test_bad_lowstate_input_names_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        lowstate_from_arrays(**dict(state_arrays(9), **{field: value}))


def test_pack_rejects_wrong_motor_count():
    msg = lowcmd_from_arrays(**cmd_arrays(10))
    msg.motor_cmd = msg.motor_cmd[:34]
    with pytest.raises(ValueError, match=r"LowCmd_\.motor_cmd: expected 35 entries, got 34"):
        pack_lowcmd(msg)


def test_fast_crc_is_fast():
    # generous bound (loaded CI machines): the bitwise loop takes ~2 ms, the fast form ~5 µs
    words = np.frombuffer(lowcmd_record(**cmd_arrays(11)).tobytes(), "<u4")[:-1]
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        crc32_core(words)
        best = min(best, time.perf_counter() - t0)
    assert best < 200e-6
