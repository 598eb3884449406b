"""The Gymnasium-Robotics joint-type shim (sims/robotics_shim.py): Fetch, Hand and a maze task reset and step on
this MuJoCo, whichever path ran (the patch where the probe finds the bug, the library untouched where not)."""

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")
gymnasium_robotics = pytest.importorskip("gymnasium_robotics")


@pytest.mark.parametrize(
    "env_id",
    ["FetchReach-v4", "FetchPush-v4", "FetchPickAndPlace-v4", "FetchSlide-v4", "HandReach-v3", "PointMaze_UMaze-v3"],
)
def test_robotics_tasks_reset_and_step_with_the_shim(env_id, capsys):
    import mujoco

    from embody.sims import robotics_shim

    active = robotics_shim.apply()
    with capsys.disabled():
        print(f"\n{env_id}: mujoco {mujoco.__version__}, joint-type shim {'ACTIVE' if active else 'not needed'}")
    assert active == robotics_shim.broken()
    gym.register_envs(gymnasium_robotics)
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, reward, *_ = env.step(env.action_space.sample())
    assert set(obs) >= {"observation", "achieved_goal", "desired_goal"} and np.isfinite(reward)
    env.close()


def test_the_shim_reads_the_same_joint_values_as_mujoco():
    import mujoco

    from embody.sims import robotics_shim

    xml = """<mujoco><worldbody><body><freejoint name="f"/><geom size=".1"/>
             <body pos="0 0 1"><joint name="h" type="hinge"/><joint name="b" type="ball"/><geom size=".1"/></body>
             </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:] = np.arange(m.nq) / 10
    d.qvel[:] = np.arange(m.nv) / 10
    np.testing.assert_array_equal(robotics_shim.get_joint_qpos(m, d, "f"), d.qpos[:7])
    np.testing.assert_array_equal(robotics_shim.get_joint_qpos(m, d, "h"), d.qpos[7:8])
    np.testing.assert_array_equal(robotics_shim.get_joint_qvel(m, d, "b"), d.qvel[7:10])
    robotics_shim.set_joint_qpos(m, d, "b", [1, 0, 0, 0])
    robotics_shim.set_joint_qvel(m, d, "h", 2.5)
    assert d.qpos[8:12].tolist() == [1, 0, 0, 0] and d.qvel[6] == 2.5
    with pytest.raises(ValueError, match="'nope' is not part of the model"):
        robotics_shim.get_joint_qpos(m, d, "nope")
