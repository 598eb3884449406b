"""peg_arm: published Panda numbers, DH kinematics, the MuJoCo adapter, and the board."""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from embody.robots import get_robot  # noqa: E402
from embody.robots.peg_arm import PegBoard, board_params, make_spec  # noqa: E402
from embody.robots.peg_arm import constants as C  # noqa: E402
from embody.robots.peg_arm.model import ARM_XML, N_SIDES, scene_xml  # noqa: E402

# Franka docs, "Robot and interface specifications": modified (Craig) DH (a, d, alpha) per joint,
# then the flange; joint limits, velocity and torque limits.
DH = [
    (0, 0.333, 0),
    (0, 0, -np.pi / 2),
    (0, 0.316, np.pi / 2),
    (0.0825, 0, np.pi / 2),
    (-0.0825, 0.384, -np.pi / 2),
    (0, 0, np.pi / 2),
    (0.088, 0, np.pi / 2),
    (0, 0.107, 0),
]
Q_MAX = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]
Q_MIN = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
DQ_MAX = [2.175] * 4 + [2.61] * 3
TAU_MAX = [87] * 4 + [12] * 3
READY = np.array([0, -0.785, 0, -2.356, 0, 1.571, 0.785])
DOWN = np.diag([1.0, -1.0, -1.0])  # peg axis (site z) pointing down, as at the ready pose
OTHER = dict(hole_pos=(0.42, 0.15, 0.05), hole_yaw=0.4, clearance=0.0005)


@pytest.fixture(autouse=True, scope="module")
def cache_in_tmp(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EMBODY_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


def dh_flange(q):
    T = np.eye(4)
    for (a, d, alpha), theta in zip(DH, list(q) + [0.0]):
        ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
        T = T @ np.array(
            [[ct, -st, 0, a], [st * ca, ct * ca, -sa, -d * sa], [st * sa, ct * sa, ca, d * ca], [0, 0, 0, 1]]
        )
    return T


def forward(model, q):
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    return data


def test_published_panda_numbers():
    spec = get_robot("peg_arm")
    assert spec.joint_names == tuple(f"joint{i}" for i in range(1, 8))
    np.testing.assert_allclose(spec.lower, Q_MIN)
    np.testing.assert_allclose(spec.upper, Q_MAX)
    np.testing.assert_allclose(spec.velocity_limit, DQ_MAX)
    np.testing.assert_allclose(spec.torque_limit, TAU_MAX)
    np.testing.assert_allclose(spec.kp, [600, 600, 600, 600, 250, 150, 50])
    np.testing.assert_allclose(spec.kd, [50, 50, 50, 20, 20, 20, 10])
    np.testing.assert_allclose(spec.default_pose, READY)
    assert not spec.floating_base and spec.base_body == "link0" and list(spec.group("arm")) == list(range(7))
    assert (spec.sensors.ee_site, spec.sensors.ft_site) == ("ee", "wrist_ft")
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    np.testing.assert_allclose(model.jnt_range, np.c_[Q_MIN, Q_MAX])
    assert model.opt.timestep == 0.002
    arm = mujoco.MjModel.from_xml_path(str(ARM_XML))  # the committed file loads on its own...
    assert (arm.nu, arm.nsensor, arm.nq) == (0, 0, 7)  # ...with no actuators or sensors


@pytest.mark.parametrize("q", [np.zeros(7), READY, np.array([0.3, 0.5, -0.4, -1.9, 0.6, 2.2, -1.0])])
def test_flange_matches_dh_table(q):
    model = mujoco.MjModel.from_xml_path(str(make_spec().mjcf))
    data = forward(model, q)
    T, ft = dh_flange(q), model.body(C.FT_BODY).id
    assert np.linalg.norm(data.xpos[ft] - T[:3, 3]) < 1e-3
    np.testing.assert_allclose(data.xmat[ft].reshape(3, 3), T[:3, :3], atol=1e-6)
    if not q.any():  # the well-known zero-pose flange position
        np.testing.assert_allclose(T[:3, 3], [0.088, 0, 0.926], atol=1e-9)


def test_hold_ready_pose_and_wrist_wrench():
    from embody.sims import InitState, SimConfig, make_sim

    spec = make_spec()
    sim = make_sim("mujoco", spec, SimConfig(n_envs=2, decimation=5, control="pd"))
    try:
        q0 = np.tile(READY, (2, 1))
        sim.reset(np.arange(2), InitState(joint_pos=q0, joint_vel=np.zeros_like(q0)))
        for _ in range(round(1.0 / sim.dt)):
            sim.step(q0)
        s = sim.state()
    finally:
        sim.close()
    # No gravity compensation in the model: joint 4 sags most (measured 0.038 rad).
    assert np.abs(s.joint_pos - q0).max() < 0.05
    assert s.ee_pos.shape == (2, 3) and s.ee_quat.shape == (2, 4) and s.wrench.shape == (2, 6)
    assert all(np.isfinite(x).all() for x in (s.ee_pos, s.ee_quat, s.wrench))

    # At rest the sensor carries hand + fingers + peg: force = m g up (the support from link7),
    # torque = (subtree CoM - site) x force. Tolerance 1% of the weight / 5 mN·m: after 1 s the
    # joints move < 1e-4 rad/s, so inertial terms are far smaller (measured error ~1e-9).
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    data = forward(model, s.joint_pos[0])
    site, body = model.site(C.FT_SITE).id, model.body(C.FT_BODY).id
    b = board_params(spec)
    mass = C.HAND_MASS + C.PEG_DENSITY * np.pi * b.peg_radius**2 * b.peg_length
    assert model.body_subtreemass[body] == pytest.approx(mass)
    R = data.site_xmat[site].reshape(3, 3)
    weight = np.array([0, 0, mass * 9.81])
    for w in s.wrench:
        np.testing.assert_allclose(R @ w[:3], weight, atol=0.01 * weight[2])
        lever = data.subtree_com[body] - data.site_xpos[site]
        np.testing.assert_allclose(R @ w[3:], np.cross(lever, weight), atol=5e-3)
    np.testing.assert_allclose(s.ee_pos[0], data.site_xpos[model.site(C.EE_SITE).id], atol=1e-6)


@pytest.mark.parametrize("params", [{}, OTHER])
def test_board_geometry(params):
    spec = make_spec(**params)
    b = board_params(spec)
    assert b == PegBoard(**params)
    assert b.hole_width == pytest.approx(2 * (b.peg_radius + b.clearance))
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    data = forward(model, READY)
    hole = np.array(b.hole_pos)
    widths = []
    for i in range(N_SIDES):
        g = model.geom(f"hole_wall{i}").id
        n, size = data.geom_xmat[g].reshape(3, 3)[:, 0], model.geom_size[g]  # local x: radial, outward
        a = b.hole_yaw + 2 * np.pi * i / N_SIDES
        np.testing.assert_allclose(n, [np.cos(a), np.sin(a), 0], atol=1e-7)
        widths.append(n @ (data.geom_xpos[g] - hole) - size[0])  # inner face to hole axis
        assert data.geom_xpos[g][2] + size[2] == pytest.approx(hole[2])  # top face at the mouth
    np.testing.assert_allclose(np.array(widths) * 2, b.hole_width, atol=1e-7)
    g = model.geom("hole_bottom").id
    assert data.geom_xpos[g][2] + model.geom_size[g][2] == pytest.approx(hole[2] - b.hole_depth)
    np.testing.assert_allclose(model.geom("peg").size[:2], [b.peg_radius, b.peg_length / 2])


def test_generated_files():
    a, b = make_spec(clearance=0.001).mjcf, make_spec(clearance=0.002).mjcf
    assert a != b and a.read_text() != b.read_text()
    assert make_spec(clearance=0.001).mjcf == a  # same parameters, same file
    assert a.read_text() == scene_xml(PegBoard(clearance=0.001))
    assert not list(a.parent.glob("*.tmp"))
    assert board_params(make_spec(**OTHER)) == PegBoard(**OTHER)
    with pytest.raises(ValueError, match="peg_length"):
        make_spec(peg_length=0.05)


def ik(model, pos, rot, q, iters=200, damping=1e-3):
    """Damped least squares on the ee site's position and orientation."""
    data, site = mujoco.MjData(model), model.site(C.EE_SITE).id
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for _ in range(iters):
        data.qpos[:] = q
        mujoco.mj_forward(model, data)
        R = data.site_xmat[site].reshape(3, 3)
        err = np.r_[pos - data.site_xpos[site], 0.5 * np.cross(R.T, rot.T).sum(axis=0)]
        if np.linalg.norm(err) < 1e-9:
            break
        mujoco.mj_jacSite(model, data, jacp, jacr, site)
        J = np.vstack([jacp, jacr])
        q = np.clip(q + J.T @ np.linalg.solve(J @ J.T + damping**2 * np.eye(6), err), *model.jnt_range.T)
    assert np.linalg.norm(err) < 1e-6, err
    return q


def peg_board_contacts(model, q):
    data = forward(model, q)
    peg, board = model.body(C.PEG_BODY).id, model.body(C.BOARD_BODY).id
    pairs = ({model.geom_bodyid[c.geom1], model.geom_bodyid[c.geom2]} for c in data.contact[: data.ncon])
    return [p for p in pairs if p == {peg, board}]


@pytest.mark.parametrize("params", [{}, OTHER])
def test_peg_fits_hole(params):
    spec = make_spec(**params)
    b = board_params(spec)
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    tip = np.array(b.hole_pos) - [0, 0, b.hole_depth / 2]  # peg half-way down the hole, pointing down
    q = ik(model, tip, DOWN, READY.copy())
    assert not peg_board_contacts(model, q)
    assert forward(model, q).ncon == 0  # nothing else touches either
    # Control: shifted sideways by more than the clearance, the peg hits the wall.
    q = ik(model, tip + [b.clearance + 5e-4, 0, 0], DOWN, q)
    assert peg_board_contacts(model, q)
