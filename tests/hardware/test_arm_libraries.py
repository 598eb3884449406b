"""Arm backends (embody.hardware.arms): the real ur_rtde and pylibfranka against fake controllers on
loopback, where the extras are installed (the rest of the backends' tests: test_arm_backends.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from arm_helpers import cache_in_tmp, needs_franka, needs_ur  # noqa: F401 - cache_in_tmp: autouse fixture

from embody.hardware.arms import FrankaArm, URArm, ur
from embody.hardware.arms import franka as fr
from embody.hardware.interface import JointCommand, RobotConnectionError

# ---- (5) the real libraries against loopback servers -------------------------------------------
#
# The vendor constructors hold the GIL while they wait for the controller (see timeouts.py), so a
# server thread in this process could never answer them: the fake controllers run in a child
# process. It prints "READY <host>", then one "PACKET <connection> <hex>" line per connection
# (the first message it got); a line "silent" on its stdin stops the RTDE stream.

FAKE_CONTROLLER = r"""
import math, socket, struct, sys, threading, time

def bind(port):
    for x in range(1, 64):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((f"127.0.0.{x}", port))
        except OSError:
            s.close()
            continue
        s.listen(8)
        return s
    sys.exit("no free address")

def recv_exact(c, n):
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data

def report(index, packet):
    print(f"PACKET {index} {packet.hex()}", flush=True)

# RTDE (UR's RTDE guide): >H size, >B type. Output types of the variables ur_rtde asks for.
FMT = {"DOUBLE": ">d", "VECTOR6D": ">6d", "VECTOR3D": ">3d", "UINT64": ">Q", "UINT32": ">I", "INT32": ">i",
       "VECTOR6INT32": ">6i"}
TYPES = {"timestamp": "DOUBLE", "actual_digital_input_bits": "UINT64", "actual_digital_output_bits": "UINT64",
         "actual_execution_time": "DOUBLE", "robot_mode": "INT32", "joint_mode": "VECTOR6INT32",
         "safety_mode": "INT32", "safety_status": "INT32", "actual_tool_accelerometer": "VECTOR3D",
         "speed_scaling": "DOUBLE", "target_speed_fraction": "DOUBLE", "actual_momentum": "DOUBLE",
         "actual_main_voltage": "DOUBLE", "actual_robot_voltage": "DOUBLE", "actual_robot_current": "DOUBLE",
         "runtime_state": "UINT32", "robot_status_bits": "UINT32", "safety_status_bits": "UINT32",
         "payload": "DOUBLE", "payload_cog": "VECTOR3D"}
VALUES = {"actual_q": [0.1, -1.5, 1.4, -1.6, -1.57, 0.3], "actual_qd": [0.0, 0.01, 0.02, 0.03, 0.04, 0.05],
          "target_moment": [1, 2, 3, 4, 5, 6], "actual_TCP_pose": [0.3, -0.1, 0.4, math.pi, 0.0, 0.0],
          "ft_raw_wrench": [1.0, 2.0, -30.0, 0.1, 0.2, 0.3], "actual_TCP_force": [0, 0, 10, 0, 0, 1]}
silent = threading.Event()

def rtde_type(name):
    if name.startswith("output_int_register"):
        return "INT32"
    if name.startswith("output_double_register") or name.startswith("standard_analog"):
        return "DOUBLE"
    return TYPES.get(name, "VECTOR6D")

def send(c, typ, body):
    c.sendall(struct.pack(">HB", 3 + len(body), typ) + body)

def value(name, t):
    fmt = FMT[rtde_type(name)]
    n = int(fmt[1:-1] or 1)
    return struct.pack(fmt, *([t] if name == "timestamp" else VALUES.get(name, [0] * n)))

def rtde(c, index):
    names, first = None, True
    while names is None:
        size, typ = struct.unpack(">HB", recv_exact(c, 3))
        body = recv_exact(c, size - 3)
        if first:
            report(index, struct.pack(">HB", size, typ) + body)
            first = False
        if typ == 86:  # 'V': protocol version accepted
            send(c, 86, b"\x01")
        elif typ == 118:  # 'v': controller version 5.15.0.0
            send(c, 118, struct.pack(">IIII", 5, 15, 0, 0))
        elif typ == 79:  # 'O': >d frequency, comma-separated names -> recipe 1 and their types
            names = [n for n in body[8:].decode().split(",") if n]
            send(c, 79, b"\x01" + ",".join(rtde_type(n) for n in names).encode())
    size, typ = struct.unpack(">HB", recv_exact(c, 3))
    recv_exact(c, size - 3)
    send(c, 83, b"\x01")  # 'S' start accepted
    paused = threading.Event()
    threading.Thread(target=answer_pause, args=(c, paused), daemon=True).start()
    t0 = time.monotonic()
    while not (silent.is_set() or paused.is_set()):
        t = time.monotonic() - t0  # the controller's clock runs at real time
        send(c, 85, b"\x01" + b"".join(value(n, t) for n in names))
        time.sleep(0.002)
    paused.wait()  # silent but connected, like a hung controller (until the client leaves)

def answer_pause(c, paused):  # while streaming: answer 'P' (pause) as a controller does, unless silent
    try:
        while True:
            size, typ = struct.unpack(">HB", recv_exact(c, 3))
            recv_exact(c, size - 3)
            if typ == 80 and not silent.is_set():
                send(c, 80, b"\x01")
                break
    except (OSError, ConnectionError):
        pass
    paused.set()

# libfranka's Connect (research_interface/robot/service_types.h): <III header, <HH request; the
# reply <BH is kIncompatibleLibraryVersion (1) with version 77.
def franka(c, index):
    command, command_id, size = struct.unpack("<III", recv_exact(c, 12))
    report(index, struct.pack("<III", command, command_id, size) + recv_exact(c, size - 12))
    reply = struct.pack("<BH", 1, 77)
    c.sendall(struct.pack("<III", 0, command_id, 12 + len(reply)) + reply)
    while c.recv(1024):
        pass

def serve(handler, lsock):
    index = 0
    while True:
        c, _ = lsock.accept()
        def run(c=c, index=index):
            try:
                handler(c, index)
            except (OSError, ConnectionError):
                pass
            finally:
                c.close()
        threading.Thread(target=run, daemon=True).start()
        index += 1

kind = sys.argv[1]
lsock = bind(30004 if kind == "rtde" else 1337)
print("READY", lsock.getsockname()[0], flush=True)
threading.Thread(target=serve, args=(rtde if kind == "rtde" else franka, lsock), daemon=True).start()
for line in sys.stdin:
    if line.strip() == "silent":
        silent.set()
"""


class FakeController:
    """A fake RTDE ("rtde") or Franka ("franka") controller in a child process."""

    def __init__(self, kind: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE_CONTROLLER, kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["READY"], line
        self.host = line[1]

    def go_silent(self) -> None:
        self.proc.stdin.write("silent\n")
        self.proc.stdin.flush()

    def first_packets(self) -> dict[int, bytes]:
        """Stop the controller; the first message of each connection, by connection index."""
        self.close()
        packets = {}
        for line in self.proc.stdout.read().splitlines():
            _, index, data = line.split()
            packets[int(index)] = bytes.fromhex(data)
        return packets

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # ends its stdin loop: the process exits
            self.proc.wait(5)


@pytest.fixture
def fake_controller():
    made = []

    def make(kind: str) -> FakeController:
        made.append(FakeController(kind))
        return made[-1]

    yield make
    for c in made:
        c.close()


@needs_ur
def test_real_ur_rtde_reads_state_through_urarm(fake_controller):
    rtde = fake_controller("rtde")
    # connect() with the default 5 s deadline; a short call deadline, for the close after the silence
    with URArm(rtde.host, control=False, call_timeout_s=0.3) as arm:
        s = arm.read_state()
        np.testing.assert_allclose(s.joint_pos, [[0.1, -1.5, 1.4, -1.6, -1.57, 0.3]])
        np.testing.assert_allclose(s.joint_vel, [[0.0, 0.01, 0.02, 0.03, 0.04, 0.05]])
        np.testing.assert_allclose(s.joint_torque, [[1, 2, 3, 4, 5, 6]])
        np.testing.assert_allclose(s.ee_pos, [[0.3, -0.1, 0.4]])
        np.testing.assert_allclose(s.ee_quat, [[0, 1, 0, 0]], atol=1e-12)  # rotation vector (π, 0, 0)
        np.testing.assert_allclose(s.wrench, [[1.0, 2.0, -30.0, 0.1, 0.2, 0.3]])
        assert s.time[0] >= 0 and arm.state_age() < 0.1
        rtde.go_silent()  # the controller stops streaming but keeps the connection
        time.sleep(0.2)
        assert arm.state_age() > 0.1  # the supervisor's watchdog would damp now
        with pytest.raises(RuntimeError, match="read-only"):
            arm._execute(JointCommand.pd(arm.robot, np.array(ur.UR5E_HOME)))
    arm.close()  # twice is fine
    packets = rtde.first_packets()
    assert packets[0] == ur.rtde_hello() == packets[1]  # our probe sent exactly what ur_rtde opens with


@needs_ur
def test_real_ur_rtde_tcp_force_is_rotated_into_the_tool_frame(fake_controller):
    rtde = fake_controller("rtde")
    with URArm(rtde.host, control=False, wrench="tcp_force") as arm:
        # base-frame (0, 0, 10) N and (0, 0, 1) N·m seen from a tool turned 180° about x
        np.testing.assert_allclose(arm.read_state().wrench, [[0, 0, -10, 0, 0, -1]], atol=1e-9)


@needs_franka
def test_real_pylibfranka_fails_fast_on_an_incompatible_controller(fake_controller):
    ctl = fake_controller("franka")
    arm = FrankaArm(ctl.host, enforce_realtime=False)
    t0, scheduling = time.monotonic(), (os.sched_getscheduler(0), os.sched_getparam(0))
    with pytest.raises(RobotConnectionError, match="(?i)incompatible") as e:
        arm.connect(timeout_s=2.0)
    assert time.monotonic() - t0 < 2.0
    assert (os.sched_getscheduler(0), os.sched_getparam(0)) == scheduling  # libfranka raised it to FIFO 99
    assert f"{ctl.host}:{fr.FRANKA_PORT}" in str(e.value) and "version 77" in str(e.value)
    assert arm.server_version == 77
    packets = ctl.first_packets()
    # the probe's Connect has the layout of the one libfranka sent: <III header (command 0, size 16), <HH
    assert packets[0] == fr.franka_hello()
    command, _, size = fr.HEADER.unpack_from(packets[1])
    version, udp_port = fr.CONNECT_REQUEST.unpack_from(packets[1], fr.HEADER.size)
    assert (command, size, len(packets[1])) == (fr.CMD_CONNECT, 16, 16) and version > 0 and udp_port > 0
