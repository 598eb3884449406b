"""The generated URDF describes the same robot as its MJCF, checked through MuJoCo's URDF import."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from embody.robots import RobotSpec, get_robot  # noqa: E402
from embody.robots.spec import Joint, Sensors  # noqa: E402
from embody.robots.urdf import mjcf_to_urdf, write_urdf  # noqa: E402

ROBOTS = ["cartpole", "h1_2", "peg_arm"]


def models(spec: RobotSpec):
    """(MJCF model, model imported from the generated URDF, URDF text)."""
    urdf = mjcf_to_urdf(spec)
    return mujoco.MjModel.from_xml_path(str(spec.mjcf)), mujoco.MjModel.from_xml_string(urdf), urdf


def robot_bodies(mjcf) -> list[int]:
    """The robot is the world's first subtree; other world bodies (a peg board) are scene."""
    return [b for b in range(1, mjcf.nbody) if mjcf.body_rootid[b] == 1]


def moving_joints(m) -> list[str]:
    kinds = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
    return [m.joint(j).name for j in range(m.njnt) if m.jnt_type[j] in kinds]


def assert_same_kinematics(spec: RobotSpec, mjcf, urdf, q: dict[str, float]) -> None:
    """Bodies and the spec's sensor sites at the same world poses (base at the origin)."""
    da, db = mujoco.MjData(mjcf), mujoco.MjData(urdf)
    if spec.floating_base:
        da.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]  # the URDF root sits at the world origin
    for name, value in q.items():
        da.qpos[mjcf.joint(name).qposadr[0]] = db.qpos[urdf.joint(name).qposadr[0]] = value
    mujoco.mj_kinematics(mjcf, da)
    mujoco.mj_kinematics(urdf, db)
    for b in robot_bodies(mjcf):
        name = mjcf.body(b).name
        anchor = mjcf.jnt_pos[mjcf.body_jntadr[b]] if mjcf.body_jntnum[b] else np.zeros(3)
        origin = da.xpos[b] + da.xmat[b].reshape(3, 3) @ anchor  # a URDF link starts at its joint
        np.testing.assert_allclose(db.body(name).xpos, origin, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(db.body(name).xmat, da.xmat[b], atol=1e-6, err_msg=name)
        np.testing.assert_allclose(db.body(name).xipos, da.xipos[b], atol=1e-6, err_msg=f"{name} com")
    s = spec.sensors
    for site in {s.imu_site, *s.foot_sites, s.ee_site, s.ft_site} - {None}:
        np.testing.assert_allclose(db.body(site).xpos, da.site(site).xpos, atol=1e-6, err_msg=site)


@pytest.mark.parametrize("name", ROBOTS)
def test_joints_agree(name):
    spec = get_robot(name)
    mjcf, urdf, _ = models(spec)
    assert moving_joints(urdf) == moving_joints(mjcf)
    for j in moving_joints(mjcf):
        a, b = mjcf.joint(j), urdf.joint(j)
        assert a.type == b.type and a.limited == b.limited, j
        np.testing.assert_allclose(b.axis, a.axis, atol=1e-12, err_msg=j)
        if a.limited:
            np.testing.assert_allclose(b.range, a.range, atol=1e-12, err_msg=j)


@pytest.mark.parametrize("name", ROBOTS)
def test_limits_come_from_the_spec(name):
    spec = get_robot(name)
    limits = {j.get("name"): j.find("limit") for j in ET.fromstring(mjcf_to_urdf(spec)).iter("joint")}
    for joint in spec.joints:
        assert float(limits[joint.name].get("effort")) == joint.torque_limit
        assert float(limits[joint.name].get("velocity")) == joint.velocity_limit


@pytest.mark.parametrize("name", ROBOTS)
def test_mass_agrees(name):
    mjcf, urdf, _ = models(get_robot(name))
    assert urdf.body_subtreemass[0] == pytest.approx(mjcf.body_subtreemass[1], rel=1e-9)
    for b in robot_bodies(mjcf):
        assert urdf.body(mjcf.body(b).name).mass[0] == pytest.approx(mjcf.body_mass[b], rel=1e-9)


@pytest.mark.parametrize("name", ROBOTS)
def test_forward_kinematics_agree(name):
    spec = get_robot(name)
    mjcf, urdf, _ = models(spec)
    joints = moving_joints(mjcf)
    default = dict.fromkeys(joints, 0.0) | dict(zip(spec.joint_names, spec.default_pose))
    assert_same_kinematics(spec, mjcf, urdf, default)
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = {}
        for j in joints:
            lo, hi = mjcf.joint(j).range if mjcf.joint(j).limited else (-np.pi, np.pi)
            q[j] = rng.uniform(lo, hi)
        assert_same_kinematics(spec, mjcf, urdf, q)


def test_h1_2_structure():
    spec = get_robot("h1_2")
    _, urdf, text = models(spec)
    root = ET.fromstring(text)
    children = {j.find("child").get("link") for j in root.iter("joint")}
    roots = [link.get("name") for link in root.iter("link") if link.get("name") not in children]
    assert roots == ["pelvis"]  # no free joint, no world link
    assert urdf.body("imu").parentid[0] == urdf.body("torso_link").id
    assert urdf.body("left_foot").parentid[0] == urdf.body("left_ankle_roll_link").id
    assert root.find("link[@name='left_ankle_roll_link']/collision/geometry/box") is not None
    assert root.find("link[@name='left_knee_link']/visual/geometry/cylinder") is not None  # capsule shin


def test_write_urdf(tmp_path):
    spec = get_robot("cartpole")
    path = write_urdf(spec, tmp_path / "cartpole.urdf")
    assert path.read_text() == mjcf_to_urdf(spec)
    assert mujoco.MjModel.from_xml_path(str(path)).njnt == 2


# -- generic cases on small models --------------------------------------------------------------
ARM = """<mujoco>
  <worldbody>
    <body name="base">
      <geom type="cylinder" size="0.05 0.05"/>
      <body name="link1" pos="0.1 0 0.2" quat="0.9 0.1 0.3 0.2">
        <joint name="j1" pos="0.03 -0.02 0.01" axis="0.6 0.8 0" range="-1 2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0.1 0" size="0.03"/>
        <geom type="ellipsoid" pos="0.2 0 0" size="0.04 0.02 0.03" contype="0" conaffinity="0"/>
        <body name="link2" pos="0.3 0.1 0">
          <joint name="j2" type="slide" pos="0 0.05 0" axis="1 0 0" range="0 0.1"/>
          <geom type="box" size="0.02 0.02 0.05" group="3"/>
          <site name="tip" pos="0.05 0 0.1" quat="0 1 0 0"/>
        </body>
      </body>
    </body>
    <body name="box" pos="0.5 0 0.05">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
  </worldbody>
</mujoco>"""


def small_spec(tmp_path, xml: str) -> RobotSpec:
    path = tmp_path / "robot.xml"
    path.write_text(xml)
    joints = (Joint("j1", -1, 2, 3.0, 10.0, 0, 0), Joint("j2", 0, 0.1, 1.0, 50.0, 0, 0))
    return RobotSpec("arm", joints, path, floating_base=False, sensors=Sensors(ee_site="tip"))


def test_fixed_base_arm_with_offset_joints(tmp_path):
    """Root = the first body; joints off their body origin; capsule/ellipsoid/hidden geoms; a
    free-floating scene object left out."""
    spec = small_spec(tmp_path, ARM)
    mjcf, urdf, text = models(spec)
    links = [link.get("name") for link in ET.fromstring(text).iter("link")]
    assert links == ["base", "link1", "link2", "tip"]
    assert_same_kinematics(spec, mjcf, urdf, {"j1": 0.7, "j2": 0.05})
    assert_same_kinematics(spec, mjcf, urdf, {"j1": -0.4, "j2": 0.0})
    link2 = ET.fromstring(text).find("link[@name='link2']")
    assert link2.find("collision") is not None and link2.find("visual") is None  # group 3: hidden


def test_body_with_two_joints_is_rejected(tmp_path):
    xml = ARM.replace('<joint name="j2"', '<joint name="j3" axis="0 0 1"/><joint name="j2"')
    with pytest.raises(ValueError, match="link2.*2 joints"):
        mjcf_to_urdf(small_spec(tmp_path, xml))
