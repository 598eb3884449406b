"""Arm backends (embody.hardware.arms): connect deadlines over real loopback sockets, missing
extras, pose conversions and the command mappings (the real ur_rtde / pylibfranka against loopback
servers: test_arm_libraries.py)."""

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
from arm_helpers import TIMEOUT, cache_in_tmp, needs_franka, needs_ur  # noqa: F401 - cache_in_tmp: autouse fixture

import embody.extras
from embody.extras import MissingExtra
from embody.hardware.arms import FrankaArm, URArm, ur, ur5e_spec
from embody.hardware.arms import franka as fr
from embody.hardware.arms.poses import (
    axis_angle_to_quat,
    column_major_to_pose,
    matrix_to_quat,
    pose_to_column_major,
    quat_to_axis_angle,
    quat_to_matrix,
)
from embody.hardware.arms.timeouts import call_with_timeout, probe
from embody.hardware.interface import CartesianCommand, JointCommand, RobotConnectionError
from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig
from embody.robots import RobotState

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


@pytest.mark.parametrize(
    "make, module, extra",
    [(lambda: URArm("127.0.0.1"), "rtde_receive", "ur"), (lambda: FrankaArm("127.0.0.1"), "pylibfranka", "franka")],
)
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
    code = (
        "import sys, embody.hardware.arms; "
        "bad = [m for m in ('rtde_receive', 'rtde_control', 'pylibfranka') if m in sys.modules]; "
        "assert not bad, bad; print('ok')"
    )
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
    np.testing.assert_allclose(
        ur.pos_quat_to_tcp_pose([0.1, 0.2, 0.3], quats[0]), [0.1, 0.2, 0.3, *rotvecs[0]], atol=1e-9
    )


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
    cmd = JointCommand(
        q=np.full(7, 1.0),
        dq=np.zeros(7),
        tau=np.full(7, 0.5),
        kp=np.full(7, 10.0),
        kd=np.full(7, 2.0),
        enable=np.array([True] * 6 + [False]),
    )
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
    target = CartesianCommand(
        pos=np.array([0.1, 0, 0]),
        quat=axis_angle_to_quat([0, 0, 0.2]),
        stiffness=np.array([100.0, 100, 100, 10, 10, 10]),
        damping=np.full(6, 5.0),
    )
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

    arm = URArm(
        "127.0.0.1",
        supervisor=SafetySupervisor(
            ur5e_spec(), SupervisorConfig(max_tilt_rad=None, ramp_s=0.01, workspace=((-1, -1, 0), (1, 1, 1)))
        ),
    )
    arm._ctrl, arm._caller, arm._connected = FakeRTDEControl(), BlockingCaller("fake"), True
    arm.read_state = lambda: state
    arm.state_age = lambda: 0.0
    return arm


def ur_state(q):
    return RobotState(
        joint_pos=np.asarray(q, float)[None],
        joint_vel=np.zeros((1, 6)),
        joint_torque=np.zeros((1, 6)),
        time=np.zeros(1),
        ee_pos=np.array([[0.3, 0.0, 0.4]]),
        ee_quat=np.array([[1.0, 0, 0, 0]]),
        wrench=np.zeros((1, 6)),
    )


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

    pose = arm.send_cartesian(
        CartesianCommand(
            pos=np.array([0.2, 0.0, 2.0]), quat=np.array([0.0, 0, 0, 1]), stiffness=np.ones(6), damping=np.ones(6)
        )
    )
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
        arm.send_cartesian(CartesianCommand(np.array([np.nan, 0, 0]), np.array([1.0, 0, 0, 0]), np.ones(6), np.ones(6)))

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
    arm = FrankaArm(
        "127.0.0.1",
        supervisor=SafetySupervisor(robot, SupervisorConfig(max_tilt_rad=None, ramp_s=0.01)),
        robot=robot,
        command_timeout_s=0.05,
    )
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
