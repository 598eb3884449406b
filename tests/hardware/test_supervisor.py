"""SafetySupervisor: the deploy sequence, every fault injection, clamping, e-stop and signals.

A fake clock drives time; every fault asserts both the phase and that the damping command is
what comes back, and a property test feeds random junk requests.
"""

import logging
import os
import signal
import threading

import numpy as np
import pytest

from embody.hardware.interface import JointCommand
from embody.hardware.supervisor import (
    COUNTERS,
    Event,
    Phase,
    PhaseError,
    SafetySupervisor,
    SupervisorConfig,
    UnsafeCommand,
    tilt_rad,
)
from embody.robots import RobotState, get_robot
from embody.rotations import axis_angle_quat, projected_gravity

ARM_CONFIG = SupervisorConfig(max_tilt_rad=None, max_wrench_n=30.0, workspace=((0.1, -0.6, 0.0), (0.9, 0.6, 0.9)))


@pytest.fixture(scope="module")
def h1():
    return get_robot("h1_2")


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:  # peg_arm writes its scene into the cache
        mp.setenv("EMBODY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield get_robot("peg_arm")


class Clock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def state_of(robot, q=None, dq=None, quat=(1.0, 0.0, 0.0, 0.0), temp=40.0, ee=None, wrench=None) -> RobotState:
    n = robot.n_joints
    q = robot.default_pose if q is None else np.asarray(q, float)
    dq = np.zeros(n) if dq is None else np.asarray(dq, float)
    has_imu = robot.sensors.imu_site is not None
    temperature = np.full((1, n), temp) if np.isscalar(temp) else np.asarray(temp, float)[None]
    return RobotState(
        joint_pos=q[None].copy(),
        joint_vel=dq[None].copy(),
        joint_torque=np.zeros((1, n)),
        time=np.zeros(1),
        imu_quat=np.asarray(quat, float)[None] if has_imu else None,
        imu_gyro=np.zeros((1, 3)) if has_imu else None,
        imu_accel=np.array([[0, 0, 9.81]]) if has_imu else None,
        ee_pos=None if ee is None else np.asarray(ee, float)[None],
        wrench=None if wrench is None else np.asarray(wrench, float)[None],
        motor_temperature=temperature,
    )


def arm_state(arm, ee=(0.5, 0.0, 0.4), wrench=(0.0, 0.0, 5.0), **kw) -> RobotState:
    return state_of(arm, ee=ee, wrench=tuple(wrench) + (0.0, 0.0, 0.0), **kw)


def make(robot, config=SupervisorConfig(), **kw):
    clock = Clock()
    return SafetySupervisor(robot, config, clock=clock, **kw), clock


def arm_to(sup, clock, state, phase: Phase) -> None:
    """Drive a fresh supervisor from ZERO_TORQUE to ``phase`` with ``state`` as every reading."""
    sup.step(state, 0.0, None)
    if phase is Phase.ZERO_TORQUE:
        return
    sup.start_ramp()
    sup.step(state, 0.0, None)
    if phase is Phase.RAMP:
        return
    clock.t += sup.config.ramp_s + 1e-6  # (t + ramp_s) - t can round below ramp_s
    sup.step(state, 0.0, None)
    assert sup.phase is Phase.HOLD
    if phase is Phase.POLICY:
        sup.start_policy()


def assert_damping(cmd: JointCommand, sup: SafetySupervisor) -> None:
    assert sup.phase is Phase.DAMPING
    ref = JointCommand.damping(sup.robot.n_joints, sup.config.damping_kd)
    for name in ("q", "dq", "tau", "kp", "kd", "enable"):
        np.testing.assert_array_equal(getattr(cmd, name), getattr(ref, name), err_msg=name)


def assert_within_limits(cmd: JointCommand, robot, factor: float = 2.0) -> None:
    n = robot.n_joints
    for name in ("q", "dq", "tau", "kp", "kd", "enable"):
        assert np.shape(getattr(cmd, name)) == (n,), name
    assert cmd.is_finite()
    assert (robot.lower <= cmd.q).all() and (cmd.q <= robot.upper).all()
    assert (np.abs(cmd.dq) <= robot.velocity_limit).all()
    assert (np.abs(cmd.tau) <= robot.torque_limit).all()
    assert (0 <= cmd.kp).all() and (cmd.kp <= factor * robot.kp).all()
    assert (0 <= cmd.kd).all() and (cmd.kd <= factor * robot.kd).all()


def last_reason(sup) -> str:
    return sup.events[-1].reason


# ---- the sequence --------------------------------------------------------------------------------


def test_full_sequence_h1_2(h1, caplog):
    caplog.set_level(logging.INFO, logger="embody.safety")
    sup, clock = make(h1)
    q0 = np.clip(h1.default_pose + 0.3, h1.lower, h1.upper)
    s0 = state_of(h1, q=q0)

    out = sup.step(s0, 0.0, None)
    assert sup.phase is Phase.ZERO_TORQUE
    assert not out.kp.any() and not out.kd.any() and not out.tau.any()
    with pytest.raises(PhaseError, match="HOLD"):
        sup.start_policy()

    sup.start_ramp()
    assert sup.phase is Phase.RAMP
    clock.t = 10.0  # the ramp starts at the first state it sees, not at start_ramp
    out = sup.step(s0, 0.0, None)
    np.testing.assert_allclose(out.q, q0)
    np.testing.assert_array_equal(out.kp, h1.kp)
    np.testing.assert_array_equal(out.kd, h1.kd)
    with pytest.raises(PhaseError):
        sup.start_policy()

    clock.t = 11.0  # midway: halfway between the measured pose and the default pose
    out = sup.step(state_of(h1, q=(q0 + h1.default_pose) / 2), 0.0, None)
    assert sup.phase is Phase.RAMP
    np.testing.assert_allclose(out.q, (q0 + h1.default_pose) / 2, atol=1e-12)

    clock.t = 12.0  # the end: the default pose, and HOLD
    out = sup.step(state_of(h1), 0.0, None)
    assert sup.phase is Phase.HOLD
    np.testing.assert_array_equal(out.q, h1.default_pose)
    clock.t = 12.5
    out = sup.step(state_of(h1), 0.0, JointCommand.pd(h1, h1.lower))  # requests are ignored in HOLD
    np.testing.assert_array_equal(out.q, h1.default_pose)
    np.testing.assert_array_equal(out.kp, h1.kp)

    sup.start_policy()
    out = sup.step(state_of(h1), 0.0, None)  # no request yet: hold the default pose
    np.testing.assert_array_equal(out.q, h1.default_pose)
    target = h1.default_pose + 0.01
    out = sup.step(state_of(h1), 0.0, JointCommand.pd(h1, target))
    np.testing.assert_allclose(out.q, target)
    assert sup.counters["clamped"] == 0
    out = sup.step(state_of(h1), 0.0, None)  # the policy skipped a tick: hold its last command
    np.testing.assert_allclose(out.q, target)

    sup.estop()
    assert sup.phase is Phase.POLICY  # latched at the next step
    clock.t = 13.0
    assert_damping(sup.step(state_of(h1), 0.0, JointCommand.pd(h1, target)), sup)
    assert_damping(sup.step(state_of(h1), 0.0, JointCommand.pd(h1, target)), sup)  # latched

    transitions = [(e.old, e.new) for e in sup.events]
    assert transitions == [
        (Phase.ZERO_TORQUE, Phase.RAMP),
        (Phase.RAMP, Phase.HOLD),
        (Phase.HOLD, Phase.POLICY),
        (Phase.POLICY, Phase.DAMPING),
    ]
    assert all(isinstance(e, Event) and e.reason for e in sup.events)
    assert sup.events[1].time == 12.0 and sup.events[-1] == Event(13.0, Phase.POLICY, Phase.DAMPING, "e-stop")
    assert sup.counters["estop"] == 1 and sup.counters["faults"] == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "embody.safety"]
    for e in sup.events:  # every transition is also logged, with its reason
        assert any(e.new.name in m and e.reason in m for m in logged)


def test_zero_torque_runs_no_checks(h1):
    """Before the operator arms the robot there may be no state at all: not a fault."""
    sup, _ = make(h1)
    out = sup.step(None, float("inf"), None)
    assert sup.phase is Phase.ZERO_TORQUE and not out.kp.any() and not out.kd.any()
    sup.step(state_of(h1, temp=150.0, quat=axis_angle_quat(np.array([1.0, 0, 0]), np.array([2.0]))[0]), 0.0, None)
    assert sup.phase is Phase.ZERO_TORQUE


def test_arms_stay_braked_before_the_ramp(h1):
    """passive_before_ramp: disabled motors (an arm's brakes hold it), not enabled ones with zero torque."""
    enabled, _ = make(h1)
    braked, _ = make(h1, SupervisorConfig(passive_before_ramp=True))
    assert enabled.step(None, 0.0, None).enable.all()
    out = braked.step(None, 0.0, None)
    assert not out.enable.any() and not out.kp.any() and not out.tau.any()


def test_start_policy_outside_hold_raises(h1):
    sup, clock = make(h1)
    with pytest.raises(PhaseError, match="start_policy.*HOLD.*ZERO_TORQUE"):
        sup.start_policy()
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    with pytest.raises(PhaseError):
        sup.start_ramp()
    with pytest.raises(PhaseError, match="DAMPING"):
        sup.reset()  # reset leaves DAMPING only: it must not drop a standing robot to zero torque


def test_reset_from_damping(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    sup.estop("test")
    sup.step(state_of(h1), 0.0, None)
    sup.reset()
    assert sup.phase is Phase.ZERO_TORQUE
    assert sup.events[-1].old is Phase.DAMPING and sup.events[-1].reason == "reset"
    out = sup.step(state_of(h1), 0.0, None)
    assert not out.kd.any()
    # re-armed, the ramp starts again from the newly measured pose
    sup.start_ramp()
    q1 = np.clip(h1.default_pose - 0.2, h1.lower, h1.upper)
    np.testing.assert_allclose(sup.step(state_of(h1, q=q1), 0.0, None).q, q1)


def test_estop_pending_refuses_start(h1):
    sup, _ = make(h1)
    sup.estop()
    with pytest.raises(PhaseError, match="e-stop"):
        sup.start_ramp()
    assert_damping(sup.step(None, float("inf"), None), sup)  # e-stop works in ZERO_TORQUE too


# ---- faults --------------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", [Phase.RAMP, Phase.HOLD, Phase.POLICY])
def test_stale_state(h1, phase):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), phase)
    assert sup.phase is phase
    assert sup.step(state_of(h1), 0.1, None).is_finite()  # exactly the watchdog: still fresh
    assert sup.phase is phase
    assert_damping(sup.step(state_of(h1), 0.25, JointCommand.pd(h1, h1.default_pose)), sup)
    assert last_reason(sup) == "stale state (age 0.25 s > 0.1 s)"
    assert sup.counters["stale_state"] == 1


@pytest.mark.parametrize("age", [0.0, float("inf"), float("nan")])
def test_state_none(h1, age):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    assert_damping(sup.step(None, age, JointCommand.pd(h1, h1.default_pose)), sup)
    assert last_reason(sup).startswith("stale state")


def test_non_finite_state(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.HOLD)
    dq = np.zeros(h1.n_joints)
    dq[3] = np.nan
    assert_damping(sup.step(state_of(h1, dq=dq), 0.0, None), sup)
    assert "non-finite state" in last_reason(sup) and h1.joint_names[3] in last_reason(sup)
    assert sup.counters["non_finite_state"] == 1


@pytest.mark.parametrize("field,value", [("q", np.nan), ("tau", np.inf), ("kp", -np.inf), ("dq", np.nan)])
def test_non_finite_request(h1, field, value):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    request = JointCommand.pd(h1, h1.default_pose)
    getattr(request, field)[5] = value
    out = sup.step(state_of(h1), 0.0, request)
    assert_damping(out, sup)
    assert out.is_finite()
    assert last_reason(sup).startswith("non-finite command from the policy")
    assert h1.joint_names[5] in last_reason(sup)
    assert sup.counters["non_finite_command"] == 1


def test_malformed_request(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    request = JointCommand.pd(h1, h1.default_pose)
    request.q = request.q[:5]
    assert_damping(sup.step(state_of(h1), 0.0, request), sup)
    assert "shape (5,)" in last_reason(sup)


def test_fall(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    x = np.array([1.0, 0.0, 0.0])
    leaning = 2.0 * axis_angle_quat(x, np.array([0.9]))[0]  # within 1 rad; not unit on purpose
    sup.step(state_of(h1, quat=leaning), 0.0, None)
    assert sup.phase is Phase.POLICY
    fallen = axis_angle_quat(np.array([0.6, 0.8, 0.0]), np.array([1.2]))[0]
    assert_damping(sup.step(state_of(h1, quat=fallen), 0.0, None), sup)
    assert last_reason(sup).startswith("fall: tilt 68.8°")
    assert sup.counters["fall"] == 1


def test_tilt_matches_projected_gravity():
    rng = np.random.default_rng(1)
    quats = rng.normal(size=(50, 4))
    unit = quats / np.linalg.norm(quats, axis=1, keepdims=True)
    expected = np.arccos(np.clip(-projected_gravity(unit)[:, 2], -1, 1))
    np.testing.assert_allclose([tilt_rad(q) for q in quats], expected, atol=1e-7)


def test_yaw_is_not_a_fall(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    sup.step(state_of(h1, quat=axis_angle_quat(np.array([0.0, 0.0, 1.0]), np.array([3.0]))[0]), 0.0, None)
    assert sup.phase is Phase.POLICY


def test_over_temperature_names_the_joint(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.HOLD)
    temp = np.full(h1.n_joints, 60.0)
    temp[3] = 100.0  # at the limit: fine
    sup.step(state_of(h1, temp=temp), 0.0, None)
    assert sup.phase is Phase.HOLD
    temp[9] = 112.0
    assert_damping(sup.step(state_of(h1, temp=temp), 0.0, None), sup)
    assert last_reason(sup) == f"over-temperature: {h1.joint_names[9]!r} at 112.0 °C > 100 °C"


def test_over_speed_names_the_joint(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    dq = np.zeros(h1.n_joints)
    dq[16] = -1.1 * h1.velocity_limit[16]
    sup.step(state_of(h1, dq=dq), 0.0, None)
    assert sup.phase is Phase.POLICY
    dq[16] = -1.3 * h1.velocity_limit[16]
    assert_damping(sup.step(state_of(h1, dq=dq), 0.0, None), sup)
    assert last_reason(sup).startswith(f"over-speed: {h1.joint_names[16]!r}")
    assert sup.counters["over_speed"] == 1


def test_arm_needs_an_arm_config(arm):
    with pytest.raises(ValueError, match="max_tilt_rad=None"):
        SafetySupervisor(arm)  # the default tilt check needs an IMU the arm lacks


def test_arm_wrist_force(arm):
    sup, clock = make(arm, ARM_CONFIG)
    arm_to(sup, clock, arm_state(arm, wrench=(0.0, 0.0, 5.0)), Phase.POLICY)  # ‖f₀‖ = 5 N: the peg
    sup.step(arm_state(arm, wrench=(5.0, 0.0, 0.0)), 0.0, None)  # the wrist turned: same weight
    sup.step(arm_state(arm, wrench=(0.0, 20.0, 25.0)), 0.0, None)  # 32 N, 27 N above the nominal
    assert sup.phase is Phase.POLICY
    out = sup.step(arm_state(arm, wrench=(0.0, 0.0, 40.0)), 0.0, JointCommand.pd(arm, arm.default_pose))
    assert_damping(out, sup)
    assert last_reason(sup).startswith("wrist force") and "35.0 N > 30 N" in last_reason(sup)
    assert sup.counters["wrench"] == 1


def test_arm_missing_wrench_is_a_fault(arm):
    sup, clock = make(arm, ARM_CONFIG)
    arm_to(sup, clock, arm_state(arm), Phase.HOLD)
    assert_damping(sup.step(state_of(arm, ee=(0.5, 0.0, 0.4)), 0.0, None), sup)
    assert "no wrench" in last_reason(sup)


@pytest.mark.parametrize("ee", [(0.95, 0.0, 0.4), (0.5, 0.0, -0.01), (0.5, -0.7, 0.4)])
def test_arm_workspace(arm, ee):
    sup, clock = make(arm, ARM_CONFIG)
    arm_to(sup, clock, arm_state(arm), Phase.POLICY)
    sup.step(arm_state(arm, ee=(0.85, 0.5, 0.05)), 0.0, None)
    assert sup.phase is Phase.POLICY
    assert_damping(sup.step(arm_state(arm, ee=ee), 0.0, JointCommand.pd(arm, arm.default_pose)), sup)
    assert last_reason(sup).startswith("workspace: ee_pos")
    assert sup.counters["workspace"] == 1


# ---- clamping ------------------------------------------------------------------------------------


def test_out_of_limit_request_clamped_and_counted(h1, caplog):
    caplog.set_level(logging.WARNING, logger="embody.safety")
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    n = h1.n_joints
    request = JointCommand(
        q=h1.upper + 1.0,
        dq=10 * h1.velocity_limit,
        tau=-10 * h1.torque_limit,
        kp=10 * h1.kp,
        kd=np.full(n, -1.0),
        enable=np.ones(n, bool),
    )
    out = sup.step(state_of(h1), 0.0, request)
    assert sup.phase is Phase.POLICY
    assert_within_limits(out, h1)
    np.testing.assert_array_equal(out.kp, 2 * h1.kp)
    np.testing.assert_array_equal(out.kd, 0.0)
    np.testing.assert_array_equal(out.dq, h1.velocity_limit)
    np.testing.assert_array_equal(out.tau, -h1.torque_limit)
    # tau is at -limit, so the torque window lets q only at or above the measured pose
    assert (out.q >= h1.default_pose - 1e-12).all()
    assert sup.counters["clamped"] == 1
    for what in ("gain", "dq", "tau", "torque"):
        assert sup.counters[f"clamped_{what}"] == n, what
    messages = [r.getMessage() for r in caplog.records if "clamped" in r.getMessage()]
    assert len(messages) == n and any(repr(h1.joint_names[3]) in m for m in messages)

    clock.t += 0.5  # within a second: counted, not logged again
    sup.step(state_of(h1), 0.0, request)
    assert sup.counters["clamped"] == 2
    assert len([r for r in caplog.records if "clamped" in r.getMessage()]) == n
    clock.t += 0.6
    sup.step(state_of(h1), 0.0, request)
    assert len([r for r in caplog.records if "clamped" in r.getMessage()]) == 2 * n


def test_joint_limit_clamp(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    request = JointCommand.pd(h1, h1.default_pose)
    request.q[13] = h1.lower[13] - 0.5  # out of range; kp 0 there so the torque window is open
    request.kp[13] = 0.0
    out = sup.step(state_of(h1), 0.0, request)
    assert out.q[13] == h1.lower[13]
    assert sup.counters["clamped_q"] == 1 and sup.counters["clamped_torque"] == 0


def test_torque_window(h1):
    """|tau + kp (q − q_m)| stays within the torque limit at the measured pose."""
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    q_m = h1.default_pose.copy()
    q_m[3] = 0.2  # left knee
    request = JointCommand.pd(h1, h1.default_pose)
    request.q[3], request.tau[3] = 1.8, 50.0  # 300 × 1.6 + 50 = 530 N·m wanted, limit 300
    out = sup.step(state_of(h1, q=q_m), 0.0, request)
    effort = out.tau + out.kp * (out.q - q_m)
    assert (np.abs(effort) <= h1.torque_limit + 1e-9).all()
    assert effort[3] == pytest.approx(h1.torque_limit[3])
    assert out.q[3] == pytest.approx(0.2 + 250.0 / 300.0)
    assert sup.counters["clamped_torque"] == 1 and sup.counters["clamped_q"] == 0


def test_random_junk_requests(h1):
    """Property: whatever the policy sends, what leaves is finite and within limits, or damping."""
    rng = np.random.default_rng(0)
    sup, clock = make(h1)
    n = h1.n_joints
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    specials = np.array([np.nan, np.inf, -np.inf, 1e308, -1e308, 1e-320, 0.0])
    for _ in range(300):
        fields = {}
        for name in ("q", "dq", "tau", "kp", "kd"):
            a = rng.normal(0, 10.0 ** rng.integers(-2, 6), n)
            if rng.random() < 0.3:
                a[rng.integers(0, n, rng.integers(1, 4))] = rng.choice(specials)
            fields[name] = a
        request = JointCommand(enable=rng.random(n) < 0.9, **fields)
        q_m = np.clip(h1.default_pose + rng.normal(0, 0.5, n), h1.lower - 0.1, h1.upper + 0.1)
        clock.t += 0.002
        out = sup.step(state_of(h1, q=q_m), 0.0, request if rng.random() < 0.9 else None)
        assert out.is_finite()
        if sup.phase is Phase.DAMPING:
            assert_damping(out, sup)
            assert not request.is_finite()
            sup.reset()
            arm_to(sup, clock, state_of(h1), Phase.POLICY)
        else:
            assert_within_limits(out, h1)
    assert sup.counters["non_finite_command"] > 10 and sup.counters["clamped"] > 100


# ---- e-stop and signals --------------------------------------------------------------------------


def test_estop_from_another_thread(h1):
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    thread = threading.Thread(target=sup.estop, args=("operator button",))
    thread.start()
    thread.join()
    assert_damping(sup.step(state_of(h1), 0.0, JointCommand.pd(h1, h1.default_pose)), sup)
    assert last_reason(sup) == "operator button"


def test_concurrent_steps_and_estop(h1):
    """A writer thread stepping at full speed while another thread e-stops: it always lands."""
    sup, clock = make(h1)
    arm_to(sup, clock, state_of(h1), Phase.POLICY)
    s, request, outputs = state_of(h1), JointCommand.pd(h1, h1.default_pose), []
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            outputs.append(sup.step(s, 0.0, request))

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(outputs) < 50:
            stop.wait(0.001)
        sup.estop()
        while sup.phase is not Phase.DAMPING:
            stop.wait(0.001)
    finally:
        stop.set()
        thread.join()
    assert_damping(sup.step(s, 0.0, request), sup)
    assert all(o.is_finite() for o in outputs)


def test_sigint_via_signal_handlers(h1):
    original = signal.getsignal(signal.SIGINT)
    received = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    sup, clock = make(h1)
    try:
        arm_to(sup, clock, state_of(h1), Phase.POLICY)
        sup.install_signal_handlers()
        os.kill(os.getpid(), signal.SIGINT)
        assert received == []  # the first Ctrl-C damps the robot rather than ending the program
        assert_damping(sup.step(state_of(h1), 0.0, JointCommand.pd(h1, h1.default_pose)), sup)
        assert last_reason(sup) == "signal SIGINT"
        os.kill(os.getpid(), signal.SIGINT)  # a second one goes to the previous handler
        assert received == [signal.SIGINT]
        sup.uninstall_signal_handlers()
        assert signal.getsignal(signal.SIGTERM) != sup._on_signal
        os.kill(os.getpid(), signal.SIGINT)
        assert received == [signal.SIGINT, signal.SIGINT]
    finally:
        sup.uninstall_signal_handlers()
        signal.signal(signal.SIGINT, original)


def test_signal_handlers_main_thread_only(h1):
    sup, _ = make(h1)
    errors = []
    thread = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, sup.install_signal_handlers)))
    thread.start()
    thread.join()
    assert len(errors) == 1


# ---- misc ----------------------------------------------------------------------------------------


def test_counters_and_config_validation(h1):
    sup, _ = make(h1)
    assert set(sup.counters) == set(COUNTERS) and not any(sup.counters.values())
    with pytest.raises(ValueError, match="ramp_s"):
        SupervisorConfig(ramp_s=0.0)
    with pytest.raises(ValueError, match="workspace"):
        SupervisorConfig(workspace=((0, 0, 1), (1, 1, 0)))


def test_clamp_alone(h1):
    sup, _ = make(h1)
    with pytest.raises(UnsafeCommand, match="non-finite"):
        sup.clamp(JointCommand.pd(h1, np.full(h1.n_joints, np.nan)))
    assert_within_limits(sup.clamp(JointCommand.pd(h1, h1.upper + 3)), h1)
