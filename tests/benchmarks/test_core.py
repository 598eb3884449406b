"""``embody bench core``: the quick run writes every measurement, and the gym-humanoid task is
gymnasium's Humanoid-v5 physics. No timing is asserted (machines differ)."""

import json
import math

import mujoco
import numpy as np
import pytest

from embody.robots import get_robot
from embody.robots.gym_humanoid import gymnasium_xml
from embody.sims import InitState
from embody.sims.mujoco.model import joint_addresses
from embody.sims.vec_env import make_env


def test_gym_humanoid_spec_strips_actuators_and_keeps_gears():
    robot = get_robot("gym_humanoid")
    assert "<actuator>" not in robot.mjcf.read_text()
    m = mujoco.MjModel.from_xml_path(str(gymnasium_xml()))
    assert robot.n_actions == m.nu == 17
    assert np.allclose(robot.torque_limit, 0.4 * m.actuator_gear[:, 0])  # ctrlrange ±0.4 times gear


def test_gym_humanoid_builds_and_steps():
    env = make_env("gym-humanoid", n_envs=3, seed=0)
    obs, _ = env.reset()
    assert obs.shape == (3, env.observation_size) == (3, 45)
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(np.random.default_rng(0).uniform(-1, 1, (3, 17)))
    assert np.isfinite(obs).all() and np.isfinite(reward).all()
    assert (reward > 3).all()  # healthy (5) dominates while the humanoid is still up
    env.close()


def test_gym_humanoid_physics_matches_gymnasium_raw_stepping():
    """Same initial state and torques: our batched steps track gymnasium's mj_step on humanoid.xml."""
    env = make_env("gym-humanoid", n_envs=2, seed=0)
    robot, sim = env.task.robot, env.sim
    m = mujoco.MjModel.from_xml_path(str(gymnasium_xml()))  # with gymnasium's own motors
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    d.qpos[:] = m.qpos0 + rng.uniform(-0.01, 0.01, m.nq)
    d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
    d.qvel[:] = rng.uniform(-0.01, 0.01, m.nv)
    qadr, vadr = joint_addresses(m, robot)
    rows = lambda x: np.tile(x, (2, 1))  # noqa: E731
    sim.reset(
        np.arange(2),
        InitState(
            rows(d.qpos[qadr]),
            rows(d.qvel[vadr]),
            base_pos=rows(d.qpos[:3]),
            base_quat=rows(d.qpos[3:7]),
            base_lin_vel=rows(d.qvel[:3]),
            base_ang_vel=rows(d.qvel[3:6]),
        ),
    )
    for _ in range(40):  # 0.6 s: the humanoid falls and its feet touch the floor
        action = rng.uniform(-1, 1, (2, 17))
        d.ctrl[:] = 0.4 * action[0]  # gymnasium's ctrl, in its actuator order (= our joint order)
        mujoco.mj_step(m, d, nstep=5)
        sim.step(env.task.action_to_command(action))
    state = sim.state()
    assert np.abs(state.joint_pos[0] - d.qpos[qadr]).max() < 1e-6
    assert np.abs(state.privileged.base_pos[0] - d.qpos[:3]).max() < 1e-6
    assert np.abs(state.privileged.base_quat[0] - d.qpos[3:7]).max() < 1e-6
    assert d.ncon > 0  # the comparison went through contacts
    env.close()


@pytest.mark.slow
def test_quick_bench_writes_every_measurement(tmp_path):
    # the peers (stable-baselines3, gymnasium's MuJoCo envs with imageio) come with the dev extra
    from embody.benchmarks.core import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    names = [r["measurement"] for r in result["rows"]]
    assert any("physics gym_humanoid" in n for n in names) and any("physics h1_2" in n for n in names)
    peers = {r["peer_name"] for r in result["rows"]}
    assert {"gymnasium.make Humanoid-v5", "make_vec sync, 8 envs", "SB3 PPO (DummyVecEnv)"} <= peers
    assert len(result["rows"]) == 5
    for row in result["rows"]:
        for value in (row["ours"], row["peer"], row["ratio"]):
            assert value > 0 and math.isfinite(value), row
        assert row["status"] in {"PASS", "BELOW-TARGET", "info"}
    assert "| measurement |" in (tmp_path / "results.md").read_text()
