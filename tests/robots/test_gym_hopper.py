"""Gymnasium's hopper as a RobotSpec (robots/gym_hopper.py)."""

import numpy as np

from embody.robots import get_robot
from embody.sims import SimConfig, make_sim


def test_hopper_spec_keeps_gymnasiums_joints_gears_and_pose():
    import mujoco

    robot = get_robot("gym_hopper")
    assert robot.joint_names[:3] == ("rootx", "rootz", "rooty")
    assert list(robot.actuated) == [3, 4, 5]
    np.testing.assert_array_equal(robot.torque_limit[robot.actuated], [200.0, 200.0, 200.0])  # gear 200 · ctrl ±1
    assert robot.default_pose[1] == 1.25  # rootz's ref: standing
    m = mujoco.MjModel.from_xml_path(str(robot.mjcf))
    assert m.nu == 0 and m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER and m.opt.timestep == 0.002


def test_hopper_stands_on_its_foot_without_torque():
    sim = make_sim("mujoco", get_robot("gym_hopper"), SimConfig(n_envs=2, decimation=4, control="torque"))
    for _ in range(50):
        sim.step(np.zeros((2, 3)))
    rootz = sim.state().joint_pos[:, 1]
    assert np.all(np.abs(rootz - 1.25) < 0.1)  # settled on the floor, neither sunk nor launched
