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
from embody.sims import SIMULATORS, InitState, SimConfig, installed_simulators, make_sim
from embody.sims.base import UnsupportedTask, check_capabilities

G = 9.81
MARKED = {"genesis": pytest.mark.genesis, "mjx": pytest.mark.mjx}
SIMS = [pytest.param(s, marks=MARKED[s]) if s in MARKED else s for s in installed_simulators()]

# documented tolerances (see the module docstring)
PD_STEP_TOL = 0.02  # rad, max |Δq| of a PD step response vs. MuJoCo over 0.4 s
CONTACT_WEIGHT_TOL = 0.25  # fraction of body weight carried by the feet at rest
FREE_FALL_TOL = 0.005  # m after 0.2 s
ACCEL_FREE_FALL_TOL = 0.5  # m/s², specific force in free fall
ARMATURE_TOL = {"pybullet": 0.06}  # rad over a knee step's first 80 ms: PyBullet folds armature into the link


def build(sim_name, robot="h1_2", n=2, control="pd", decimation=10, physics_dt=0.002):
    cfg = SimConfig(
        n_envs=n, decimation=decimation, control=control, physics_dt=physics_dt, render_width=64, render_height=48
    )
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
    try:
        ours = _pd_step(sim_name)
    except UnsupportedTask as e:  # MJX lacks the peg board's cylinder-box collisions; the knee tests cover its PD
        pytest.skip(str(e))
    reference = _pd_step("mujoco")
    assert abs(reference[-1] - reference[0]) > 0.1  # the joint did move
    assert np.abs(ours - reference).max() < PD_STEP_TOL, np.abs(ours - reference).max()


def _knee_step(sim_name, armature: str = "model", scales=None) -> np.ndarray:
    """The airborne H1-2's left knee after a 0.3 rad step of its PD target: offsets (n, 8) over 80 ms, one row per
    env (``scales``: each env's ``armature_scale``)."""
    n = 1 if scales is None else len(scales)
    cfg = SimConfig(n_envs=n, decimation=5, physics_dt=0.002, armature=armature, render_width=64, render_height=48)
    sim = make_sim(sim_name, get_robot("h1_2"), cfg)
    spec, knee = sim.robot, sim.robot.joint_names.index("left_knee_joint")
    if scales is not None:
        from embody.sims import PhysicsParams

        sim.set_physics(np.arange(n), PhysicsParams(armature_scale=np.array(scales)))
    sim.reset(np.arange(n), airborne(spec, n, z=3.0))
    target = np.tile(spec.default_pose, (n, 1))
    target[:, knee] += 0.3
    offsets = []
    for _ in range(8):
        sim.step(target)
        offsets.append(sim.state().joint_pos[:, knee] - spec.default_pose[knee])
    sim.close()
    return np.array(offsets).T


@pytest.mark.parametrize("sim_name", SIMS)
def test_motor_armature_slows_the_knee_as_in_mujoco(sim_name):
    """``armature="motors"``: the motor table's rotor inertia (16x the vendor MJCF's at the knee) reaches every
    engine: the knee rises more slowly than with the model file's, and as it does in MuJoCo."""
    reference, model_file = _knee_step("mujoco", "motors")[0], _knee_step("mujoco")[0]
    assert (reference[:4] < model_file[:4] - 0.03).all(), (reference, model_file)
    tol = ARMATURE_TOL.get(sim_name, PD_STEP_TOL)
    assert np.abs(model_file - reference).max() > 1.5 * tol  # an engine ignoring the setting would fail
    ours = reference if sim_name == "mujoco" else _knee_step(sim_name, "motors")[0]
    assert np.abs(ours - reference).max() < tol, np.abs(ours - reference).max()


@pytest.mark.parametrize("sim_name", SIMS)
def test_armature_scale_is_per_env_as_in_mujoco(sim_name):
    """Domain randomization of the rotor inertia: env 1's armature 16x env 0's (the knee's motor-table value)."""
    reference = _knee_step("mujoco", scales=[1.0, 16.0])
    assert (reference[1, :4] < reference[0, :4] - 0.03).all(), reference
    ours = reference if sim_name == "mujoco" else _knee_step(sim_name, scales=[1.0, 16.0])
    assert np.abs(ours - reference).max() < ARMATURE_TOL.get(sim_name, PD_STEP_TOL), np.abs(ours - reference).max()


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
def test_foot_positions_are_the_foot_sites_in_the_world(sim_name):
    sim = build(sim_name, n=2)
    needs(sim, "contact")
    spec = sim.robot
    init = airborne(spec, 2, z=spec.default_base_pos[2] + 0.3)
    init.base_pos[1, :2] = [1.0, -2.0]
    sim.reset(np.arange(2), init)
    feet = sim.state().privileged.foot_pos
    assert feet.shape == (2, len(spec.sensors.foot_sites), 3)
    # the default pose puts the soles (the foot sites) on z = 0 when the pelvis is at default_base_pos
    np.testing.assert_allclose(feet[:, :, 2], 0.3, atol=0.01)
    np.testing.assert_allclose(feet[1] - feet[0], np.tile([1.0, -2.0, 0.0], (feet.shape[1], 1)), atol=1e-9)
    assert feet[0, 0, 1] > 0 > feet[0, 1, 1]  # left foot on +y
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
def test_full_state_restores_out_of_contact(sim_name):
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
def test_exact_state_replays_bit_for_bit(sim_name):
    """step, get_state, step k, set_state, step k again: identical rows, in contact, for a row that
    is old by then and for rows set into the other env."""
    sim = build(sim_name, n=2, decimation=4)
    needs(sim, "exact_state")
    pose = np.tile(sim.robot.default_pose, (2, 1))
    for _ in range(25):  # standing: both feet in contact
        sim.step(pose)
    saved = sim.get_state()
    rng = np.random.default_rng(0)
    actions = [pose + 0.1 * rng.standard_normal(pose.shape) for _ in range(10)]

    def trajectory(acts):
        rows = []
        for a in acts:
            sim.step(a)
            rows.append(sim.get_state())
        return np.stack(rows)

    first = trajectory(actions)
    for _ in range(20):
        sim.get_state()
    sim.set_state(saved)
    np.testing.assert_array_equal(trajectory(actions), first)
    sim.set_state(saved[[1, 0]])
    np.testing.assert_array_equal(trajectory([a[[1, 0]] for a in actions]), first[:, [1, 0]])
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_a_task_needing_exact_restore_is_refused_by_name(sim_name):
    offered = SIMULATORS.get(sim_name).capabilities
    if "exact_state" in offered:
        check_capabilities(sim_name, offered, "replay", {"exact_state"})
    else:
        with pytest.raises(UnsupportedTask, match="lacks exact_state"):
            check_capabilities(sim_name, offered, "replay", {"exact_state"})


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
    snapshot.update(
        {
            f"privileged.{k}": np.array(v, copy=True)
            for k, v in vars(kept.privileged).items()
            if isinstance(v, np.ndarray)
        }
    )
    for _ in range(3):
        sim.step(np.tile(spec.default_pose, (1, 1)) + 0.1)
    for k, v in snapshot.items():
        obj = kept.privileged if k.startswith("privileged.") else kept
        np.testing.assert_array_equal(getattr(obj, k.split(".")[-1]), v, err_msg=f"{k} changed under a later step")
    sim.close()


# -- domain randomization (capabilities "physics_params" and "push") ---------------------------------
PUSH_TOL = 1e-6  # m/s: a push is an exact velocity write; it must not leak into other envs
# the feet carry more than the added weight while the heavier robot settles from its 1 cm drop:
# measured +7% in all three engines (and x1.207-1.209 for a 1.2 mass scale)
ADDED_WEIGHT_TOL = 0.15  # fraction of added_mass * g
MASS_SCALE_TOL = 0.05  # fraction of the nominal weight carried
FRICTION_DECEL_TOL = 0.25  # fraction of mu * g (measured 2.00-2.13 m/s² against 1.96: the body rocks)
# a nominal-again env replays a never-randomized one: bit for bit in MuJoCo, MJX and PyBullet (the same
# model numbers written back); Genesis recomputes the inverse weights it regularises contacts with
# (measured 2e-16 rad)
RESTORED_TOL = {"mujoco": 0.0, "pybullet": 0.0, "genesis": 1e-12, "mjx": 0.0}  # rad


def _standing(spec, k, lin_vel=None):
    return airborne(spec, k, z=spec.default_base_pos[2] + 0.01, lin_vel=lin_vel)


def _world_lin_vel(state):
    from embody.rotations import quat_rotate

    p = state.privileged
    return quat_rotate(p.base_quat, p.base_lin_vel)


def _feet_xy(spec, state) -> np.ndarray:
    """World x, y of the foot sites (n, feet, 2), by MuJoCo's kinematics at each env's configuration
    (the same frames in every adapter: RobotState's base pose and joint angles)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    d = mujoco.MjData(m)
    free = m.jnt_qposadr[np.flatnonzero(m.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]]
    qadr = [m.jnt_qposadr[m.joint(n).id] for n in spec.joint_names]
    sites = [m.site(s).id for s in spec.sensors.foot_sites]
    out = []
    for i in range(len(state.joint_pos)):
        d.qpos[free : free + 3], d.qpos[free + 3 : free + 7] = (
            state.privileged.base_pos[i],
            state.privileged.base_quat[i],
        )
        d.qpos[qadr] = state.joint_pos[i]
        mujoco.mj_kinematics(m, d)
        out.append(d.site_xpos[sites, :2].copy())
    return np.array(out)


@pytest.mark.parametrize("sim_name", SIMS)
def test_push_adds_world_velocity_to_the_pushed_envs_only(sim_name):
    sim = build(sim_name, n=3)
    needs(sim, "push")
    spec = sim.robot
    quat = yaw_quat(np.array([np.pi / 2, 0.0, -np.pi / 3]))  # world and base frames differ
    sim.reset(np.arange(3), airborne(spec, 3, quat=quat, ang_vel=np.tile([0.0, 0.0, 0.4], (3, 1))))
    before = _world_lin_vel(sim.state())
    kick = np.array([[1.0, 0.0, 0.0], [0.0, -0.5, 0.3]])
    sim.push(np.array([0, 2]), kick)
    now = _world_lin_vel(sim.state())
    np.testing.assert_allclose(now[[0, 2]] - before[[0, 2]], kick, atol=PUSH_TOL)
    np.testing.assert_allclose(now[1], before[1], atol=PUSH_TOL)
    sim.step(np.tile(spec.default_pose, (3, 1)))  # in flight, the kick stays: envs differ by it alone
    p = sim.state().privileged  # (in the base frame: the turning base moves its origin alike in each)
    kick_base = quat_rotate_inverse(p.base_quat[[0, 2]], kick)
    np.testing.assert_allclose(p.base_lin_vel[[0, 2]] - kick_base, p.base_lin_vel[[1, 1]], atol=1e-6)
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_an_upward_wrench_equal_to_the_weight_holds_a_free_robot_up(sim_name):
    sim = build(sim_name, n=2)
    needs(sim, "applied_wrench")
    spec = sim.robot
    sim.reset(np.arange(2), airborne(spec, 2))
    from embody.sims.mujoco.model import build_model  # the reference model's mass

    mass = float(build_model(spec, SimConfig())[0].body_subtreemass[0])
    sim.apply_wrench(np.array([1]), spec.base_body, np.array([[0.0, 0.0, mass * G]]), np.zeros((1, 3)))
    z0 = sim.state().privileged.base_pos[:, 2].copy()
    for _ in range(10):  # 0.2 s
        sim.step(np.tile(spec.default_pose, (2, 1)))
    dz = sim.state().privileged.base_pos[:, 2] - z0
    assert abs(dz[0] + 0.5 * G * 0.2**2) < FREE_FALL_TOL  # without it: free fall
    assert abs(dz[1]) < FREE_FALL_TOL  # with it: the centre of mass stays (the joints hold the pose)
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_added_mass_and_mass_scale_change_the_weight_on_the_feet(sim_name):
    from embody.sims import PhysicsParams

    sim = build(sim_name, n=4)
    needs(sim, "physics_params", "contact")
    spec = sim.robot
    added, scale = 8.0, 1.2
    sim.set_physics(np.array([1]), PhysicsParams(added_base_mass=np.array([added])))
    sim.set_physics(np.array([2]), PhysicsParams(mass_scale=np.array([scale])))
    sim.set_physics(np.array([3]), PhysicsParams(friction=np.array([1.0])))  # nominal, and the masses untouched
    sim.reset(np.arange(4), _standing(spec, 4))
    forces = []
    for _ in range(15):  # 0.3 s: settled on both feet
        sim.step(np.tile(spec.default_pose, (4, 1)))
        forces.append(sim.state().privileged.contact_force.sum(axis=1))
    w = np.mean(forces[5:], axis=0)  # (4,) weight carried by the feet [N]
    print(
        f"{sim_name}: carried {w.round(2)} N; +{added} kg -> {w[1] - w[0]:.2f} N (expected {added * G:.2f}), "
        f"x{scale} -> x{w[2] / w[0]:.4f}, friction 1 only -> {w[3] - w[0]:+.2g} N"
    )
    assert abs((w[1] - w[0]) / (added * G) - 1) < ADDED_WEIGHT_TOL, w
    assert abs(w[2] / w[0] / scale - 1) < MASS_SCALE_TOL, w
    assert abs(w[3] / w[0] - 1) < 1e-3, w  # an added mass defaulting to other than 0 would show here
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_pd_gain_scales_scale_the_motor_torques(sim_name):
    """One short physics step (0.1 ms) from rest (stiffness) and from a joint velocity (damping): the torque each
    env's PD reports is its scale times the nominal env's (Genesis reports the PD force after the step, which
    the short step keeps within a few percent of the one before it)."""
    from embody.sims import PhysicsParams

    sim = build(sim_name, n=3, decimation=1, physics_dt=1e-4)
    needs(sim, "physics_params")
    spec, ids = sim.robot, np.array([1, 2])
    sim.set_physics(ids, PhysicsParams(kp_scale=np.array([0.5, 2.0]), kd_scale=np.array([2.0, 0.5])))
    sim.reset(np.arange(3), airborne(spec, 3))
    sim.step(np.tile(spec.default_pose + 0.05, (3, 1)))  # from rest: kp (q* − q)
    tau = sim.state().joint_torque
    np.testing.assert_allclose(tau[1], 0.5 * tau[0], rtol=0.05, atol=0.05)
    np.testing.assert_allclose(tau[2], 2.0 * tau[0], rtol=0.05, atol=0.05)
    sim.reset(np.arange(3), airborne(spec, 3, joint_vel=np.full((3, spec.n_joints), 0.5)))
    sim.step(np.tile(spec.default_pose, (3, 1)))  # at the target, moving: −kd q̇
    tau = sim.state().joint_torque
    np.testing.assert_allclose(tau[1], 2.0 * tau[0], rtol=0.05, atol=0.05)
    np.testing.assert_allclose(tau[2], 0.5 * tau[0], rtol=0.05, atol=0.05)
    assert np.abs(tau[0]).max() > 0.4  # the damping torques are there to compare
    sim.close()


@pytest.mark.parametrize("sim_name", SIMS)
def test_friction_scales_the_deceleration_of_a_sliding_robot(sim_name):
    """The H1-2 dropped on its back (5 cm) sliding feet first at 2 m/s: on flat ground, sliding
    friction decelerates it at mu * g. (Standing, its feet stick even at mu = 0.2: the body
    pivots over them and needs little horizontal force.)"""
    from embody.sims import PhysicsParams

    sim = build(sim_name, n=3)
    needs(sim, "physics_params")
    spec = sim.robot
    mu = np.array([0.2, 1.0, 2.0])  # the H1-2's nominal friction is 1: these are the coefficients
    sim.set_physics(np.arange(3), PhysicsParams(friction=mu))
    on_back = np.tile([np.sqrt(0.5), 0.0, -np.sqrt(0.5), 0.0], (3, 1))  # face up, head towards -x
    sim.reset(np.arange(3), airborne(spec, 3, z=0.12, quat=on_back, lin_vel=np.tile([2.0, 0.0, 0.0], (3, 1))))
    v, x = [], []
    for _ in range(20):  # 0.4 s: landed after ~0.1 s
        sim.step(np.tile(spec.default_pose, (3, 1)))
        v.append(_world_lin_vel(sim.state())[:, 0])
        x.append(sim.state().privileged.base_pos[:, 0].copy())
    v, x = np.array(v), np.array(x)
    decel = (v[9] - v[19]) / (10 * sim.dt)  # (3,) over the last 0.2 s
    print(
        f"{sim_name}: slid {x[-1].round(3)} m, final speed {v[-1].round(3)} m/s, deceleration of the "
        f"mu=0.2 env {decel[0]:.2f} m/s² (mu*g = {0.2 * G:.2f})"
    )
    assert x[-1, 0] > x[-1, 1] + 0.1 and x[-1, 1] > x[-1, 2] - 0.01, x[-1]
    assert v[-1, 0] > 0.5 and abs(v[-1, 1]) < 0.05 and abs(v[-1, 2]) < 0.05, v[-1]
    assert abs(decel[0] / (0.2 * G) - 1) < FRICTION_DECEL_TOL, decel


@pytest.mark.parametrize("sim_name", SIMS)
def test_nominal_parameters_restore_the_nominal_physics(sim_name):
    from embody.sims import PhysicsParams

    sim = build(sim_name, n=3)
    needs(sim, "physics_params")
    spec = sim.robot
    ids = np.array([1, 2])
    sim.set_physics(
        ids,
        PhysicsParams(
            friction=np.array([0.3, 2.0]), added_base_mass=np.array([5.0, -2.0]), mass_scale=np.array([1.3, 0.8])
        ),
    )
    sim.reset(np.arange(3), _standing(spec, 3))
    for _ in range(3):  # run randomized for a while (in contact) ...
        sim.step(np.tile(spec.default_pose, (3, 1)))
    sim.set_physics(ids, PhysicsParams(friction=np.ones(2), added_base_mass=np.zeros(2), mass_scale=np.ones(2)))
    sim.reset(np.arange(3), _standing(spec, 3))  # ... then restore: all three envs must agree with env 0
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(15):  # 0.3 s of stepping in contact
        sim.step(np.tile(spec.default_pose + 0.1 * rng.standard_normal(spec.n_actions), (3, 1)))
        q = sim.state().joint_pos
        worst = max(worst, float(np.abs(q[1:] - q[0]).max()))
    print(f"{sim_name}: restored envs vs. a never-randomized env: max |dq| {worst:.3g} rad")
    assert worst <= RESTORED_TOL[sim_name], worst
    sim.close()
