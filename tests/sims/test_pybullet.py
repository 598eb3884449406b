"""The PyBullet adapter: optional import, batching, exact restore, frames and units, PD vs MuJoCo."""

import importlib
import re
import sys

import numpy as np
import pytest

from embody.extras import available
from embody.robots import get_robot
from embody.sims import InitState, SimConfig, make_sim

needs_pybullet = pytest.mark.skipif(not available("pybullet"), reason="pip install 'embody[pybullet]'")

# PD step response of the fixed-base H1-2 (+0.3 rad, 0.5 s at 2 ms) against MuJoCo: measured
# max |Δq| 0.005 rad (knee) to 0.023 rad (elbow pitch). Not the integrator (MuJoCo with Euler
# gives the same numbers); the folded armature and the joint friction model (sims/pybullet/).
STEP_RESPONSE_ATOL = 0.03  # rad, 10% of the step


def sim(robot="cartpole", n=2, **kw):
    kw.setdefault("control", "torque" if robot == "cartpole" else "pd")
    return make_sim("pybullet", get_robot(robot) if isinstance(robot, str) else robot, SimConfig(n_envs=n, **kw))


def hold(s, steps):
    """PD-hold the default pose for ``steps`` control steps."""
    cmd = np.tile(s.robot.default_pose[s.robot.actuated], (s.n_envs, 1))
    for _ in range(steps):
        s.step(cmd)


def test_module_imports_without_pybullet_and_names_the_extra(monkeypatch):
    from embody.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "pybullet", None)  # import pybullet now raises ImportError
    for mod in [m for m in sys.modules if m.startswith("embody.sims.pybullet")]:
        monkeypatch.delitem(sys.modules, mod)
    module = importlib.import_module("embody.sims.pybullet")
    cls = module.PybulletSimulator
    assert cls.name == cls.engine == "pybullet" and "pd" in cls.capabilities
    with pytest.raises(MissingExtra, match=re.escape("pip install 'embody[pybullet]'")):
        module.PybulletSimulator(get_robot("cartpole"), SimConfig())


@needs_pybullet
def test_cartpole_swingup_runs_through_make_env():
    from embody.sims.tasks import TASKS
    from embody.sims.vec_env import make_env

    cfg = TASKS.get("cartpole-swingup").config_class()
    cfg.sim.render_width, cfg.sim.render_height = 64, 48
    env = make_env("cartpole-swingup", sim="pybullet", n_envs=2, config=cfg)
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(30):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, (2, 1)))
        assert np.isfinite(obs).all() and np.isfinite(reward).all()
    frames = env.render()
    assert frames.shape == (2, 48, 64, 3) and frames.dtype == np.uint8 and frames.std() > 0
    env.close()


@needs_pybullet
def test_batched_step_equals_stepping_the_env_alone():
    init = InitState(
        np.tile(get_robot("h1_2").default_pose, (1, 1)) + 0.05, np.zeros((1, 27)), base_pos=np.array([[0.0, 0.0, 1.05]])
    )
    batch, alone = sim("h1_2", n=3, decimation=4), sim("h1_2", n=1, decimation=4)
    batch.reset(np.array([1]), init)
    alone.reset(np.array([0]), init)
    rng = np.random.default_rng(0)
    for _ in range(15):
        cmd = batch.robot.default_pose + 0.1 * rng.standard_normal((3, 27))
        batch.step(cmd)
        alone.step(cmd[1:2])
    np.testing.assert_array_equal(batch.get_state()[1, :-1], alone.get_state()[0, :-1])  # all but the token
    np.testing.assert_array_equal(batch.state().privileged.contact_force[1], alone.state().privileged.contact_force[0])


@needs_pybullet
def test_get_set_state_replays_exactly_in_contact():
    s = sim("h1_2", n=2, decimation=4)
    hold(s, 20)  # standing: both feet in contact
    saved = s.get_state()
    rng = np.random.default_rng(0)
    actions = [s.robot.default_pose + 0.1 * rng.standard_normal((2, 27)) for _ in range(10)]
    for a in actions:
        s.step(a)
    first = s.state()
    s.set_state(saved)
    for a in actions:
        s.step(a)
    second = s.state()
    np.testing.assert_array_equal(second.joint_pos, first.joint_pos)
    np.testing.assert_array_equal(second.privileged.base_pos, first.privileged.base_pos)
    np.testing.assert_array_equal(second.imu_accel, first.imu_accel)
    np.testing.assert_array_equal(second.time, first.time)


@needs_pybullet
def test_standing_h1_2_reads_like_mujoco():
    """Frames and units of every RobotState field after 0.2 s of PD standing, against MuJoCo."""
    robot = get_robot("h1_2")
    states = {}
    for name in ("mujoco", "pybullet"):
        s = make_sim(name, robot, SimConfig(n_envs=1, decimation=10))
        hold(s, 10)
        states[name] = s.state()
    mj, pb = states["mujoco"], states["pybullet"]
    np.testing.assert_allclose(pb.imu_accel, mj.imu_accel, atol=0.5)  # ≈ +9.81 z
    assert pb.imu_accel[0, 2] > 9.0
    np.testing.assert_allclose(pb.imu_quat, mj.imu_quat, atol=0.01)
    np.testing.assert_allclose(pb.imu_gyro, mj.imu_gyro, atol=0.1)
    np.testing.assert_allclose(pb.privileged.base_pos, mj.privileged.base_pos, atol=0.01)
    np.testing.assert_allclose(pb.privileged.base_quat, mj.privileged.base_quat, atol=0.01)
    np.testing.assert_allclose(pb.privileged.base_lin_vel, mj.privileged.base_lin_vel, atol=0.05)
    weight = 66.984 * 9.81
    assert abs(pb.privileged.contact_force.sum() - weight) < 0.1 * weight
    np.testing.assert_allclose(pb.joint_torque, mj.joint_torque, atol=3.0)
    np.testing.assert_allclose(pb.time, mj.time)


@needs_pybullet
def test_reset_base_state_conventions():
    """InitState: base_lin_vel world frame, base_ang_vel base frame; RobotState: both in the base frame."""
    s = sim("h1_2", n=1)
    yaw90 = np.array([[np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)]])
    s.reset(
        np.array([0]),
        InitState(
            s.robot.default_pose[None],
            np.zeros((1, 27)),
            base_pos=np.array([[1.0, 2, 3]]),
            base_quat=yaw90,
            base_lin_vel=np.array([[1.0, 0, 0]]),
            base_ang_vel=np.array([[0.0, 0.5, 0]]),
        ),
    )
    priv = s.state().privileged
    np.testing.assert_allclose(priv.base_pos, [[1, 2, 3]], atol=1e-12)
    np.testing.assert_allclose(priv.base_quat, yaw90, atol=1e-12)
    np.testing.assert_allclose(priv.base_lin_vel, [[0, -1, 0]], atol=1e-12)  # world +x seen from a base yawed 90°
    np.testing.assert_allclose(priv.base_ang_vel, [[0, 0.5, 0]], atol=1e-12)
    assert (s.state().time == 0).all()


@needs_pybullet
def test_a_moving_reset_reads_like_mujoco():
    """Base pose and velocities, IMU orientation and gyro of one tumbling InitState, both engines."""
    robot, rng = get_robot("h1_2"), np.random.default_rng(1)
    quat = rng.standard_normal((1, 4))
    init = InitState(
        robot.default_pose[None] + 0.1 * rng.standard_normal((1, 27)),
        rng.standard_normal((1, 27)),
        base_pos=np.array([[0.3, -0.2, 1.5]]),
        base_quat=quat / np.linalg.norm(quat),
        base_lin_vel=rng.standard_normal((1, 3)),
        base_ang_vel=rng.standard_normal((1, 3)),
    )
    states = {}
    for name in ("mujoco", "pybullet"):
        s = make_sim(name, robot, SimConfig(n_envs=1))
        s.reset(np.array([0]), init)
        states[name] = s.state()
    mj, pb = states["mujoco"], states["pybullet"]
    for field in ("base_pos", "base_quat", "base_lin_vel", "base_ang_vel"):
        np.testing.assert_allclose(getattr(pb.privileged, field), getattr(mj.privileged, field), atol=1e-9)
    np.testing.assert_allclose(pb.imu_quat, mj.imu_quat, atol=1e-6)
    np.testing.assert_allclose(pb.imu_gyro, mj.imu_gyro, atol=1e-6)
    np.testing.assert_allclose(pb.joint_vel, mj.joint_vel)


@needs_pybullet
def test_pd_step_response_matches_mujoco(tmp_path):
    """One joint's +0.3 rad PD step on an H1-2 with the pelvis welded (no free joint), both engines."""
    h1 = get_robot("h1_2")
    xml = re.sub(r"<freejoint[^>]*/>", "", h1.mjcf.read_text())
    xml = re.sub(r"<keyframe>.*?</keyframe>", "", xml, flags=re.S)
    (tmp_path / "h1_2_fixed.xml").write_text(xml)
    robot = h1.replace(name="h1_2_fixed", mjcf=tmp_path / "h1_2_fixed.xml", floating_base=False)
    joints = [robot.joint_names.index(n) for n in ("left_knee_joint", "left_elbow_pitch_joint")]
    cmd = np.tile(robot.default_pose, (len(joints), 1))
    cmd[np.arange(len(joints)), joints] += 0.3
    q = {}
    for name in ("mujoco", "pybullet"):
        s = make_sim(name, robot, SimConfig(n_envs=len(joints), decimation=5))
        q[name] = []
        for _ in range(50):  # 0.5 s
            s.step(cmd)
            q[name].append(s.state().joint_pos[np.arange(len(joints)), joints])
        s.close()
    mj, pb = np.array(q["mujoco"]), np.array(q["pybullet"])
    np.testing.assert_allclose(pb, mj, atol=STEP_RESPONSE_ATOL)
    assert (np.abs(pb[-1] - cmd[np.arange(len(joints)), joints]) < 0.05).all()  # settled near the target


@needs_pybullet
def test_peg_arm_reads_like_mujoco_at_rest_and_pressing_on_the_board():
    """End-effector pose and wrist wrench: holding the default pose (the wrench is the hand and
    peg's weight) and pushing the peg into the board's top (the board is scene geometry rebuilt
    from the MJCF, so this also checks that it collides)."""
    robot = get_robot("peg_arm")
    above = np.array([0.047, 0.87, 0.052, -1.428, 0.025, 1.52, 0.785])  # peg tip 2 cm above the board's top
    press = np.array([0.046, 0.922, 0.052, -1.418, 0.025, 1.567, 0.785])  # 1 cm below it (found by IK)
    states = {}
    for name in ("mujoco", "pybullet"):
        s = make_sim(name, robot, SimConfig(n_envs=2, decimation=10))
        s.reset(np.array([1]), InitState(above[None], np.zeros((1, 7))))
        targets = np.stack([robot.default_pose, press])
        for _ in range(50):
            s.step(targets)
        states[name] = s.state()
    mj, pb = states["mujoco"], states["pybullet"]
    np.testing.assert_allclose(pb.ee_pos, mj.ee_pos, atol=0.01)
    assert pb.ee_pos[1, 2] > 0  # held up by the board
    np.testing.assert_allclose(pb.ee_quat, mj.ee_quat, atol=0.02)
    np.testing.assert_allclose(pb.wrench[0], mj.wrench[0], atol=0.3)  # ≈ -8.3 N along the flange z
    force_error = np.linalg.norm(pb.wrench[1, :3] - mj.wrench[1, :3])
    assert np.linalg.norm(mj.wrench[1, :3]) > 50 and force_error < 0.15 * np.linalg.norm(mj.wrench[1, :3])


@needs_pybullet
def test_non_finite_commands_reset_the_env_and_are_counted():
    s = sim(n=3)
    s.reset(np.arange(3), InitState(np.tile([0.0, np.pi], (3, 1)), np.zeros((3, 2))))
    s.step(np.array([[1.0], [np.nan], [np.inf]]))
    assert s.diverged.tolist() == [False, True, True] and s.divergence_count == 2
    st = s.state()
    assert np.isfinite(st.joint_pos).all() and (st.time[1:] == 0).all()
    s.step(np.zeros((3, 1)))
    assert not s.diverged.any()


@needs_pybullet
def test_snapshot_tokens_are_the_simulators_own():
    """A row of another simulator (a recorded dataset) never names one of this one's snapshots."""
    a, b = sim(n=1), sim(n=1)
    assert a.get_state()[0, -1] != b.get_state()[0, -1]
    assert "exact_state" not in a.capabilities  # older rows and rows set into another env drift in contact


@needs_pybullet
def test_a_world_that_went_non_finite_is_rebuilt():
    s = sim("h1_2", n=2)
    bad = s.get_state()
    bad[0, -5] = np.nan  # a joint velocity (before the snapshot token)
    s.set_state(bad[:, :-1])
    s.step(np.tile(s.robot.default_pose, (2, 1)))
    assert s.diverged.tolist() == [True, False] and s.divergence_count == 1
    for _ in range(3):
        s.step(np.tile(s.robot.default_pose, (2, 1)))
    st = s.state()
    assert not s.diverged.any() and np.isfinite(st.joint_pos).all() and np.isfinite(st.imu_accel).all()
    np.testing.assert_allclose(st.privileged.base_pos[0], s.robot.default_base_pos, atol=0.02)


@needs_pybullet
def test_command_shape_is_checked():
    with pytest.raises(ValueError, match="n_actions"):
        sim(n=2).step(np.zeros((2, 2)))


@needs_pybullet
def test_render_named_and_tracking_cameras():
    s = sim(n=2, render_width=64, render_height=48)
    s.reset(np.arange(2), InitState(np.array([[0.0, 0.0], [1.5, np.pi]]), np.zeros((2, 2))))
    a, b = s.render(camera="fixed"), s.render(camera="fixed")
    assert a.shape == (2, 48, 64, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, b)
    assert np.abs(a[0].astype(int) - a[1]).sum() > 0
    assert s.render(np.array([1])).shape == (1, 48, 64, 3)
    with pytest.raises(ValueError, match="fixed"):
        s.render(camera="nope")


@needs_pybullet
def test_a_long_physics_step_is_solved_in_2_ms_substeps_with_the_torque_held(monkeypatch):
    from embody.sims.pybullet import client

    assert [client.solver_substeps(dt) for dt in (0.001, 0.002, 0.0021, 0.005, 0.006)] == [1, 1, 2, 3, 3]
    assert client.solver_substeps(0.006, floating_base=False) == 1
    substeps = client.solver_substeps
    monkeypatch.setattr(client, "solver_substeps", lambda dt, floating_base: substeps(dt))
    torque = np.array([[2.0], [-1.0]])  # the cart-pole's base is fixed: substepped here by the patch
    one, three = sim(physics_dt=0.006), sim(physics_dt=0.002, decimation=3)
    one.step(torque), three.step(torque)
    a, b = one.state(), three.state()
    assert abs(a.joint_vel).max() > 1e-3  # it moved
    np.testing.assert_allclose(a.joint_vel, b.joint_vel, rtol=1e-5)
    np.testing.assert_allclose(a.joint_pos, b.joint_pos, rtol=1e-5)
