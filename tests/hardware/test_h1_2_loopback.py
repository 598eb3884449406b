"""The H1-2 deploy path on loopback DDS against `embody robot-sim h1_2` in its own process.

Real parts throughout: cyclonedds on "lo", the vendor's message types and CRC, MuJoCo in real
time. Poses and gaps are asserted, not rates (those go to `embody bench hardware`).
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="needs the hardware extra")

from embody.hardware.deploy import stop_robot_sim  # noqa: E402
from embody.hardware.interface import HardwareError, JointCommand, RobotConnectionError  # noqa: E402
from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig  # noqa: E402
from embody.hardware.unitree import messages as msg  # noqa: E402
from embody.hardware.unitree.h1_2 import H1_2Driver  # noqa: E402
from embody.robots import get_robot  # noqa: E402

DOMAIN = 100 + os.getpid() % 100  # away from the default domain 0 a developer's robot-sim may use
POSE_TOL = 0.1  # rad: PD hold of the default pose under gravity on the band
MAX_GAP_S = 0.25  # a few writer periods of a loaded 2-core machine; the benchmark reports the real numbers


def start_sim(domain: int, band: bool = True) -> subprocess.Popen:
    from embody.hardware.deploy import start_robot_sim

    return start_robot_sim("h1_2", "lo", domain, band)


def wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.fixture(scope="module")
def robot():
    return get_robot("h1_2")


@pytest.fixture(scope="module")
def sim():
    proc = start_sim(DOMAIN)
    yield proc
    stop_robot_sim(proc)


def make_driver(robot, **cfg) -> H1_2Driver:
    """A driver for a fresh start: robot-sim reset to its default pose on the band."""
    from embody.hardware.robot_sim import sim_control

    sim_control(DOMAIN, "lo", reset=True)
    time.sleep(0.2)
    sup = SafetySupervisor(robot, SupervisorConfig(**{"ramp_s": 1.0, "watchdog_s": 0.2, **cfg}))
    driver = H1_2Driver(iface="lo", domain=DOMAIN, supervisor=sup, robot=robot)
    driver.connect(timeout_s=10.0)
    return driver


def hold(driver: H1_2Driver) -> None:
    driver.supervisor.start_ramp()
    assert wait_for(lambda: driver.supervisor.phase is Phase.HOLD, 5.0), driver.supervisor.events


def test_ramp_and_hold_on_the_band(sim, robot):
    with make_driver(robot) as driver:
        hold(driver)
        time.sleep(0.3)
        err_after_ramp = np.abs(driver.read_state().joint_pos[0] - robot.default_pose).max()
        time.sleep(1.0)
        state = driver.read_state()
        assert driver.supervisor.phase is Phase.HOLD
        assert err_after_ramp < POSE_TOL
        assert np.abs(state.joint_pos[0] - robot.default_pose).max() < POSE_TOL
        assert driver.stats["crc_errors"] == 0 and driver.stats["max_state_gap_s"] < MAX_GAP_S


def test_the_writer_runs_under_sched_fifo_where_permitted(sim, robot):
    from embody.hardware.realtime import permitted

    with make_driver(robot) as driver:
        hold(driver)
        assert driver.stats["realtime"] == permitted(driver.realtime_priority)


def test_nan_from_the_policy_damps_and_never_leaves(sim, robot):
    with make_driver(robot) as driver:
        hold(driver)
        driver.supervisor.start_policy()
        bad = JointCommand.pd(robot, robot.default_pose)
        bad.q[3] = np.nan
        driver.send_command(bad)  # returns at the next tick, or the last sent if the writer runs late (loaded CI)
        assert wait_for(lambda: driver.supervisor.phase is Phase.DAMPING, 1.0), driver.supervisor.events
        sent = driver.send_command(bad)
        assert sent.is_finite() and not sent.kp.any() and (sent.kd == driver.supervisor.config.damping_kd).all()
        assert "non-finite" in driver.supervisor.events[-1].reason


def test_command_beyond_limits_is_clamped_and_reported(sim, robot):
    with make_driver(robot) as driver:
        hold(driver)
        driver.supervisor.start_policy()
        # One joint beyond its limit: the clamp sends it to that limit, 0.26 rad from its pose (peak
        # speed ~0.5x its limit). Every joint at its limit at once trips the over-speed fault instead.
        q = robot.default_pose.copy()
        ankle = robot.joint_names.index("left_ankle_roll_joint")
        q[ankle] = robot.upper[ankle] + 1.0
        beyond = JointCommand.pd(robot, q)
        driver.send_command(beyond)
        assert wait_for(lambda: driver.supervisor.counters["clamped"] > 0, 1.0)
        sent = driver.send_command(beyond)
        assert driver.supervisor.phase is Phase.POLICY, driver.supervisor.events
        assert sent.q[ankle] == pytest.approx(robot.upper[ankle]) and (sent.q <= robot.upper + 1e-12).all()


def test_estop_damps(sim, robot):
    with make_driver(robot) as driver:
        hold(driver)
        driver.supervisor.estop("test e-stop")
        assert wait_for(lambda: driver.supervisor.phase is Phase.DAMPING, 1.0)
        sent = driver.send_command(JointCommand.pd(robot, robot.default_pose))
        assert not sent.kp.any() and driver.supervisor.events[-1].reason == "test e-stop"


def test_writer_failure_is_never_silent(sim, robot, monkeypatch):
    from embody.hardware import dds_driver

    driver = make_driver(robot)
    try:
        hold(driver)

        def broken(writer, data):
            raise OSError("transport gone")

        monkeypatch.setattr(dds_driver, "write", broken)
        assert wait_for(lambda: driver._error is not None, 1.0)
        assert driver.supervisor.phase is Phase.DAMPING
        with pytest.raises(RuntimeError, match="writer stopped.*transport gone"):
            driver.send_command(JointCommand.pd(robot, robot.default_pose))
    finally:
        driver.close()


def test_server_killed_mid_run_damps_within_the_watchdog(robot):
    domain = DOMAIN + 1
    proc = start_sim(domain)
    sup = SafetySupervisor(robot, SupervisorConfig(ramp_s=1.0, watchdog_s=0.2))
    driver = H1_2Driver(iface="lo", domain=domain, supervisor=sup, robot=robot)
    try:
        driver.connect(timeout_s=10.0)
        hold(driver)
        proc.kill()
        killed = time.monotonic()
        assert wait_for(lambda: sup.phase is Phase.DAMPING, 2.0)
        assert time.monotonic() - killed < 0.2 + 0.5  # watchdog + scheduling slack of a loaded machine
        assert "stale state" in sup.events[-1].reason
        assert not driver._sent.kp.any()  # what the writer sends from now on
    finally:
        driver.close()
        stop_robot_sim(proc)


def test_bad_crc_states_are_dropped_and_counted(robot):
    """A publisher with a broken CRC (a second, faulty node on the bus): nothing it sends is used."""
    from embody.hardware import dds

    domain = DOMAIN + 2
    writer, _ = dds.endpoints(domain, "lo", (msg.TOPIC_LOWSTATE, msg.LowState_), None)
    good = msg.lowstate_from_arrays(
        q=np.zeros(35),
        dq=np.zeros(35),
        ddq=np.zeros(35),
        tau_est=np.zeros(35),
        temperature=np.zeros(35, np.int16),
        quaternion=[1, 0, 0, 0],
        gyroscope=np.zeros(3),
        accelerometer=[0, 0, 9.81],
        rpy=np.zeros(3),
    )
    bad = msg.lowstate_from_arrays(**{k: v for k, v in msg.lowstate_arrays(good).items()})
    bad.crc ^= 1
    driver = H1_2Driver(iface="lo", domain=domain, robot=robot)

    def publish(sample, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            writer.write(sample)
            time.sleep(0.005)

    import threading

    t = threading.Thread(target=publish, args=(bad, 1.5), daemon=True)
    t.start()
    with pytest.raises(RobotConnectionError, match="dropped for bad CRC"):
        driver.connect(timeout_s=1.0)
    t.join()
    assert driver.stats["crc_errors"] > 0 and driver.stats["states"] == 0
    t = threading.Thread(target=publish, args=(good, 1.0), daemon=True)
    t.start()
    assert wait_for(lambda: driver.stats["states"] > 0, 1.0)
    t.join()


def test_no_robot_fails_fast_with_a_clear_message(robot):
    driver = H1_2Driver(iface="lo", domain=DOMAIN + 3, robot=robot)
    start = time.monotonic()
    with pytest.raises(RobotConnectionError, match="robot-sim h1_2"):
        driver.connect(timeout_s=0.5)
    assert time.monotonic() - start < 2.0


def test_unknown_interface_is_named():
    from embody.hardware import dds

    with pytest.raises(HardwareError, match="'nosuch0' does not exist"):
        dds.participant(DOMAIN + 4, "nosuch0")


def test_robot_sim_refuses_an_unknown_robot():
    out = subprocess.run([sys.executable, "-m", "embody.cli", "robot-sim", "g1"], capture_output=True, text=True)
    assert out.returncode == 2 and "unknown robot 'g1'" in out.stderr


def test_robot_sim_takes_the_motor_tables_armature():
    from embody.config import ConfigError
    from embody.hardware.robot_sim import make_server

    server = make_server("h1_2", band=True, armature="motors")
    model, spec = server.physics.model, server.robot
    knee = model.jnt_dofadr[model.joint("left_knee_joint").id]
    assert model.dof_armature[knee] == spec.motor_armature()[spec.joint_names.index("left_knee_joint")]
    with pytest.raises(ConfigError, match="'peg_arm' has no motor armature"):
        make_server("peg_arm", armature="motors")


def test_the_band_holds_the_passive_robot_up_and_releasing_it_drops_it():
    """In process (no DDS): the band's wrench goes through the MuJoCo adapter's apply_wrench."""
    from embody.hardware.robot_sim import H1_2Server

    server = H1_2Server(band=True)  # motors disabled: a passive robot

    def pelvis_height():
        return server.physics.sim.state().privileged.base_pos[0, 2]

    start = pelvis_height()
    for _ in range(1000):  # 2 s on the band
        server.step()
    assert abs(pelvis_height() - start) < 0.05  # hangs near where it started
    server.band_on = False
    for _ in range(500):  # 1 s released
        server.step()
    assert pelvis_height() < start - 0.3  # collapsed
    assert "applied_wrench" in server.physics.sim.capabilities
