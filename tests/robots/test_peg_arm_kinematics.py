"""peg_arm's numpy kinematics (the robot-side model tasks and the expert use) against MuJoCo."""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from embody.robots.peg_arm import constants as C  # noqa: E402
from embody.robots.peg_arm import make_spec  # noqa: E402
from embody.robots.peg_arm.kinematics import DOWN, ArmModel  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def cache_in_tmp(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBODY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.mark.parametrize("params", [{}, {"peg_length": 0.1, "peg_radius": 0.01}])
def test_matches_mujoco(params):
    spec = make_spec(**params)
    arm = ArmModel(spec)
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    data = mujoco.MjData(model)
    q = np.random.default_rng(0).uniform(spec.lower, spec.upper, (32, 7))
    pos, rot = arm.ee_pose(q)
    quat = arm.ee_quat(q)
    ft_pos, ft_rot = arm.ft_pose(q)
    J, g = arm.jacobian(q), arm.gravity_torque(q)
    for i in range(len(q)):
        data.qpos[:] = q[i]
        mujoco.mj_forward(model, data)
        ee, ft = model.site(C.EE_SITE).id, model.site(C.FT_SITE).id
        np.testing.assert_allclose(pos[i], data.site_xpos[ee], atol=1e-12)
        np.testing.assert_allclose(rot[i], data.site_xmat[ee].reshape(3, 3), atol=1e-12)
        sensor = np.zeros(4)  # a framequat sensor's reading: the site's quaternion chained, sign included
        mujoco.mju_mulQuat(sensor, data.xquat[model.site_bodyid[ee]], model.site_quat[ee])
        np.testing.assert_allclose(quat[i], sensor, atol=1e-12)
        np.testing.assert_allclose(ft_pos[i], data.site_xpos[ft], atol=1e-12)
        np.testing.assert_allclose(ft_rot[i], data.site_xmat[ft].reshape(3, 3), atol=1e-12)
        jp, jr = np.zeros((3, 7)), np.zeros((3, 7))
        mujoco.mj_jacSite(model, data, jp, jr, ee)
        np.testing.assert_allclose(J[i], np.vstack([jp, jr]), atol=1e-12)
        np.testing.assert_allclose(g[i], data.qfrc_bias, atol=1e-10)  # at rest: gravity only


def test_ik_reaches_pose_pointing_down():
    spec = make_spec()
    arm = ArmModel(spec)
    goals = np.array([[0.5, 0.0, 0.1], [0.42, 0.12, 0.02], [0.6, -0.1, 0.25]])
    q = arm.ik(goals, DOWN[None], np.tile(spec.default_pose, (3, 1)))
    pos, rot = arm.ee_pose(q)
    np.testing.assert_allclose(pos, goals, atol=1e-6)
    np.testing.assert_allclose(rot, np.broadcast_to(DOWN, rot.shape), atol=1e-6)
    assert (q >= spec.lower).all() and (q <= spec.upper).all()
