"""Pelvis orientation, angular velocity and gravity of the H1-2 from its torso IMU and waist.

Checked against the MuJoCo adapter's ground truth (state.privileged), reading only the
observed part of the state.

Sensor lag: MuJoCo evaluates sensors at the start of each physics step, so after sim.step the
IMU lags the joints and base by one physics step (2 ms). Measured with n_envs=8, random base
orientations, base angular velocities up to 2 rad/s, waist angles over its range and waist
velocities up to 3 rad/s (the waist PD then swings the 17.8 kg torso hard):
  * right after reset (fresh sensors): agreement to ~3e-8 rad (float32-free, sensor-exact);
  * after sim.step: orientation error = physics_dt · |ω_torso| (ratio 1.000 ± 1e-5, up to
    0.04 rad), pelvis angular velocity error up to ~1.1 rad/s (torso angular acceleration of
    a few hundred rad/s² times 2 ms);
  * pairing the IMU after step k+1 with the joints and ground truth after step k removes the
    lag entirely: agreement to 1e-14.
"""

import dataclasses

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from embody.robots import RobotState, get_robot  # noqa: E402
from embody.robots.h1_2 import constants as c  # noqa: E402
from embody.robots.h1_2.observations import ImuMount, imu_mount, pelvis_ang_vel, pelvis_quat, projected_gravity  # noqa: E402
from embody.rotations import projected_gravity as gravity_of  # noqa: E402
from embody.sims import InitState, SimConfig, make_sim  # noqa: E402

N = 8
PHYSICS_DT = 0.002
WAIST = c.WAIST[0]


@pytest.fixture(scope="module")
def spec():
    return get_robot("h1_2")


def random_init(spec, rng, n=N) -> InitState:
    jp = np.tile(spec._column("default"), (n, 1))
    jv = np.zeros_like(jp)
    lo, hi = c.JOINT_RANGES[WAIST]
    jp[:, WAIST] = rng.uniform(lo + 0.05, hi - 0.05, n)
    jv[:, WAIST] = rng.uniform(-3.0, 3.0, n)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return InitState(jp, jv, np.tile([0.0, 0.0, 5.0], (n, 1)), q, np.zeros((n, 3)), rng.uniform(-2, 2, (n, 3)))


def make(spec, decimation=10):
    return make_sim("mujoco", spec, SimConfig(n_envs=N, decimation=decimation, physics_dt=PHYSICS_DT))


def quat_angle(a, b):
    """Rotation angle between unit quaternions (sign-insensitive), (n,)."""
    return 2.0 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=1)), 0.0, 1.0))


def test_mount_read_from_model(spec):
    m = imu_mount(spec)
    assert isinstance(m, ImuMount) and m.waist_index == WAIST
    assert imu_mount(spec) is m  # cached per spec path
    np.testing.assert_allclose(m.waist_axis, [0.0, 0.0, 1.0])  # torso_joint: yaw about pelvis z
    assert np.isclose(np.linalg.norm(m.torso_quat), 1.0) and np.isclose(np.linalg.norm(m.site_quat), 1.0)
    with pytest.raises(ValueError):
        m.waist_axis[0] = 1.0  # frozen arrays


def test_exact_after_reset(spec):
    sim = make(spec)
    sim.reset(np.arange(N), random_init(spec, np.random.default_rng(0)))
    s, mount = sim.state(), imu_mount(spec)
    p = s.privileged
    pq = pelvis_quat(s, mount)
    assert pq.shape == (N, 4)
    np.testing.assert_allclose(np.linalg.norm(pq, axis=1), 1.0, atol=1e-12)
    sign = np.sign(np.sum(pq * p.base_quat, axis=1))[:, None]
    np.testing.assert_allclose(pq, sign * p.base_quat, atol=1e-6)
    np.testing.assert_allclose(pelvis_ang_vel(s, mount), p.base_ang_vel, atol=1e-6)
    np.testing.assert_allclose(projected_gravity(s, mount), gravity_of(p.base_quat), atol=1e-6)
    # the waist really matters here: the raw IMU is not the pelvis
    assert quat_angle(s.imu_quat, p.base_quat).max() > 0.5


def test_reads_only_observed_state(spec):
    sim = make(spec)
    sim.reset(np.arange(N), random_init(spec, np.random.default_rng(1)))
    s, mount = sim.state(), imu_mount(spec)
    obs = s.observed()
    assert obs.privileged is None
    np.testing.assert_array_equal(pelvis_quat(obs, mount), pelvis_quat(s, mount))
    np.testing.assert_array_equal(pelvis_ang_vel(obs, mount), pelvis_ang_vel(s, mount))
    np.testing.assert_array_equal(projected_gravity(obs, mount), projected_gravity(s, mount))


def test_after_steps_within_one_physics_step_lag(spec):
    sim, mount = make(spec), imu_mount(spec)
    sim.reset(np.arange(N), random_init(spec, np.random.default_rng(2)))
    cmd = np.tile(spec._column("default"), (N, 1))
    for _ in range(5):
        sim.step(cmd)
        s = sim.state()
        p = s.privileged
        # the IMU orientation is one physics step old: the error is the torso's turn in that step
        torso_rate = np.linalg.norm(p.base_ang_vel + s.joint_vel[:, WAIST, None] * mount.waist_axis, axis=1)
        bound = 1.05 * PHYSICS_DT * torso_rate + 1e-6
        assert np.all(quat_angle(pelvis_quat(s, mount), p.base_quat) <= bound)
        g_err = np.linalg.norm(projected_gravity(s, mount) - gravity_of(p.base_quat), axis=1)
        assert np.all(g_err <= bound)
        # gyro one physics step old: measured up to ~1.1 rad/s under violent waist motion
        assert np.abs(pelvis_ang_vel(s, mount) - p.base_ang_vel).max() < 2.0


def test_exact_when_lag_is_accounted_for(spec):
    """IMU read after physics step k+1 is the state after step k: pairing them is exact."""
    sim, mount = make(spec, decimation=1), imu_mount(spec)
    sim.reset(np.arange(N), random_init(spec, np.random.default_rng(3)))
    cmd = np.tile(spec._column("default"), (N, 1))
    prev = None
    for _ in range(5):
        sim.step(cmd)
        s = sim.state()
        if prev is not None:
            paired = prev.observed()
            paired.imu_quat, paired.imu_gyro = s.imu_quat, s.imu_gyro
            sign = np.sign(np.sum(pelvis_quat(paired, mount) * prev.privileged.base_quat, axis=1))[:, None]
            np.testing.assert_allclose(pelvis_quat(paired, mount), sign * prev.privileged.base_quat, atol=1e-9)
            np.testing.assert_allclose(pelvis_ang_vel(paired, mount), prev.privileged.base_ang_vel, atol=1e-9)
        prev = s


def test_composition_order_with_tilted_mount(spec, tmp_path):
    """Non-trivial torso offset/orientation, tilted waist axis and rotated IMU site, checked
    against MuJoCo's own kinematics (the real mount is identity-oriented, which hides order)."""
    xml = spec.mjcf.read_text()
    xml = xml.replace(
        '<body name="torso_link">', '<body name="torso_link" pos="0.01 0.02 0.05" quat="0.9 0.2 -0.3 0.1">'
    )
    xml = xml.replace('<joint name="torso_joint" axis="0 0 1"', '<joint name="torso_joint" axis="0.3 -0.2 1"')
    xml = xml.replace('<site name="imu" ', '<site name="imu" quat="0.7 -0.1 0.4 0.3" ')
    path = tmp_path / "h1_2_tilted.xml"
    path.write_text(xml)
    tilted = dataclasses.replace(spec, mjcf=path)
    mount = imu_mount(tilted)
    assert not np.allclose(mount.torso_quat, [1, 0, 0, 0]) and not np.allclose(mount.site_quat, [1, 0, 0, 0])

    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, c.IMU_SITE)
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "torso_joint")
    qa, va = m.jnt_qposadr[jid], m.jnt_dofadr[jid]
    rng = np.random.default_rng(4)
    n = 6
    imu_q, gyro, jp, jv, base_q, base_w = (
        np.zeros((n, 4)),
        np.zeros((n, 3)),
        np.zeros((n, c.NUM_JOINTS)),
        np.zeros((n, c.NUM_JOINTS)),
        np.zeros((n, 4)),
        np.zeros((n, 3)),
    )
    for i in range(n):
        q = rng.normal(size=4)
        base_q[i] = q / np.linalg.norm(q)
        base_w[i] = rng.uniform(-2, 2, 3)
        jp[i, WAIST], jv[i, WAIST] = rng.uniform(-2, 2), rng.uniform(-3, 3)
        d.qpos[:], d.qvel[:] = m.qpos0, 0.0
        d.qpos[3:7], d.qvel[3:6] = base_q[i], base_w[i]
        d.qpos[qa], d.qvel[va] = jp[i, WAIST], jv[i, WAIST]
        mujoco.mj_forward(m, d)
        mujoco.mju_mat2Quat(imu_q[i], d.site_xmat[sid])
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_SITE, sid, vel, 1)
        gyro[i] = vel[:3]
    state = RobotState(
        joint_pos=jp, joint_vel=jv, joint_torque=np.zeros_like(jp), time=np.zeros(n), imu_quat=imu_q, imu_gyro=gyro
    )
    pq = pelvis_quat(state, mount)
    sign = np.sign(np.sum(pq * base_q, axis=1))[:, None]
    np.testing.assert_allclose(pq, sign * base_q, atol=1e-9)
    np.testing.assert_allclose(pelvis_ang_vel(state, mount), base_w, atol=1e-9)
    np.testing.assert_allclose(projected_gravity(state, mount), gravity_of(base_q), atol=1e-9)
