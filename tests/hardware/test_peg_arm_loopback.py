"""The peg arm on loopback DDS against `embody robot-sim peg_arm` in its own process: the ramp,
and the arm-only faults (wrist force, workspace box) on the real path."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="needs the hardware extra")

from embody.hardware.arms.sim import PegArmDriver  # noqa: E402
from embody.hardware.deploy import start_robot_sim  # noqa: E402
from embody.hardware.interface import JointCommand  # noqa: E402
from embody.hardware.robot_sim import sim_control  # noqa: E402
from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig  # noqa: E402
from embody.robots import get_robot  # noqa: E402
from embody.robots.peg_arm import board_params  # noqa: E402
from embody.robots.peg_arm.kinematics import ArmModel  # noqa: E402

DOMAIN = 150 + os.getpid() % 40


@pytest.fixture(scope="module")
def robot():
    return get_robot("peg_arm")


@pytest.fixture(scope="module")
def sim():
    proc = start_robot_sim("peg_arm", "lo", DOMAIN, band=False)
    yield proc
    proc.terminate()
    proc.wait(10)


def driver_in_hold(robot, **cfg) -> PegArmDriver:
    """A fresh start (robot-sim reset to its braked default pose), ramped and holding."""
    sim_control(DOMAIN, "lo", reset=True)
    time.sleep(0.2)
    driver = PegArmDriver(iface="lo", domain=DOMAIN, robot=robot)
    config = {
        "ramp_s": 0.5,
        "max_tilt_rad": None,
        "max_wrench_n": 15.0,
        "passive_before_ramp": True,
        "workspace": ((0.2, -0.5, -0.06), (0.9, 0.5, 1.0)),
        **cfg,
    }
    driver.supervisor = SafetySupervisor(robot, SupervisorConfig(**config))
    driver.connect(timeout_s=10.0)
    driver.supervisor.start_ramp()
    deadline = time.monotonic() + 5.0
    while driver.supervisor.phase is not Phase.HOLD and time.monotonic() < deadline:
        time.sleep(0.01)
    assert driver.supervisor.phase is Phase.HOLD, driver.supervisor.events
    return driver


def move_tip(driver: PegArmDriver, robot, goal: np.ndarray, speed: float = 0.1, timeout_s: float = 8.0) -> None:
    """Drive the peg tip in a straight line toward ``goal`` at ``speed`` m/s (IK + gravity offset, as
    the arm tasks command it) until the supervisor leaves POLICY or the time runs out."""
    model = ArmModel(robot)
    start, rot = model.ee_pose(driver.read_state().joint_pos)
    t0 = time.monotonic()
    driver.supervisor.start_policy()
    while time.monotonic() - t0 < timeout_s and driver.supervisor.phase is Phase.POLICY:
        q = driver.read_state().joint_pos
        frac = min(1.0, speed * (time.monotonic() - t0) / np.linalg.norm(goal - start[0]))
        q_target = model.ik(start + frac * (goal - start), rot, q)[0] + model.gravity_torque(q)[0] / robot.kp
        driver.send_command(JointCommand.pd(robot, q_target))
        time.sleep(0.02)


def test_braked_start_ramp_and_hold(sim, robot):
    with driver_in_hold(robot) as driver:
        time.sleep(0.5)
        state = driver.read_state()
        assert np.abs(state.joint_pos[0] - robot.default_pose).max() < 0.1  # plain PD: a little gravity sag
        assert abs(np.linalg.norm(state.wrench[0, :3]) - 8.414) < 1.0  # hand + fingers + peg hang from the sensor
        assert driver.stats["crc_errors"] == 0


def test_pressing_the_peg_on_the_board_trips_the_wrist_force_limit(sim, robot):
    hole = np.array(board_params(robot).hole_pos)
    with driver_in_hold(robot) as driver:
        move_tip(driver, robot, hole + [0.03, 0.0, -0.02])  # beside the hole, into the board
        assert driver.supervisor.phase is Phase.DAMPING
        assert "wrist force" in driver.supervisor.events[-1].reason
        sent = driver.send_command(JointCommand.pd(robot, robot.default_pose))
        assert not sent.kp.any() and (sent.kd == driver.supervisor.config.damping_kd).all()


def test_leaving_the_workspace_damps(sim, robot):
    with driver_in_hold(robot, workspace=((0.2, -0.5, -0.06), (0.9, 0.5, 0.45))) as driver:
        start = driver.read_state().ee_pos[0]
        move_tip(driver, robot, start + [0.0, 0.0, 0.15])
        assert driver.supervisor.phase is Phase.DAMPING and "workspace" in driver.supervisor.events[-1].reason
        assert driver.read_state().ee_pos[0, 2] < 0.45 + 0.02  # caught at the box, not after


def test_the_band_is_for_the_humanoid():
    out = subprocess.run(
        [sys.executable, "-m", "embody.cli", "robot-sim", "peg_arm", "--band"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "--band holds a humanoid" in out.stderr
