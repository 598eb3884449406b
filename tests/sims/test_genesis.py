"""The Genesis adapter: batching, selective resets, divergence, rendering, and agreement with
MuJoCo where the physics is the same (same MJCF, armature, solref, integrator).

Tolerances (the sensor conventions behind them are in sims/genesis/simulator.py):
* cart-pole under torque control (no contacts): machine precision, the two engines run the same
  equations with the same integrator.
* H1-2 with its base welded, PD-holding the default pose for 1 s: joint angles within 1e-6 rad
  (measured 4e-8). Sensors within 0.5 N·m (measured 0.11) and 1e-3 (IMU): MuJoCo's sensors read
  the state of the last physics step's start (2 ms back), Genesis' adapter the current state.

The first test to build a scene compiles Genesis' kernels (1-2 min on a CPU, cached afterwards
under $XDG_CACHE_HOME/quadrants).
"""

import importlib
import re
import sys

import numpy as np
import pytest

from embody.robots import get_robot
from embody.sims import InitState, SimConfig, make_sim

SKIP_REASON = "the genesis extra is not installed (pip install 'embody[genesis]')"


@pytest.fixture(scope="module")
def genesis():
    return pytest.importorskip("genesis", reason=SKIP_REASON)


def cartpole(sim="genesis", n=4):
    return make_sim(sim, get_robot("cartpole"), SimConfig(n_envs=n, physics_dt=0.01, decimation=2, control="torque"))


def hanging(k):
    return InitState(np.tile([0.0, np.pi], (k, 1)), np.zeros((k, 2)))


def test_module_imports_without_genesis_and_names_the_extra(monkeypatch):
    from embody.extras import MissingExtra

    monkeypatch.setitem(sys.modules, "genesis", None)  # as if not installed: `import genesis` raises
    for mod in [m for m in sys.modules if m.startswith("embody.sims.genesis")]:
        monkeypatch.delitem(sys.modules, mod)
    module = importlib.import_module("embody.sims.genesis")
    assert module.GenesisSimulator.name == "genesis"
    assert module.GenesisSimulator.capabilities <= {
        "pd",
        "torque",
        "imu",
        "contact",
        "ee_pose",
        "wrench",
        "render",
        "state",
        "physics_params",
        "push",
    }
    with pytest.raises(MissingExtra, match=r"embody\[genesis\]"):
        module.GenesisSimulator(get_robot("cartpole"), SimConfig())


@pytest.mark.genesis
def test_cartpole_swingup_resets_steps_and_renders(genesis):
    from embody.sims.vec_env import make_env

    env = make_env("cartpole-swingup", sim="genesis", n_envs=4)
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, (4, 1)))
        assert np.isfinite(obs).all() and np.isfinite(reward).all()
    assert not info.diverged.any()
    frames = env.render(np.array([0, 2]))
    assert frames.shape == (2, 240, 320, 3) and frames.dtype == np.uint8
    assert frames.std() > 5, "blank frames"
    assert np.abs(frames[0].astype(int) - frames[1]).mean() > 0.1, "both envs rendered the same"
    env.close()


@pytest.mark.genesis
def test_cartpole_matches_mujoco_to_machine_precision(genesis):
    sims = [cartpole("genesis", n=3), cartpole("mujoco", n=3)]
    init = InitState(np.array([[0.0, 0.1], [0.2, 1.0], [-0.3, 3.0]]), np.zeros((3, 2)))
    rng = np.random.default_rng(0)
    for s in sims:
        s.reset(np.arange(3), init)
    for _ in range(50):  # 1 s of random pushes, beyond the ±10 N limit too
        force = rng.uniform(-15, 15, (3, 1))
        for s in sims:
            s.step(force)
    ours, ref = (s.state() for s in sims)
    np.testing.assert_allclose(ours.joint_pos, ref.joint_pos, atol=1e-9)
    np.testing.assert_allclose(ours.joint_vel, ref.joint_vel, atol=1e-8)
    np.testing.assert_allclose(ours.time, ref.time, atol=1e-12)
    for s in sims:
        s.close()


@pytest.mark.genesis
def test_reset_of_selected_envs_leaves_the_others_untouched(genesis):
    sim = cartpole()
    sim.reset(np.arange(4), hanging(4))
    for _ in range(3):
        sim.step(np.array([[3.0], [-3.0], [1.0], [5.0]]))
    before = sim.state()
    sim.reset(np.array([1, 3]), InitState(np.zeros((2, 2)), np.zeros((2, 2))))
    after = sim.state()
    for field in ("joint_pos", "joint_vel", "time"):
        np.testing.assert_array_equal(getattr(after, field)[[0, 2]], getattr(before, field)[[0, 2]])
    np.testing.assert_array_equal(after.joint_pos[[1, 3]], 0.0)
    np.testing.assert_array_equal(after.time[[1, 3]], 0.0)
    sim.step(np.zeros((4, 1)))  # and the others step on from where they were
    assert (sim.state().time[[0, 2]] > before.time[[0, 2]]).all()
    sim.close()


@pytest.mark.genesis
def test_non_finite_commands_reset_to_the_default_and_are_counted(genesis):
    sim = cartpole(n=3)
    sim.reset(np.arange(3), hanging(3))
    sim.step(np.array([[1.0], [np.nan], [np.inf]]))
    assert sim.diverged.tolist() == [False, True, True]
    assert sim.divergence_count == 2
    s = sim.state()
    np.testing.assert_array_equal(s.joint_pos[1:], 0.0)  # the cart-pole's default pose
    np.testing.assert_array_equal(s.time[1:], 0.0)
    sim.step(np.zeros((3, 1)))
    assert not sim.diverged.any() and np.isfinite(sim.state().joint_pos).all()
    sim.close()


@pytest.mark.genesis
def test_a_divergence_the_engine_detects_resets_that_env_only(genesis):
    sims = [cartpole(n=2), cartpole(n=2)]  # the second one is the undisturbed reference
    for s in sims:
        s.reset(np.arange(2), hanging(2))
    state = sims[0].get_state()
    state[0, -1] = 1e200  # a wild pole speed in env 0: Genesis raises on the NaN that follows
    sims[0].set_state(state[:1], np.array([0]))
    flagged = []
    for _ in range(8):  # Genesis looks for NaN every 10 physics steps
        for s in sims:
            s.step(np.ones((2, 1)))
        flagged.append(sims[0].diverged.copy())
    assert np.any(flagged, axis=0).tolist() == [True, False] and sims[0].divergence_count == 1
    np.testing.assert_array_equal(sims[0].state().joint_pos[1], sims[1].state().joint_pos[1])
    for s in sims:
        s.close()


@pytest.mark.genesis
def test_missing_model_file_names_the_file(genesis, tmp_path):
    from embody.sims.base import ModelError

    with pytest.raises(ModelError, match="nope.xml"):
        make_sim("genesis", get_robot("cartpole").replace(mjcf=tmp_path / "nope.xml"), SimConfig())


def welded_h1_2(tmp_path):
    """The H1-2 with its pelvis welded where it stands (its free joint removed)."""
    spec = get_robot("h1_2")
    xml = spec.mjcf.read_text().replace('<freejoint name="floating_base_joint"/>', "")
    xml = re.sub(r"<keyframe>.*</keyframe>", "", xml, flags=re.DOTALL)  # its qpos has the free joint's 7
    path = tmp_path / "h1_2_welded.xml"
    path.write_text(xml)
    return spec.replace(mjcf=path, floating_base=False)


@pytest.mark.genesis
def test_h1_2_pd_hold_with_welded_base_matches_mujoco(genesis, tmp_path):
    spec = welded_h1_2(tmp_path)
    cfg = dict(n_envs=2, decimation=10, control="pd")
    sims = [make_sim(name, spec, SimConfig(**cfg)) for name in ("genesis", "mujoco")]
    start = InitState(np.tile(spec.default_pose, (2, 1)), np.zeros((2, spec.n_joints)))
    start.joint_pos[1] += 0.05  # env 1 starts off the targets and swings to them
    for s in sims:
        s.reset(np.arange(2), start)
    for _ in range(50):  # 1 s
        for s in sims:
            s.step(np.tile(spec.default_pose, (2, 1)))
    ours, ref = (s.state() for s in sims)
    np.testing.assert_allclose(ours.joint_pos, ref.joint_pos, atol=1e-6)
    np.testing.assert_allclose(ours.joint_torque, ref.joint_torque, atol=0.5)
    assert np.abs(ref.joint_torque).max() > 1  # gravity loads the joints: the comparison is not vacuous
    # MuJoCo's sensors read the state one physics step back; the torso still turns slowly in env 1
    np.testing.assert_allclose(ours.imu_quat, ref.imu_quat, atol=1e-3)
    np.testing.assert_allclose(ours.imu_accel, ref.imu_accel, atol=1e-3)  # welded: +g in the IMU frame
    for s in sims:
        s.close()
