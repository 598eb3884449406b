"""The H1-2 spec and model against the vendor's published numbers.

The numbers are transcribed here (CI has no vendor files) from unitree_rl_gym's
resources/robots/h1_2: h1_2.xml (range, actuatorfrcrange), h1_2.urdf (<limit velocity>) and
deploy_configs/real_h1_2.yaml (kps, kds, default_angles).
"""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from embody.robots import get_robot  # noqa: E402
from embody.robots.h1_2 import constants as c  # noqa: E402
from embody.sims import InitState, SimConfig, make_sim  # noqa: E402

# name: (lower, upper, torque limit, velocity limit, kp, kd, default), in motor order
PUBLISHED = {
    "left_hip_yaw_joint": (-0.43, 0.43, 200, 23, 200, 2.5, 0),
    "left_hip_pitch_joint": (-3.14, 2.5, 200, 23, 200, 2.5, -0.16),
    "left_hip_roll_joint": (-0.43, 3.14, 200, 23, 200, 2.5, 0),
    "left_knee_joint": (-0.26, 2.05, 300, 14, 300, 4, 0.36),
    "left_ankle_pitch_joint": (-0.897334, 0.523598, 60, 9, 40, 2, -0.2),
    "left_ankle_roll_joint": (-0.261799, 0.261799, 40, 9, 40, 2, 0),
    "right_hip_yaw_joint": (-0.43, 0.43, 200, 23, 200, 2.5, 0),
    "right_hip_pitch_joint": (-3.14, 2.5, 200, 23, 200, 2.5, -0.16),
    "right_hip_roll_joint": (-3.14, 0.43, 200, 23, 200, 2.5, 0),
    "right_knee_joint": (-0.26, 2.05, 300, 14, 300, 4, 0.36),
    "right_ankle_pitch_joint": (-0.897334, 0.523598, 60, 9, 40, 2, -0.2),
    "right_ankle_roll_joint": (-0.261799, 0.261799, 40, 9, 40, 2, 0),
    "torso_joint": (-2.35, 2.35, 200, 23, 300, 3, 0),
    "left_shoulder_pitch_joint": (-3.14, 1.57, 40, 9, 120, 2, 0),
    "left_shoulder_roll_joint": (-0.38, 3.4, 40, 9, 120, 2, 0),
    "left_shoulder_yaw_joint": (-2.66, 3.01, 18, 20, 120, 2, 0),
    "left_elbow_pitch_joint": (-0.95, 3.18, 18, 20, 80, 1, 0),
    "left_elbow_roll_joint": (-3.01, 2.75, 19, 31.4, 80, 1, 0),
    "left_wrist_pitch_joint": (-0.47, 0.47, 19, 31.4, 80, 1, 0),
    "left_wrist_yaw_joint": (-1.27, 1.27, 19, 31.4, 80, 1, 0),
    "right_shoulder_pitch_joint": (-3.14, 1.57, 40, 9, 120, 2, 0),
    "right_shoulder_roll_joint": (-3.4, 0.38, 40, 9, 120, 2, 0),
    "right_shoulder_yaw_joint": (-3.01, 2.66, 18, 20, 120, 2, 0),
    "right_elbow_pitch_joint": (-0.95, 3.18, 18, 20, 80, 1, 0),
    "right_elbow_roll_joint": (-2.75, 3.01, 19, 31.4, 80, 1, 0),
    "right_wrist_pitch_joint": (-0.47, 0.47, 19, 31.4, 80, 1, 0),
    "right_wrist_yaw_joint": (-1.27, 1.27, 19, 31.4, 80, 1, 0),
}
TABLE = np.array(list(PUBLISHED.values()), dtype=np.float64)

# Sum of <mass> over the vendor h1_2.urdf links without L_/R_ hand base and finger links
# (67.3676 kg with them); equally, the vendor h1_2.xml total minus its 24 finger bodies and
# the 2 x 0.14143 kg hand bases that MJCF merges into its wrist yaw links.
REFERENCE_MASS_NO_HANDS = 66.984  # kg
# Vendor h1_2.xml in MuJoCo, legs at the default pose, mj_kinematics: pelvis z minus the lowest
# vertex of the foot collision meshes (1.03 - 0.0148825).
REFERENCE_PELVIS_HEIGHT = 1.0151175  # m


@pytest.fixture(scope="module")
def spec():
    return get_robot("h1_2")


@pytest.fixture(scope="module")
def model(spec):
    return mujoco.MjModel.from_xml_path(str(spec.mjcf))


@pytest.fixture(scope="module")
def sim(spec):
    s = make_sim("mujoco", spec, SimConfig(n_envs=1, decimation=10, physics_dt=0.002, control="pd"))
    yield s
    s.close()


def reset_default(sim, spec) -> None:
    sim.reset(
        np.array([0]),
        InitState(
            joint_pos=spec.default_pose[None],
            joint_vel=np.zeros((1, spec.n_joints)),
            base_pos=np.array([c.DEFAULT_BASE_POS]),
            base_quat=np.array([[1.0, 0, 0, 0]]),
        ),
    )


# -- spec against the published numbers -------------------------------------------------------
def test_joint_names_follow_motor_order(spec, model):
    assert spec.joint_names == tuple(PUBLISHED) == c.JOINT_NAMES
    hinges = [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    assert tuple(hinges) == spec.joint_names  # model tree order is motor order: no hand joints
    assert spec.n_actions == 27 and spec.floating_base and spec.base_body == "pelvis"


def test_ranges_and_limits_are_published(spec, model):
    np.testing.assert_array_equal(spec.lower, TABLE[:, 0])
    np.testing.assert_array_equal(spec.upper, TABLE[:, 1])
    np.testing.assert_array_equal(spec.torque_limit, TABLE[:, 2])
    np.testing.assert_array_equal(spec.velocity_limit, TABLE[:, 3])
    for i, name in enumerate(spec.joint_names):  # the model file agrees with the spec
        j = model.joint(name).id
        np.testing.assert_allclose(model.jnt_range[j], TABLE[i, :2], err_msg=name)
        np.testing.assert_allclose(model.jnt_actfrcrange[j], [-TABLE[i, 2], TABLE[i, 2]], err_msg=name)


def test_gains_and_default_pose_are_published(spec):
    np.testing.assert_array_equal(spec.kp, TABLE[:, 4])
    np.testing.assert_array_equal(spec.kd, TABLE[:, 5])
    np.testing.assert_array_equal(spec.default_pose, TABLE[:, 6])


def test_groups(spec):
    g = spec.groups
    assert g["legs"] == g["lower_body"] == tuple(range(12))
    assert g["left_leg"] + g["right_leg"] == g["legs"]
    assert g["waist"] == (12,)
    assert g["arms"] == g["left_arm"] + g["right_arm"] == tuple(range(13, 27))
    assert g["upper_body"] == tuple(range(12, 27))
    assert all(spec.joint_names[i].startswith("left_") for i in g["left_arm"] + g["left_leg"])
    assert all(spec.joint_names[i].startswith("right_") for i in g["right_arm"] + g["right_leg"])


def test_mass_matches_reference_without_hands(model):
    total = model.body_subtreemass[0]
    assert abs(total - REFERENCE_MASS_NO_HANDS) < 0.02 * REFERENCE_MASS_NO_HANDS
    assert not any(model.body(b).name.startswith(("L_", "R_")) for b in range(model.nbody))


def test_sensor_sites(spec, model):
    assert spec.sensors.imu_site == "imu" and spec.sensors.foot_sites == ("left_foot", "right_foot")
    assert model.body(model.site("imu").bodyid[0]).name == "torso_link"
    for side in ("left", "right"):
        site = model.site(f"{side}_foot")
        assert model.body(site.bodyid[0]).name == f"{side}_ankle_roll_link"
        assert site.type[0] == mujoco.mjtGeom.mjGEOM_BOX
        sole = model.geom(f"{side}_foot_sole")  # the site box covers the sole's bottom face
        assert np.all(site.size > sole.size - np.abs(site.pos - sole.pos))
        assert site.pos[2] == pytest.approx(sole.pos[2] - sole.size[2])


def test_model_is_primitive_only(model):
    assert model.nmesh == 0 and model.nu == 0 and model.nsensor == 0
    assert model.opt.timestep == 0.002


# -- in the MuJoCo adapter ----------------------------------------------------------------------
def _lowest_sole_z(spec, model, state) -> float:
    """Lowest sole-box corner for a RobotState, by kinematics on the bare model."""
    data = mujoco.MjData(model)
    data.qpos[:3], data.qpos[3:7] = state.privileged.base_pos[0], state.privileged.base_quat[0]
    for name, q in zip(spec.joint_names, state.joint_pos[0]):
        data.qpos[model.joint(name).qposadr[0]] = q
    mujoco.mj_kinematics(model, data)
    corners = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T
    z = [
        data.geom(g).xpos[2] + (corners * model.geom(g).size) @ data.geom(g).xmat.reshape(3, 3)[2] for g in c.FEET_GEOMS
    ]
    return float(np.min(z))


def test_default_pose_stands_on_the_floor(sim, spec, model):
    reset_default(sim, spec)
    state = sim.state()
    np.testing.assert_allclose(state.joint_pos[0], spec.default_pose)
    lowest = _lowest_sole_z(spec, model, state)
    assert abs(lowest) < 1e-3  # the soles touch z=0
    assert state.privileged.base_pos[0, 2] - lowest == pytest.approx(REFERENCE_PELVIS_HEIGHT, abs=0.01)
    np.testing.assert_allclose(model.body("pelvis").pos, c.DEFAULT_BASE_POS)  # the MJCF starts there too
    np.testing.assert_allclose(model.key("home").qpos[7:], spec.default_pose)


def test_imu_identity_at_identity_base(sim, spec):
    reset_default(sim, spec)
    np.testing.assert_allclose(sim.state().imu_quat[0], [1, 0, 0, 0], atol=1e-9)


def test_settles_on_both_feet(sim, spec, model):
    """PD at the default pose for 0.5 s: feet carry the weight, the accelerometer reads +g.

    PD alone cannot balance a humanoid for long (it tips over after ~1 s), so quantities are
    averaged over 0.1-0.5 s, while it still stands.
    """
    reset_default(sim, spec)
    weight = model.body_subtreemass[0] * 9.81
    forces, accels = [], []
    for step in range(25):
        sim.step(spec.default_pose[None])
        s = sim.state()
        assert np.all(s.privileged.contact_force[0] > 0), f"a foot lost contact at step {step}"
        assert s.privileged.base_pos[0, 2] > c.DEFAULT_BASE_POS[2] - 0.03
        if step >= 5:
            forces.append(s.privileged.contact_force[0].sum())
            accels.append(s.imu_accel[0])
    assert np.mean(forces) == pytest.approx(weight, rel=0.05)
    accel = np.mean(accels, axis=0)  # x: it sways forward and back; y: left-right symmetric
    assert accel[2] == pytest.approx(9.81, abs=0.3) and abs(accel[1]) < 0.1
