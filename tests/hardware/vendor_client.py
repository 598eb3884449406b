"""A client configured as the vendor's SDK configures itself, run as its own process by test_vendor_discovery.

``python vendor_client.py CONFIG DOMAIN JOINT TARGET`` joins DDS domain DOMAIN on "lo" with one of
the configurations below (the CycloneDDS XML the vendor's unitree_sdk2_python builds in
core/channel_config.py for ``ChannelFactoryInitialize(0, "lo")``, read as a fact: interface
named, priority and multicast "default", no peers, no participant index; its <Tracing> element
only writes a log file and is left out). Like the vendor's examples it reads rt/lowstate and
writes rt/lowcmd with default QoS and cyclonedds-python's own serialization, echoes mode_machine
and fills the CRC. It waits for a LowState_ with a valid CRC, drives motor JOINT to TARGET for
1.5 s at 500 Hz (every other motor held at the default pose) and prints one JSON line.
It imports nothing of embody's DDS plumbing: only the message types, CRC and robot spec.
"""

import json
import sys
import time

from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.internal import InvalidSample
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from embody.hardware.unitree import messages as msg
from embody.robots import get_robot

CONFIGS = {
    # unitree_sdk2_python, ChannelFactoryInitialize(domain, "lo")
    "vendor": (
        '<?xml version="1.0" encoding="UTF-8" ?><CycloneDDS><Domain Id="any"><General><Interfaces>'
        '<NetworkInterface name="lo" priority="default" multicast="default"/>'
        "</Interfaces></General></Domain></CycloneDDS>"
    ),
    # what the vendor's cyclonedds 0.10.x does with that config on a "lo" without the MULTICAST flag:
    # multicast off, participant index auto (0-9), localhost as a peer
    "vendor_0_10_lo": (
        '<CycloneDDS><Domain Id="any"><General><Interfaces>'
        '<NetworkInterface name="lo" priority="default" multicast="false"/></Interfaces></General>'
        "<Discovery><MaxAutoParticipantIndex>9</MaxAutoParticipantIndex></Discovery>"
        "</Domain></CycloneDDS>"
    ),
    # the README's loopback settings for a process beside embody
    "readme": (
        '<CycloneDDS><Domain Id="any"><General><Interfaces><NetworkInterface name="lo"/></Interfaces>'
        "<AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex>"
        '<MaxAutoParticipantIndex>60</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers>'
        "</Discovery></Domain></CycloneDDS>"
    ),
}
DISCOVERY_TIMEOUT_S = 20.0
DRIVE_S = 1.5


def latest(reader, report: dict):
    """The newest LowState_ waiting, counting CRCs (None if nothing new)."""
    last = None
    for sample in reader.take(N=32):
        if isinstance(sample, InvalidSample):
            continue
        ok = msg.crc_ok(sample)
        report["crc_ok" if ok else "crc_bad"] += 1
        last = sample if ok else last
    return last


def wait_state(reader, report: dict, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = latest(reader, report)
        if state is not None:
            return state
        time.sleep(0.002)
    return None


def lowcmd(robot, joint: int, target: float, mode_machine: int):
    """All used motors PD-held at the default pose, ``joint`` at ``target``; the CRC filled."""
    motors = [msg.MotorCmd_(mode=0, q=0.0, dq=0.0, tau=0.0, kp=0.0, kd=0.0, reserve=0) for _ in range(msg.NUM_MOTORS)]
    for i in range(robot.n_joints):
        q = target if i == joint else float(robot.default_pose[i])
        motors[i] = msg.MotorCmd_(mode=1, q=q, dq=0.0, tau=0.0, kp=float(robot.kp[i]), kd=float(robot.kd[i]), reserve=0)
    cmd = msg.LowCmd_(mode_pr=0, mode_machine=mode_machine, motor_cmd=motors, reserve=[0] * 4, crc=0)
    cmd.crc = msg.lowcmd_crc(cmd)
    return cmd


def main(config: str, domain: int, joint: int, target: float) -> dict:
    _domain = Domain(domain, CONFIGS[config])  # noqa: F841 -- kept alive, as the SDK keeps its Domain
    dp = DomainParticipant(domain)
    reader = DataReader(dp, Topic(dp, msg.TOPIC_LOWSTATE, msg.LowState_))
    writer = DataWriter(dp, Topic(dp, msg.TOPIC_LOWCMD, msg.LowCmd_))
    report = {"config": config, "crc_ok": 0, "crc_bad": 0}
    t0 = time.monotonic()
    state = wait_state(reader, report, DISCOVERY_TIMEOUT_S)
    report["found_s"] = None if state is None else round(time.monotonic() - t0, 2)
    if state is None:
        return report
    robot = get_robot("h1_2")
    report["mode_machine"], report["q_start"] = state.mode_machine, state.motor_state[joint].q
    end = time.monotonic() + DRIVE_S
    while time.monotonic() < end:
        writer.write(lowcmd(robot, joint, target, state.mode_machine))
        state = latest(reader, report) or state
        time.sleep(0.002)
    time.sleep(0.05)
    state = wait_state(reader, report, 1.0) or state
    report["q_end"] = state.motor_state[joint].q
    return report


if __name__ == "__main__":
    name, dom, j, tgt = sys.argv[1:5]
    print(json.dumps(main(name, int(dom), int(j), float(tgt))), flush=True)
