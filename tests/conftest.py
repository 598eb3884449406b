import os
import tempfile

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
# MJX's XLA programs (20-30 s each on a CPU) compile once per CI run, not once per test process
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "embody-jax-cache"))


@pytest.fixture(autouse=True)
def _scheduling_unchanged():
    """Fails a test that leaves pytest's thread real-time, and restores it: every process started later would
    inherit SCHED_FIFO (SVT-AV1's encoder and libfranka raise their caller to SCHED_FIFO 99 as root; a Rerun
    viewer started after one spun at that priority and starved a CI run until its time limit)."""
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    yield
    after = os.sched_getscheduler(0), os.sched_getparam(0)
    if after != before:
        os.sched_setscheduler(0, *before)
        pytest.fail(
            f"the test left pytest's thread under scheduling policy {after[0]}, priority {after[1].sched_priority}"
        )


@pytest.fixture(scope="module")
def peg_robot_sim(request):
    """robot-sim of the peg arm on loopback DDS in the requesting test module's ``DOMAIN``; yields
    ``connect(robot)``: a fresh start (robot-sim reset to its braked default pose) and a connected driver
    with the arm's default supervisor (its wrist-force limit and workspace box) and a short ramp. The
    state watchdog is 1 s rather than 0.1 s: on a loaded 2-core machine robot-sim's process was
    descheduled for up to 0.49 s (the watchdog's own trip is tested in tests/hardware)."""
    pytest.importorskip("cyclonedds", reason="needs the hardware extra")
    import dataclasses
    import time

    from embody.hardware.arms.sim import ArmCodec, PegArmDriver
    from embody.hardware.deploy import start_robot_sim, stop_robot_sim
    from embody.hardware.robot_sim import sim_control
    from embody.hardware.supervisor import SafetySupervisor

    domain = request.module.DOMAIN

    def connect(robot) -> PegArmDriver:
        sim_control(domain, "lo", reset=True)
        time.sleep(0.2)
        driver = PegArmDriver(iface="lo", domain=domain, robot=robot)
        config = dataclasses.replace(ArmCodec(robot.n_joints).supervisor_config(), ramp_s=0.5, watchdog_s=1.0)
        driver.supervisor = SafetySupervisor(robot, config)
        driver.connect(timeout_s=10.0)
        return driver

    proc = start_robot_sim("peg_arm", "lo", domain, band=False)
    yield connect
    stop_robot_sim(proc)
