"""Arm backends (embody.hardware.arms): connect deadlines over real loopback sockets, missing
extras, pose conversions, the command mappings, and the real ur_rtde / pylibfranka against
loopback servers where the extras are installed."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

import embody.extras
from embody.extras import MissingExtra, available
from embody.robots import RobotState
from embody.hardware.arms import FrankaArm, URArm, ur5e_spec
from embody.hardware.arms import franka as fr
from embody.hardware.arms import ur
from embody.hardware.arms.poses import (axis_angle_to_quat, column_major_to_pose, matrix_to_quat,
                                        pose_to_column_major, quat_to_axis_angle, quat_to_matrix)
from embody.hardware.arms.timeouts import call_with_timeout, probe
from embody.hardware.interface import CartesianCommand, JointCommand, RobotConnectionError
from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig

HAS_UR = available("rtde_receive") and available("rtde_control")
HAS_FRANKA = available("pylibfranka")
needs_ur = pytest.mark.skipif(not HAS_UR, reason="the 'ur' extra (ur-rtde) is not installed")
needs_franka = pytest.mark.skipif(not HAS_FRANKA, reason="the 'franka' extra (pylibfranka) is not installed")
TIMEOUT = 0.5  # s: every connect deadline in this file


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBODY_CACHE_DIR", str(tmp_path))  # FrankaArm's default spec writes a scene file


# ---- loopback servers (real sockets) ---------------------------------------------------------

def bind_fixed_port(port: int) -> socket.socket:
    """A listening socket on ``port`` of the first free 127.0.0.x (the vendor ports are fixed)."""
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
    pytest.skip(f"no 127.0.0.x address with port {port} free")


def closed_address(port: int) -> str:
    """A 127.0.0.x where nothing listens on ``port`` (connecting is refused)."""
    s = bind_fixed_port(port)
    host = s.getsockname()[0]
    s.close()
    return host


@contextmanager
def server(port: int, handler=None):
    """Accept connections on ``port`` (0: any free port) of 127.0.0.x; ``handler(conn, index)`` runs
    per connection on a thread; without one the server accepts and never answers. Yields (host, port)."""
    if port:
        lsock = bind_fixed_port(port)
    else:
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(8)
    conns, stop = [], threading.Event()

    def accept():
        i = 0
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            conns.append(c)
            if handler is not None:
                threading.Thread(target=handler, args=(c, i), daemon=True).start()
            i += 1

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield lsock.getsockname()[:2]
    finally:
        stop.set()
        try:
            lsock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone would not
        except OSError:
            pass
        lsock.close()
        for c in conns:
            c.close()


def recv_exact(c: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


# ---- (1) a silent peer: "did not answer", within the deadline ---------------------------------

def test_probe_fails_fast_on_a_peer_that_accepts_and_never_answers():
    with server(0) as (host, port):
        t0 = time.monotonic()
        with pytest.raises(RobotConnectionError, match="did not answer") as e:
            probe(host, port, TIMEOUT, hello=b"hello?", what="test controller")
        assert time.monotonic() - t0 < TIMEOUT + 1.0
        assert f"{host}:{port}" in str(e.value)


def test_call_with_timeout_bounds_a_call_blocked_on_a_silent_socket():
    """What a library does on a silent peer: connect, then wait for bytes forever (this callable
    releases the GIL while it waits, as ur_rtde's methods do)."""
    with server(0) as (host, port):
        def blocking_library_call():
            s = socket.create_connection((host, port))
            return s.recv(1)  # never returns: the server never writes

        t0 = time.monotonic()
        with pytest.raises(RobotConnectionError, match="did not answer"):
            call_with_timeout(blocking_library_call, TIMEOUT, "fake library connect")
        assert time.monotonic() - t0 < TIMEOUT + 1.0


@needs_ur
def test_ur_connect_fails_fast_on_a_silent_rtde_server():
    with server(ur.RTDE_PORT) as (host, _):
        t0 = time.monotonic()
        with pytest.raises(RobotConnectionError, match="did not answer") as e:
            URArm(host).connect(timeout_s=TIMEOUT)
        assert time.monotonic() - t0 < TIMEOUT + 1.0
        assert f"{host}:{ur.RTDE_PORT}" in str(e.value)


@needs_franka
def test_franka_connect_fails_fast_on_a_silent_controller():
    with server(fr.FRANKA_PORT) as (host, _):
        t0 = time.monotonic()
        with pytest.raises(RobotConnectionError, match="did not answer") as e:
            FrankaArm(host, enforce_realtime=False).connect(timeout_s=TIMEOUT)
        assert time.monotonic() - t0 < TIMEOUT + 1.0
        assert f"{host}:{fr.FRANKA_PORT}" in str(e.value)


# ---- (2) nothing listening: fails at once, naming host:port -----------------------------------

def test_probe_of_a_closed_port_fails_at_once_naming_host_port():
    host = closed_address(ur.RTDE_PORT)
    t0 = time.monotonic()
    with pytest.raises(RobotConnectionError, match="cannot reach") as e:
        probe(host, ur.RTDE_PORT, 5.0)
    assert time.monotonic() - t0 < 0.5  # refused, not timed out
    assert f"{host}:{ur.RTDE_PORT}" in str(e.value) and "refused" in str(e.value).lower()


@needs_ur
def test_ur_connect_to_a_closed_port_fails_at_once():
    host = closed_address(ur.RTDE_PORT)
    t0 = time.monotonic()
    with pytest.raises(RobotConnectionError, match=f"{host}:{ur.RTDE_PORT}"):
        URArm(host).connect(timeout_s=5.0)
    assert time.monotonic() - t0 < 0.5


@needs_franka
def test_franka_connect_to_a_closed_port_fails_at_once():
    host = closed_address(fr.FRANKA_PORT)
    t0 = time.monotonic()
    with pytest.raises(RobotConnectionError, match=f"{host}:{fr.FRANKA_PORT}"):
        FrankaArm(host, enforce_realtime=False).connect(timeout_s=5.0)
    assert time.monotonic() - t0 < 0.5


def test_probe_reports_a_peer_that_closes_without_answering():
    with server(0, handler=lambda c, i: c.close()) as (host, port):
        with pytest.raises(RobotConnectionError, match="closed it without answering"):
            probe(host, port, TIMEOUT)


# ---- (3) missing extras: MissingExtra at connect, never at import ----------------------------

@pytest.mark.parametrize("make, module, extra", [
    (lambda: URArm("127.0.0.1"), "rtde_receive", "ur"),
    (lambda: FrankaArm("127.0.0.1"), "pylibfranka", "franka"),
])
def test_missing_library_raises_missing_extra_at_connect(monkeypatch, make, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError, as if absent
    arm = make()  # constructing needs no library
    with pytest.raises(MissingExtra, match=f"'{extra}' extra"):
        arm.connect(timeout_s=TIMEOUT)


def test_missing_extra_goes_through_embody_extras_require(monkeypatch):
    seen = []

    def require(module, extra):
        seen.append((module, extra))
        raise MissingExtra(f"{module!r} is not installed; it comes with the {extra!r} extra")

    monkeypatch.setattr(embody.extras, "require", require)
    with pytest.raises(MissingExtra, match="'ur' extra"):
        URArm("127.0.0.1").connect(timeout_s=TIMEOUT)
    assert seen == [("rtde_receive", "ur")]


def test_importing_the_arms_needs_no_vendor_library():
    code = ("import sys, embody.hardware.arms; "
            "bad = [m for m in ('rtde_receive', 'rtde_control', 'pylibfranka') if m in sys.modules]; "
            "assert not bad, bad; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "ok", r.stderr


# ---- (4) conversions ---------------------------------------------------------------------------

def test_axis_angle_to_quat_known_values():
    h = math.sqrt(0.5)
    np.testing.assert_allclose(axis_angle_to_quat([0, 0, math.pi / 2]), [h, 0, 0, h], atol=1e-12)
    np.testing.assert_allclose(axis_angle_to_quat([math.pi, 0, 0]), [0, 1, 0, 0], atol=1e-12)
    np.testing.assert_allclose(axis_angle_to_quat([0, 0, 0]), [1, 0, 0, 0], atol=0)
    tiny = np.array([1e-10, -2e-10, 3e-10])
    np.testing.assert_allclose(axis_angle_to_quat(tiny), [1, *(tiny / 2)], rtol=1e-9)
    # a UR rotation vector: 2π/3 about (1, 1, 1)/√3 permutes the axes x → y → z
    q = axis_angle_to_quat(np.full(3, 2 * math.pi / 3 / math.sqrt(3)))
    np.testing.assert_allclose(quat_to_matrix(q), [[0, 0, 1], [1, 0, 0], [0, 1, 0]], atol=1e-12)


def test_axis_angle_round_trips_through_quaternions():
    rng = np.random.default_rng(0)
    axes = rng.normal(size=(200, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    rotvecs = axes * rng.uniform(0, math.pi - 1e-6, size=(200, 1))
    quats = axis_angle_to_quat(rotvecs)
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(quat_to_axis_angle(quats), rotvecs, atol=1e-9)
    np.testing.assert_allclose(ur.tcp_pose_to_pos_quat([0.1, 0.2, 0.3, *rotvecs[0]])[1], quats[0])
    np.testing.assert_allclose(ur.pos_quat_to_tcp_pose([0.1, 0.2, 0.3], quats[0]), [0.1, 0.2, 0.3, *rotvecs[0]],
                               atol=1e-9)


def test_matrix_to_quat_is_exact_in_every_branch():
    rng = np.random.default_rng(1)
    quats = rng.normal(size=(300, 4))
    # rotations by ~π about each axis exercise the branches where w is small
    quats[:3] = [[1e-4, 1, 0, 0], [1e-4, 0, 1, 0], [1e-4, 0, 0, 1]]
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    quats *= np.sign(quats[:, :1])
    for q in quats:
        np.testing.assert_allclose(matrix_to_quat(quat_to_matrix(q)), q, atol=1e-12)


def test_franka_column_major_transform_to_pose():
    # O_T_EE of the "ready" pose with the hand pointing down: x forward, z down (180° about x),
    # then 90° about z; translation (0.307, 0, 0.487) m. libfranka stores it column by column.
    R = np.array([[0, 1, 0], [1, 0, 0], [0, 0, -1]], dtype=float)  # det +1
    t = np.array([0.307, -0.01, 0.487])
    M = np.eye(4)
    M[:3, :3], M[:3, 3] = R, t
    O_T_EE = list(M.flatten(order="F"))  # column-major: the translation is elements 12..14
    assert O_T_EE[12:15] == list(t)
    pos, quat = column_major_to_pose(O_T_EE)
    np.testing.assert_allclose(pos, t)
    h = math.sqrt(0.5)
    np.testing.assert_allclose(quat, [0, h, h, 0], atol=1e-12)  # 180° about (x + y)/√2
    np.testing.assert_allclose(quat_to_matrix(quat), R, atol=1e-12)
    np.testing.assert_allclose(pose_to_column_major(pos, quat), O_T_EE, atol=1e-12)


def test_franka_state_conversion():
    class FrankaState:  # the attributes pylibfranka's RobotState has
        q, dq, tau_J = [0.1] * 7, [0.2] * 7, [0.3] * 7
        O_T_EE = list(np.eye(4).flatten(order="F"))
        O_T_EE[12:15] = [0.5, 0.0, 0.4]
        K_F_ext_hat_K = [1, 2, 3, 4, 5, 6]

    s = fr.state_from_franka(FrankaState, 2.5)
    assert s.joint_pos.shape == (1, 7) and s.wrench.shape == (1, 6) and s.time.tolist() == [2.5]
    np.testing.assert_allclose(s.ee_pos, [[0.5, 0, 0.4]])
    np.testing.assert_allclose(s.ee_quat, [[1, 0, 0, 0]])


def test_jacobian_layouts():
    J = np.arange(42.0).reshape(6, 7)
    np.testing.assert_array_equal(fr.jacobian_6x7(J), J)
    np.testing.assert_array_equal(fr.jacobian_6x7(list(J.flatten(order="F"))), J)


# ---- the command mappings (no robot) -----------------------------------------------------------

def test_franka_joint_law_masks_clips_and_rate_limits():
    cmd = JointCommand(q=np.full(7, 1.0), dq=np.zeros(7), tau=np.full(7, 0.5), kp=np.full(7, 10.0),
                       kd=np.full(7, 2.0), enable=np.array([True] * 6 + [False]))
    limit = np.array([87.0] * 4 + [12.0] * 3)
    q, dq = np.zeros(7), np.full(7, 0.25)
    tau = fr.joint_torque(cmd, q, dq, limit)
    np.testing.assert_allclose(tau, [0.5 + 10 - 0.5] * 6 + [0.0])
    far = fr.joint_torque(cmd, q - 100, dq, limit)
    np.testing.assert_allclose(far[:6], limit[:6])
    np.testing.assert_allclose(fr.rate_limited(far, np.zeros(7)), [1.0] * 6 + [0.0])  # 1000 N·m/s × 1 ms


def test_franka_cartesian_law():
    J = np.zeros((6, 7))
    J[:, :6] = np.eye(6)  # joints 1..6 move the EE along/about the base axes; joint 7 does nothing
    limit = np.full(7, 1e3)
    target = CartesianCommand(pos=np.array([0.1, 0, 0]), quat=axis_angle_to_quat([0, 0, 0.2]),
                              stiffness=np.array([100.0, 100, 100, 10, 10, 10]), damping=np.full(6, 5.0))
    dq = np.array([0, 0, 0.1, 0, 0, 0, 0])
    tau = fr.cartesian_torque(J, np.zeros(3), np.array([1.0, 0, 0, 0]), dq, target, limit)
    np.testing.assert_allclose(tau, [10, 0, -0.5, 0, 0, 2, 0], atol=1e-12)


class FakeRTDEControl:
    """Records what URArm calls (the library's method names and signatures)."""

    def __init__(self):
        self.calls = []

    def servoJ(self, q, speed, accel, period, lookahead, gain):
        self.calls.append(("servoJ", list(q)))
        return True

    def servoL(self, pose, speed, accel, period, lookahead, gain):
        self.calls.append(("servoL", list(pose)))
        return True

    def servoStop(self, a):
        self.calls.append(("servoStop", a))
        return True

    def stopScript(self):
        self.calls.append(("stopScript",))

    def disconnect(self):
        self.calls.append(("disconnect",))


def connected_ur_with_fake_control(state):
    """A URArm whose library objects are stand-ins: exercises the driver's logic, not ur_rtde."""
    from embody.hardware.arms.timeouts import BlockingCaller

    arm = URArm("127.0.0.1", supervisor=SafetySupervisor(ur5e_spec(), SupervisorConfig(
        max_tilt_rad=None, ramp_s=0.01, workspace=((-1, -1, 0), (1, 1, 1)))))
    arm._ctrl, arm._caller, arm._connected = FakeRTDEControl(), BlockingCaller("fake"), True
    arm.read_state = lambda: state
    arm.state_age = lambda: 0.0
    return arm


def ur_state(q):
    return RobotState(joint_pos=np.asarray(q, float)[None], joint_vel=np.zeros((1, 6)),
                         joint_torque=np.zeros((1, 6)), time=np.zeros(1), ee_pos=np.array([[0.3, 0.0, 0.4]]),
                         ee_quat=np.array([[1.0, 0, 0, 0]]), wrench=np.zeros((1, 6)))


def test_ur_commands_pass_the_supervisor_and_map_onto_servo_calls():
    home = np.array(ur.UR5E_HOME)
    arm = connected_ur_with_fake_control(ur_state(home))
    ctrl, sup = arm._ctrl, arm.supervisor
    request = JointCommand.pd(arm.robot, home + 1.0)  # 1 rad away: beyond the 0.1 rad servo window

    sent = arm.send_command(request)  # ZERO_TORQUE: nothing moves
    assert sup.phase is Phase.ZERO_TORQUE and ctrl.calls == [] and not sent.kp.any()
    sup.start_ramp()
    arm.send_command(request)
    time.sleep(0.02)
    arm.send_command(request)  # ramp done -> HOLD
    sup.start_policy()
    sent = arm.send_command(request)
    name, q = ctrl.calls[-1]
    assert name == "servoJ" and np.allclose(q, sent.q)
    np.testing.assert_allclose(sent.q, home + ur.SERVO_STEP_RAD)  # the supervisor's torque window

    pose = arm.send_cartesian(CartesianCommand(pos=np.array([0.2, 0.0, 2.0]), quat=np.array([0.0, 0, 0, 1]),
                                               stiffness=np.ones(6), damping=np.ones(6)))
    np.testing.assert_allclose(pose.pos, [0.2, 0, 1.0])  # clipped into the workspace box
    assert ctrl.calls[-1][0] == "servoL" and np.allclose(ctrl.calls[-1][1], [0.2, 0, 1.0, 0, 0, math.pi])

    bad = request.copy()
    bad.q[2] = np.nan
    arm.send_command(bad)  # the supervisor latches DAMPING; the NaN never reaches the library
    assert sup.phase is Phase.DAMPING
    assert ctrl.calls[-1] == ("servoStop", arm.stop_decel)
    assert all(np.isfinite(c[1]).all() for c in ctrl.calls if c[0] in ("servoJ", "servoL"))
    n = len(ctrl.calls)
    arm.send_command(request)  # still damping: no second stop
    assert len(ctrl.calls) == n
    assert arm.send_cartesian(CartesianCommand(np.zeros(3), np.array([1.0, 0, 0, 0]), np.ones(6), np.ones(6))) is None
    with pytest.raises(ValueError, match="non-finite"):
        arm.send_cartesian(CartesianCommand(np.array([np.nan, 0, 0]), np.array([1.0, 0, 0, 0]), np.ones(6),
                                            np.ones(6)))

    arm.close()
    assert ctrl.calls[-2:] == [("stopScript",), ("disconnect",)]
    arm.close()  # twice is fine
    with pytest.raises(RobotConnectionError, match="closed"):
        arm.send_command(request)


def test_ur_wrong_joint_count_is_refused():
    arm = connected_ur_with_fake_control(ur_state(ur.UR5E_HOME))
    with pytest.raises(ValueError, match="joints"):
        arm.send_command(JointCommand.zero_torque(7))


class FakeTorques:  # pylibfranka.Torques
    def __init__(self, tau_J):
        self.tau_J, self.motion_finished = list(tau_J), False


class FakeFrankaState:  # the attributes of pylibfranka.RobotState the driver reads
    def __init__(self, q):
        self.q, self.dq, self.tau_J, self.tau_J_d = list(q), [0.5] * 7, [0.0] * 7, [0.0] * 7
        self.O_T_EE = list(np.eye(4).flatten(order="F"))
        self.K_F_ext_hat_K = [0.0] * 6


class FakeFrankaRobot:
    """pylibfranka.Robot and its ActiveControlBase, minus the robot: a 1 kHz readOnce that returns
    a fixed state, and a record of every writeOnce."""

    def __init__(self, state):
        self.state, self.written, self.stopped = state, [], False
        self.fail = threading.Event()  # set: the next readOnce raises, as after a reflex

    def start_torque_control(self):
        return self

    def readOnce(self):
        time.sleep(0.001)
        if self.fail.is_set():
            raise RuntimeError("libfranka: Move command aborted: motion aborted by reflex! [joint_reflex]")
        return self.state, None

    def writeOnce(self, torques):
        self.written.append((np.array(torques.tau_J), torques.motion_finished))

    def read_once(self):
        return self.state

    def stop(self):
        self.stopped = True


def connected_franka_with_fake_library(fake: FakeFrankaRobot) -> FrankaArm:
    """A FrankaArm whose library objects are stand-ins: exercises the driver's loop, not libfranka."""
    from types import SimpleNamespace

    from embody.robots import get_robot

    robot = get_robot("peg_arm")
    arm = FrankaArm("127.0.0.1", supervisor=SafetySupervisor(robot, SupervisorConfig(max_tilt_rad=None, ramp_s=0.01)),
                    robot=robot, command_timeout_s=0.05)
    arm._robot, arm._franka, arm._connected = fake, SimpleNamespace(Torques=FakeTorques), True
    arm._store(fake.state)
    return arm


def wait_ticks(arm: FrankaArm, n: int) -> None:
    """Wait until the control loop has run ``n`` more ticks (a loaded machine may delay it)."""
    target, deadline = arm.stats["ticks"] + n, time.monotonic() + 2.0
    while arm.stats["ticks"] < target and time.monotonic() < deadline:
        time.sleep(0.001)


def test_franka_torque_loop_applies_supervised_commands():
    home = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    fake = FakeFrankaRobot(FakeFrankaState(home))
    arm = connected_franka_with_fake_library(fake)
    sup = arm.supervisor
    arm.send_command(JointCommand.pd(arm.robot, home))  # ZERO_TORQUE: no torque asked, no control started
    assert arm._loop is None and fake.written == []
    sup.start_ramp()
    arm.send_command(JointCommand.pd(arm.robot, home))  # a PD command: the 1 kHz loop starts
    assert arm._loop is not None
    time.sleep(0.02)
    arm.send_command(JointCommand.pd(arm.robot, home))
    sup.start_policy()
    request = JointCommand.pd(arm.robot, home + 0.001)
    sent = arm.send_command(request)
    wait_ticks(arm, 3)
    law = fr.joint_torque(sent, home, np.full(7, 0.5), arm.robot.torque_limit)
    np.testing.assert_allclose(fake.written[-1][0], np.clip(law, -1.0, 1.0))  # rate limit vs tau_J_d = 0
    assert arm.read_state().joint_pos.shape == (1, 7) and arm.state_age() < 0.05

    time.sleep(0.1)  # the caller stalls past command_timeout_s: the loop brakes
    assert arm.stats["stalled_ticks"] > 0
    np.testing.assert_allclose(fake.written[-1][0], -1.0)  # −kd · dq = −4 N·m, rate-limited to −1

    arm.close()
    assert fake.written[-1][1] is True and fake.stopped  # the motion was finished, then stopped
    assert not arm._loop or not arm._loop.is_alive()


def test_franka_loop_failure_damps_and_surfaces():
    home = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    fake = FakeFrankaRobot(FakeFrankaState(home))
    arm = connected_franka_with_fake_library(fake)
    arm.supervisor.start_ramp()
    arm.send_command(JointCommand.pd(arm.robot, home))
    fake.fail.set()
    arm._loop.join(2.0)
    with pytest.raises(RuntimeError, match="reflex"):
        arm.send_command(JointCommand.pd(arm.robot, home))
    arm.supervisor.step(arm._state, 0.0, None)
    assert arm.supervisor.phase is Phase.DAMPING
    arm.close()


def test_drivers_serve_robot_interface_and_refuse_commands_before_connect():
    from embody.hardware.interface import RobotInterface

    ur_arm, franka_arm = URArm("127.0.0.1"), FrankaArm("127.0.0.1")
    assert isinstance(ur_arm, RobotInterface) and isinstance(franka_arm, RobotInterface)
    assert ur_arm.state_age() == math.inf and franka_arm.state_age() == math.inf
    with pytest.raises(RobotConnectionError, match="not connected"):
        ur_arm.send_command(JointCommand.zero_torque(6))
    with pytest.raises(ValueError, match="7 joints"):
        FrankaArm("127.0.0.1", robot=ur5e_spec())
    franka_arm.close()  # closing an unconnected driver is fine, twice too
    franka_arm.close()


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
        self.proc = subprocess.Popen([sys.executable, "-c", FAKE_CONTROLLER, kind], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
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
    t0 = time.monotonic()
    with pytest.raises(RobotConnectionError, match="(?i)incompatible") as e:
        arm.connect(timeout_s=2.0)
    assert time.monotonic() - t0 < 2.0
    assert f"{ctl.host}:{fr.FRANKA_PORT}" in str(e.value) and "version 77" in str(e.value)
    assert arm.server_version == 77
    packets = ctl.first_packets()
    # the probe's Connect has the layout of the one libfranka sent: <III header (command 0, size 16), <HH
    assert packets[0] == fr.franka_hello()
    command, _, size = fr.HEADER.unpack_from(packets[1])
    version, udp_port = fr.CONNECT_REQUEST.unpack_from(packets[1], fr.HEADER.size)
    assert (command, size, len(packets[1])) == (fr.CMD_CONNECT, 16, 16) and version > 0 and udp_port > 0
