"""The cross-simulator conformance suite: every installed adapter keeps RobotState's conventions
and agrees with MuJoCo (the reference) on physics within documented tolerances.

Tolerances are physics, not bugs: engines differ in integrators (MuJoCo and Genesis treat PD
damping implicitly under implicitfast, PyBullet's PD is explicit and it has no armature),
contact models and solvers.
An adapter that lacks a capability skips that test with the capability named.
"""

import numpy as np
import pytest

from embody.robots import get_robot
from embody.rotations import quat_rotate_inverse, yaw_quat
from embody.sims import InitState, SimConfig, installed_simulators, make_sim

G = 9.81
SIMS = [pytest.param(s, marks=pytest.mark.genesis) if s == "genesis" else s for s in installed_simulators()]

# documented tolerances (see the module docstring)
PD_STEP_TOL = 0.02  # rad, max |Δq| of a PD step response vs. MuJoCo over 0.4 s
CONTACT_WEIGHT_TOL = 0.25  # fraction of body weight carried by the feet at rest
FREE_FALL_TOL = 0.005  # m after 0.2 s
ACCEL_FREE_FALL_TOL = 0.5  # m/s², specific force in free fall


def build(sim_name, robot="h1_2", n=2, control="pd", decimation=10, physics_dt=0.002):
    cfg = SimConfig(n_envs=n, decimation=decimation, control=control, physics_dt=physics_dt,
                    render_width=64, render_height=48)
    return make_sim(sim_name, get_robot(robot), cfg)


def needs(sim, *capabilities):
    missing = set(capabilities) - set(sim.capabilities)
    if missing:
        sim.close()
        pytest.skip(f"{sim.name} lacks capability {sorted(missing)}")


def airborne(spec, k, z=2.5, quat=None, joint_pos=None, joint_vel=None, lin_vel=None, ang_vel=None):
    return InitState(
        joint_pos=np.tile(spec.default_pose, (k, 1)) if joint_pos is None else joint_pos,
        joint_vel=np.zeros((k, spec.n_joints)) if joint_vel is None else joint_vel,
        base_pos=np.tile([0.0, 0.0, z], (k, 1)),
        base_quat=np.tile([1.0, 0, 0, 0], (k, 1)) if quat is None else quat,
        base_lin_vel=np.zeros((k, 3)) if lin_vel is None else lin_vel,
        base_ang_vel=np.zeros((k, 3)) if ang_vel is None else ang_vel,
    )


def same_rotation(q1, q2, atol):
    """Quaternions up to sign (q and -q are one rotation)."""
    return np.allclose(q1, q2, atol=atol) or np.allclose(q1, -q2, atol=atol)


@pytest.mark.parametrize("sim_name", SIMS)
def test_joint_order_and_units(sim_name):
    sim = build(sim_name)
    spec = sim.robot
    idx = np.arange(spec.n_joints)
    q = np.clip(spec.default_pose + 0.02 * (idx + 1) * (-1) ** idx, spec.lower + 1e-3, spec.upper - 1e-3)
    dq = 0.01 * (idx + 1)
    sim.reset(np.arange(2), airborne(spec, 2, joint_pos=np.tile(q, (2, 1)), joint_vel=np.tile(dq, (2, 1))))
    s = sim.state()
    np.testing.assert_allclose(s.joint_pos, np.tile(q, (2, 1)), atol=1e-6)  # motor order, radians
    np.testing.assert_allclose(s.joint_vel, np.tile(dq, (2, 1)), atol=1e-6)  # rad/s
    assert s.joint_torque.shape == (2, spec.n_joints)
    np.testing.assert_array_equal(s.time, 0.0)
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_imu_quaternion_is_wxyz_and_frames_are_body_frames(sim_name):
    sim = build(sim_name)
    needs(sim, "imu")
    spec = sim.robot
    quat = yaw_quat(np.array([np.pi / 2, np.pi / 2]))  # base turned 90° left
    lin_world = np.tile([1.0, 0.0, 0.0], (2, 1))  # moving along world x ...
    ang_body = np.tile([0.3, 0.0, 0.0], (2, 1))  # ... rolling about its own x
    sim.reset(np.arange(2), airborne(spec, 2, quat=quat, lin_vel=lin_world, ang_vel=ang_body))
    s = sim.state()
    c = np.cos(np.pi / 4)
    for i in range(2):  # waist at 0: the torso IMU is aligned with the pelvis
        assert same_rotation(s.imu_quat[i], np.array([c, 0, 0, c]), 1e-4), s.imu_quat[i]
    np.testing.assert_allclose(s.imu_gyro, ang_body, atol=1e-3)
    p = s.privileged
    assert same_rotation(p.base_quat[0], np.array([c, 0, 0, c]), 1e-6)
    np.testing.assert_allclose(p.base_lin_vel, np.tile([0.0, -1.0, 0.0], (2, 1)), atol=1e-6)  # base frame
    np.testing.assert_allclose(p.base_ang_vel, ang_body, atol=1e-6)
    np.testing.assert_allclose(p.base_pos[:, 2], 2.5, atol=1e-6)
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_free_fall_under_gravity(sim_name):
    sim = build(sim_name, n=1)
    spec = sim.robot
    sim.reset(np.array([0]), airborne(spec, 1, z=3.0))
    for _ in range(10):  # 0.2 s
        sim.step(np.tile(spec.default_pose, (1, 1)))
    s = sim.state()
    np.testing.assert_allclose(s.time, 0.2, atol=1e-9)
    np.testing.assert_allclose(s.privileged.base_pos[0, 2], 3.0 - 0.5 * G * 0.2**2, atol=FREE_FALL_TOL)
    if "imu" in sim.capabilities:  # an accelerometer in free fall reads ~0 specific force
        assert np.linalg.norm(s.imu_accel[0]) < ACCEL_FREE_FALL_TOL, s.imu_accel
    sim.close()


def _pd_step(sim_name) -> np.ndarray:
    sim = build(sim_name, robot="peg_arm", n=1)
    spec = sim.robot
    sim.reset(np.array([0]), InitState(spec.default_pose[None], np.zeros((1, spec.n_joints))))
    target = spec.default_pose.copy()
    target[0] += 0.3  # joint 1 turns about the vertical: a clean step, free of gravity
    trajectory = []
    for _ in range(20):
        sim.step(target[None])
        trajectory.append(sim.state().joint_pos[0, 0])
    sim.close()
    return np.array(trajectory)


@pytest.mark.parametrize("sim_name", SIMS)
def test_pd_step_response_matches_mujoco(sim_name):
    ours, reference = _pd_step(sim_name), _pd_step("mujoco")
    assert abs(reference[-1] - reference[0]) > 0.1  # the joint did move
    assert np.abs(ours - reference).max() < PD_STEP_TOL, np.abs(ours - reference).max()


@pytest.mark.parametrize("sim_name", SIMS)
def test_ground_contact_carries_the_robot(sim_name):
    import mujoco

    sim = build(sim_name, n=1)
    needs(sim, "contact")
    spec = sim.robot
    weight = G * mujoco.MjModel.from_xml_path(str(spec.mjcf)).body_subtreemass[1]
    sim.reset(np.array([0]), airborne(spec, 1, z=spec.default_base_pos[2] + 0.01))
    forces = []
    for _ in range(15):  # 0.3 s: settled on both feet, before PD alone lets it tip
        sim.step(np.tile(spec.default_pose, (1, 1)))
        forces.append(sim.state().privileged.contact_force[0])
    s = sim.state()
    late = np.mean(forces[5:], axis=0)
    assert (late > 0).all(), late  # both feet touch
    assert abs(late.sum() / weight - 1) < CONTACT_WEIGHT_TOL, (late.sum(), weight)
    assert abs(s.privileged.base_pos[0, 2] - spec.default_base_pos[2]) < 0.05
    if "imu" in sim.capabilities:  # standing still: the accelerometer reads +g up
        assert abs(s.imu_accel[0, 2] - G) < 1.5, s.imu_accel
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_determinism(sim_name):
    runs = []
    for _ in range(2):
        sim = build(sim_name, n=2)
        spec = sim.robot
        sim.reset(np.arange(2), airborne(spec, 2, z=spec.default_base_pos[2] + 0.01))
        rng = np.random.default_rng(7)
        for _ in range(10):
            sim.step(spec.default_pose + 0.2 * rng.standard_normal((2, spec.n_actions)))
        runs.append(sim.state().joint_pos)
        sim.close()
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("sim_name", SIMS)
def test_reset_of_selected_envs(sim_name):
    sim = build(sim_name, robot="cartpole", n=3, control="torque", decimation=2, physics_dt=0.01)
    sim.reset(np.arange(3), InitState(np.tile([0.0, np.pi], (3, 1)), np.zeros((3, 2))))
    for _ in range(5):
        sim.step(np.array([[5.0], [-5.0], [2.0]]))
    before = sim.state()
    sim.reset(np.array([1]), InitState(np.array([[0.5, 0.1]]), np.zeros((1, 2))))
    after = sim.state()
    np.testing.assert_array_equal(after.joint_pos[[0, 2]], before.joint_pos[[0, 2]])
    np.testing.assert_allclose(after.joint_pos[1], [0.5, 0.1], atol=1e-9)
    assert after.time[1] == 0 and after.time[0] > 0
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_full_state_restores_exactly(sim_name):
    sim = build(sim_name, robot="cartpole", n=2, control="torque", decimation=2, physics_dt=0.01)
    needs(sim, "state")
    sim.reset(np.arange(2), InitState(np.tile([0.0, np.pi], (2, 1)), np.zeros((2, 2))))
    saved = sim.get_state()
    actions = np.random.default_rng(1).uniform(-10, 10, (5, 2, 1))
    for a in actions:
        sim.step(a)
    first = sim.state().joint_pos.copy()
    sim.set_state(saved)
    for a in actions:
        sim.step(a)
    np.testing.assert_allclose(sim.state().joint_pos, first, atol=1e-12)
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_non_finite_commands_reset_and_are_flagged(sim_name):
    sim = build(sim_name, robot="cartpole", n=2, control="torque", decimation=2, physics_dt=0.01)
    sim.reset(np.arange(2), InitState(np.tile([0.0, np.pi], (2, 1)), np.zeros((2, 2))))
    sim.step(np.array([[np.nan], [1.0]]))
    assert sim.diverged.tolist() == [True, False] and sim.divergence_count == 1
    assert np.isfinite(sim.state().joint_pos).all()
    sim.step(np.zeros((2, 1)))
    assert not sim.diverged.any()
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_camera_renders_each_env(sim_name):
    sim = build(sim_name, n=2)
    needs(sim, "render")
    spec = sim.robot
    quat = yaw_quat(np.array([0.0, np.pi / 2]))
    sim.reset(np.arange(2), airborne(spec, 2, z=spec.default_base_pos[2], quat=quat))
    frames = sim.render()
    assert frames.shape == (2, 48, 64, 3) and frames.dtype == np.uint8
    assert frames.std() > 5, "blank frames"
    changed = (np.abs(frames[0].astype(int) - frames[1]).sum(-1) > 30).mean()
    assert changed > 0.01, f"both envs rendered (almost) the same: {changed:.2%} of pixels differ"
    sim.close()


def test_quat_helpers_agree_with_a_rotation_matrix():
    q = yaw_quat(np.array([np.pi / 2]))
    np.testing.assert_allclose(quat_rotate_inverse(q, np.array([1.0, 0, 0])), [[0, -1, 0]], atol=1e-12)


@pytest.mark.parametrize("sim_name", SIMS)
def test_a_robot_state_outlives_the_next_step(sim_name):
    sim = build(sim_name, n=1)
    spec = sim.robot
    sim.reset(np.array([0]), airborne(spec, 1, z=3.0, ang_vel=np.array([[0.5, 0.2, 0.1]])))
    kept = sim.state()
    snapshot = {k: np.array(v, copy=True) for k, v in vars(kept).items() if isinstance(v, np.ndarray)}
    snapshot.update({f"privileged.{k}": np.array(v, copy=True) for k, v in vars(kept.privileged).items()
                     if isinstance(v, np.ndarray)})
    for _ in range(3):
        sim.step(np.tile(spec.default_pose, (1, 1)) + 0.1)
    for k, v in snapshot.items():
        obj = kept.privileged if k.startswith("privileged.") else kept
        np.testing.assert_array_equal(getattr(obj, k.split(".")[-1]), v, err_msg=f"{k} changed under a later step")
    sim.close()
