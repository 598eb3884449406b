"""The fast CDR path equals cyclonedds's own serializer byte for byte, and refuses malformed samples."""

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="needs the hardware extra")

from embody.hardware.interface import HardwareError  # noqa: E402
from embody.hardware.unitree import messages as msg  # noqa: E402
from embody.hardware.unitree import wire  # noqa: E402


def random_state(rng) -> np.ndarray:
    m = lambda: rng.normal(size=msg.NUM_MOTORS)  # noqa: E731
    return msg.lowstate_record(
        m(),
        m(),
        m(),
        m(),
        rng.integers(20, 90, msg.NUM_MOTORS),
        rng.normal(size=4),
        rng.normal(size=3),
        rng.normal(size=3),
        rng.normal(size=3),
        tick=int(rng.integers(2**32)),
        mode_machine=5,
        mode=rng.integers(0, 2, msg.NUM_MOTORS),
        imu_temperature=31,
    )


def test_matches_cyclonedds_serializer():
    wire.check_against_cyclonedds()
    packed = random_state(np.random.default_rng(3))
    cdr = wire.to_cdr(packed, "LowState_")
    assert msg.LowState_.deserialize(cdr) == msg.unpack_lowstate(packed.tobytes())
    assert np.array_equal(wire.from_cdr(cdr, "LowState_"), packed) and msg.packed_crc_ok(
        wire.from_cdr(cdr, "LowState_")
    )


def test_lowcmd_round_trip_keeps_the_crc():
    z = np.zeros(msg.NUM_MOTORS)
    packed = msg.lowcmd_record(z + 0.5, z, z, z + 100, z + 2, np.ones(msg.NUM_MOTORS, np.uint8), mode_machine=6)
    back = wire.from_cdr(wire.to_cdr(packed, "LowCmd_"), "LowCmd_")
    assert msg.packed_crc_ok(back) and msg.lowcmd_arrays(back)["mode_machine"] == 6


@pytest.mark.parametrize(
    "data, match",
    [
        (b"\x01\x00\x00\x00" + bytes(2088), "unsupported CDR encapsulation 01000000"),
        (wire.XCDR1_LE + bytes(2000), "expected a 2088-byte CDR payload, got 2000"),
        (b"", "unsupported CDR encapsulation"),
    ],
)
def test_malformed_samples_are_refused_with_the_message_named(data, match):
    with pytest.raises(HardwareError, match=f"LowState_: {match}"):
        wire.from_cdr(data, "LowState_")


def test_wrong_packed_size_is_refused():
    with pytest.raises(HardwareError, match="LowCmd_: expected 1004 packed bytes, got 1000"):
        wire.to_cdr(bytes(1000), "LowCmd_")
