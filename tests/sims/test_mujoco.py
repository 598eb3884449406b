"""The MuJoCo adapter: batching, PD, bad model files, names. What every adapter must do is in
test_conformance.py (resets, state restore, divergence, frames, rendering)."""

import numpy as np
import pytest

from embody.robots import get_robot
from embody.sims import InitState, SimConfig, make_sim
from embody.sims.base import ModelError


def cartpole(n=4, **kw):
    return make_sim("mujoco", get_robot("cartpole"), SimConfig(n_envs=n, decimation=2, control="torque", **kw))


def test_batched_step_matches_single_env_mj_step():
    import mujoco

    sim = cartpole(n=3)
    sim.reset(np.arange(3), InitState(np.array([[0, 0.1], [0.2, 1.0], [-0.3, 2.0]]), np.zeros((3, 2))))
    forces = np.array([[1.0], [-2.0], [5.0]])
    for _ in range(5):
        sim.step(forces)
    # the same physics one env at a time through plain mj_step
    m, d = sim.model, mujoco.MjData(sim.model)
    d.qpos[:] = [0.2, 1.0]
    for _ in range(10):
        d.ctrl[:] = -2.0
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(sim.state().joint_pos[1], d.qpos, atol=1e-9)


def test_command_shape_is_checked():
    with pytest.raises(ValueError, match="n_actions"):
        cartpole(n=2).step(np.zeros((2, 2)))


def test_pd_mode_tracks_targets():
    robot = get_robot("cartpole").replace()
    from embody.robots import Joint

    j = robot.joints
    robot = robot.replace(joints=(Joint("slider", -3.8, 3.8, 20, 100, kp=200.0, kd=20.0), j[1]))
    sim = make_sim("mujoco", robot, SimConfig(n_envs=2, decimation=5, control="pd"))
    sim.reset(np.arange(2), InitState(np.zeros((2, 2)), np.zeros((2, 2))))
    for _ in range(100):
        sim.step(np.array([[0.5], [-0.5]]))
    np.testing.assert_allclose(sim.state().joint_pos[:, 0], [0.5, -0.5], atol=0.02)


def test_missing_model_file_names_the_file(tmp_path):
    robot = get_robot("cartpole").replace(mjcf=tmp_path / "nope.xml")
    with pytest.raises(ModelError, match="nope.xml"):
        make_sim("mujoco", robot, SimConfig())


def test_malformed_model_file_names_the_file_and_mujoco_message(tmp_path):
    bad = tmp_path / "broken.xml"
    bad.write_text("<mujoco><worldbody><body><geom type='box' size='1'/></body></worldbdy></mujoco>")
    robot = get_robot("cartpole").replace(mjcf=bad)
    with pytest.raises(ModelError, match=r"broken\.xml.*(XML|Error|error)"):
        make_sim("mujoco", robot, SimConfig())


def test_model_without_spec_joints_is_refused(tmp_path):
    f = tmp_path / "other.xml"
    f.write_text("<mujoco><worldbody><body><joint name='x'/><geom size='.1'/></body></worldbody></mujoco>")
    with pytest.raises(ModelError, match="slider"):
        make_sim("mujoco", get_robot("cartpole").replace(mjcf=f), SimConfig())


def test_motor_armature_replaces_the_model_files_and_needs_a_table():
    from embody.config import ConfigError
    from embody.sims.mujoco.model import joint_addresses

    sim = make_sim("mujoco", get_robot("h1_2"), SimConfig(armature="motors"))
    spec = sim.robot
    dofs = joint_addresses(sim.model, spec)[1]
    np.testing.assert_array_equal(sim.model.dof_armature[dofs], spec.motor_armature())
    knee, ankle = spec.joint_names.index("left_knee_joint"), spec.joint_names.index("left_ankle_pitch_joint")
    assert spec.motor_armature()[knee] > 10 * spec.motor_armature()[ankle]  # M107-24 against N7520-14.3
    with pytest.raises(ConfigError, match="'cartpole' has no motor armature"):
        make_sim("mujoco", get_robot("cartpole"), SimConfig(armature="motors"))


def test_unknown_names_list_the_valid_ones():
    from embody.registry import UnknownName
    from embody.sims.vec_env import make_env

    with pytest.raises(UnknownName, match="valid: .*mujoco"):
        make_sim("bullet3000", get_robot("cartpole"), SimConfig())
    with pytest.raises(UnknownName, match="valid: .*h1_2"):
        get_robot("h2")
    with pytest.raises(UnknownName, match="valid: .*cartpole-swingup"):
        make_env("cartpole-swingdown")


def test_render_is_deterministic_and_per_env():
    sim = cartpole(n=2, render_width=64, render_height=48)
    sim.reset(np.arange(2), InitState(np.array([[0.0, 0.0], [1.5, np.pi]]), np.zeros((2, 2))))
    a, b = sim.render(camera="fixed"), sim.render(camera="fixed")
    assert a.shape == (2, 48, 64, 3)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a[0].astype(int) - a[1]).sum() > 0


def test_a_task_the_simulator_cannot_serve_names_the_capability(monkeypatch):
    from embody.sims.base import UnsupportedTask
    from embody.sims.mujoco import MujocoSimulator
    from embody.sims.vec_env import make_env

    monkeypatch.setattr(MujocoSimulator, "capabilities", frozenset({"pd"}))
    with pytest.raises(UnsupportedTask, match="cannot serve task 'cartpole-swingup': it lacks torque"):
        make_env("cartpole-swingup")


def test_applied_wrench_matches_mj_step_with_xfrc_applied():
    import mujoco

    robot = get_robot("h1_2")
    sim = make_sim("mujoco", robot, SimConfig(n_envs=2, decimation=4, control="torque"))
    init = InitState(np.tile(robot.default_pose, (2, 1)), np.zeros((2, robot.n_joints)))
    sim.reset(np.arange(2), init)
    force, torque = np.array([[30.0, -20.0, 400.0]]), np.array([[1.0, 5.0, -3.0]])
    sim.apply_wrench(np.array([1]), "torso_link", force, torque)
    tau = np.zeros((2, len(robot.actuated)))
    tau[:, 3] = 10.0
    for _ in range(3):
        sim.step(tau)
    m, d = sim.model, mujoco.MjData(sim.model)
    runs = {}
    for env, wrench in ((0, np.zeros(6)), (1, np.concatenate([force[0], torque[0]]))):
        mujoco.mj_setState(m, d, np.tile(sim._default_row, 1), sim._spec)  # the reset state
        d.time = 0.0
        d.xfrc_applied[:] = 0.0
        d.xfrc_applied[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")] = wrench
        for _ in range(12):
            d.ctrl[:] = tau[env]
            mujoco.mj_step(m, d)
        runs[env] = d.qpos.copy()
    s = sim.get_state()
    qpos = s[:, sim._off["qpos"] : sim._off["qpos"] + m.nq]
    np.testing.assert_allclose(qpos[0], runs[0], atol=1e-9)
    np.testing.assert_allclose(qpos[1], runs[1], atol=1e-9)
    assert np.abs(runs[1] - runs[0]).max() > 1e-4  # the wrench moved env 1
    sim.apply_wrench(np.array([1]), "torso_link", np.zeros((1, 3)), np.zeros((1, 3)))  # zeros remove it
    sim.set_state(s[[0, 0]])
    sim.step(tau)
    np.testing.assert_array_equal(sim.get_state()[0], sim.get_state()[1])
    with pytest.raises(ValueError, match="no body 'nope'"):
        sim.apply_wrench(np.array([0]), "nope", np.zeros((1, 3)), np.zeros((1, 3)))
    sim.close()


def test_tiled_frames_are_mujoco_renderers_frames_over_several_passes():
    """70 envs (two passes of the 64-tile buffer) against mujoco.Renderer one frame at a time: the same pixels up to
    rasterization at a tile's offset (≤ 1 level on ≤ 0.1 % of the values)."""
    import mujoco

    from embody.sims.mujoco.render import MAX_TILES

    n = MAX_TILES + 6
    sim = cartpole(n=n, render_width=24, render_height=16)
    rng = np.random.default_rng(0)
    sim.reset(np.arange(n), InitState(rng.normal(size=(n, 2)), np.zeros((n, 2))))
    tiled = sim.render(camera="fixed")
    reference = mujoco.Renderer(sim.model, 16, 24)
    data = mujoco.MjData(sim.model)
    for i in (0, 9, MAX_TILES - 1, MAX_TILES, n - 1):
        mujoco.mj_setState(sim.model, data, sim.get_state()[i], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mujoco.mj_forward(sim.model, data)
        reference.update_scene(data, camera="fixed")
        diff = np.abs(tiled[i].astype(int) - reference.render())
        assert diff.max() <= 1 and (diff > 0).mean() <= 1e-3, i
    assert not np.array_equal(tiled[0], tiled[1])  # each env its own state
    with pytest.raises(ValueError, match="no camera 'nope'; cameras: \\['fixed'"):
        sim.render(camera="nope")


def test_large_frames_take_fewer_tiles_per_pass():
    import mujoco

    sim = cartpole(n=3, render_width=2100, render_height=1400)
    sim.reset(np.arange(3), InitState(np.array([[0.0, 0.1], [0.5, 1.0], [-0.5, 2.0]]), np.zeros((3, 2))))
    frames = sim.render(camera="fixed")
    assert frames.shape == (3, 1400, 2100, 3) and sim._renderer.tiles == 2  # 1 × 2 tiles within 4096 px
    reference = mujoco.Renderer(sim.model, 1400, 2100)
    data = mujoco.MjData(sim.model)
    mujoco.mj_setState(sim.model, data, sim.get_state()[2], mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_forward(sim.model, data)
    reference.update_scene(data, camera="fixed")
    diff = np.abs(frames[2].astype(int) - reference.render())
    assert diff.max() <= 1 and (diff > 0).mean() <= 1e-3  # the second pass's first tile


def test_reflections_are_off_unless_asked_for():
    from embody.sims.vec_env import make_env

    frames = []
    for reflections in (False, True):
        env = make_env("hopper", n_envs=1, seed=0)
        env.sim.config.render_width = env.sim.config.render_height = 32
        env.sim.config.reflections = reflections
        env.reset()
        frames.append(env.render().astype(int))
        env.close()
    assert np.abs(frames[0] - frames[1]).max() > 10  # the hopper's floor reflects it only when asked
