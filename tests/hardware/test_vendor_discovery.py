"""robot-sim meets a client configured as the vendor's SDK configures itself, unmodified, on loopback.

Each client (tests/hardware/vendor_client.py) is its own process with its own CycloneDDS
configuration: the vendor SDK's for ``ChannelFactoryInitialize(domain, "lo")``, what the vendor's
cyclonedds 0.10.x makes of it on a ``lo`` without the MULTICAST flag, and the README's unicast
settings. Each must find `embody robot-sim h1_2 --band` within the 20 s the issue measured,
read LowState_ with valid CRCs, and drive a knee with its LowCmd_.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("cyclonedds", reason="needs the hardware extra")

from embody.hardware.deploy import start_robot_sim, stop_robot_sim  # noqa: E402
from embody.hardware.robot_sim import H1_2_MODE_MACHINE, sim_control  # noqa: E402

DOMAIN = 50 + os.getpid() % 50  # apart from test_h1_2_loopback's domains (100-199) and a developer's 0
CLIENT = Path(__file__).with_name("vendor_client.py")
LEFT_KNEE, TARGET = 3, 1.0  # rad; the default pose has the knee at 0.36
TOL = 0.15  # rad: a PD position hold of one joint on the band


@pytest.fixture(scope="module")
def sim():
    proc = start_robot_sim("h1_2", "lo", DOMAIN, band=True)
    yield proc
    stop_robot_sim(proc)


def run_client(config: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(CLIENT), config, str(DOMAIN), str(LEFT_KNEE), str(TARGET)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CYCLONEDDS_URI": ""},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("config", ["vendor", "vendor_0_10_lo", "readme"])
def test_client_finds_and_drives_robot_sim(sim, config):
    sim_control(DOMAIN, "lo", reset=True)  # motors passive at the default pose
    time.sleep(0.2)
    report = run_client(config)
    assert report["found_s"] is not None, f"{config}: no rt/lowstate within 20 s; {report}"
    assert report["crc_ok"] > 100 and report["crc_bad"] == 0, report
    assert report["mode_machine"] == H1_2_MODE_MACHINE, report
    assert abs(report["q_start"] - TARGET) > 0.4, report
    assert abs(report["q_end"] - TARGET) < TOL, report  # robot-sim applied the client's commands
