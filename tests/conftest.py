import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="module")
def peg_robot_sim(request):
    """robot-sim of the peg arm on loopback DDS in the requesting test module's ``DOMAIN``."""
    pytest.importorskip("cyclonedds", reason="needs the hardware extra")
    from embody.hardware.deploy import start_robot_sim, stop_robot_sim

    proc = start_robot_sim("peg_arm", "lo", request.module.DOMAIN, band=False)
    yield proc
    stop_robot_sim(proc)
