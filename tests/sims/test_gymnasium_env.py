"""Any Gymnasium id through the policy layer (sims/gymnasium_env.py): flat and goal-dict observations, actions mapped
from [-1, 1] to the space's bounds, same-step autoreset with final observations and success, `embody train gym:ID`
with PPO and SAC, and one clear error for an unknown id, an unusable space and a missing dependency."""

import json

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from embody.sims.gymnasium_env import GymnasiumEnv, GymnasiumError, UnsupportedSpace, obs_layout  # noqa: E402


def test_pendulum_batches_maps_actions_and_truncates_with_final_observations():
    env = GymnasiumEnv("Pendulum-v1", n_envs=3, seed=0)
    assert (env.observation_size, env.action_size, env.task.name) == (3, 1, "gym:Pendulum-v1")
    obs, priv = env.reset()
    assert obs.shape == (3, 3) and obs.dtype == np.float32 and priv.shape == (3, 0)
    np.testing.assert_allclose(env.low + (np.ones(1) + 1) / 2 * (env.high - env.low), [2.0])  # a = 1 → torque 2
    for _ in range(200):
        obs, reward, terminated, truncated, info = env.step(np.ones((3, 1)))
    assert truncated.all() and not terminated.any() and len(info.episode_return) == 3
    assert (info.episode_length == 200).all() and not np.array_equal(info.final_obs, obs)  # reset already
    assert env.render(np.array([0])).shape[-1] == 3
    env.close()


def test_goal_dicts_lay_out_observation_then_goals_and_report_success():
    pytest.importorskip("gymnasium_robotics")
    env = GymnasiumEnv("FetchReach-v4", n_envs=2, seed=1)
    assert env.layout == {"observation": (0, 10), "achieved_goal": (10, 13), "desired_goal": (13, 16)}
    assert env.task.obs_parts is env.layout and env.observation_size == 16
    env.reset()
    for _ in range(50):
        obs, _, _, truncated, info = env.step(np.zeros((2, 4)))
    assert truncated.all() and info.episode_success.dtype == bool and info.episode_success.shape == (2,)
    env.close()


@pytest.mark.parametrize(
    "env_id, layout, actions",
    [
        ("dm_control/hopper-stand-v0", {"position": (0, 6), "touch": (6, 8), "velocity": (8, 15)}, 4),
        ("dm_control/walker-walk-v0", {"height": (0, 1), "orientations": (1, 15), "velocity": (15, 24)}, 6),
    ],
)
def test_the_deepmind_control_suite_runs_through_shimmy_on_our_mujoco(env_id, layout, actions):
    """PRIMT's two locomotion tasks (dm-control ≤ 1.0.50 failed on MuJoCo 4: its schema listed removed flex fields)."""
    pytest.importorskip("shimmy", reason="needs the dmc extra")
    env = GymnasiumEnv(env_id, n_envs=2, seed=0)
    assert env.layout == layout and env.action_size == actions
    obs, _ = env.reset()
    total, rng = np.zeros(2), np.random.default_rng(0)
    for _ in range(1000):  # one whole episode: the suite truncates at 1,000 steps
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, (2, actions)))
        total += reward
    assert truncated.all() and not terminated.any() and np.isfinite(obs).all()
    np.testing.assert_allclose(info.episode_return, total, rtol=1e-5)
    assert 0 <= total.min() and total.max() < 1000  # rewards in [0, 1] per step
    env.close()


def test_unusable_ids_and_spaces_are_one_clear_error():
    with pytest.raises(GymnasiumError, match="unknown Gymnasium id 'Pendulm-v1'; close matches: Pendulum-v1"):
        GymnasiumEnv("Pendulm-v1")
    with pytest.raises(GymnasiumError, match="no_such_package:Env-v0: cannot import 'no_such_package'"):
        GymnasiumEnv("no_such_package:Env-v0")  # Gymnasium's module:ID, for a user's own environments
    with pytest.raises(UnsupportedSpace, match="CartPole-v1: action space Discrete"):
        GymnasiumEnv("CartPole-v1")
    with pytest.raises(UnsupportedSpace, match="images and discrete observations"):
        obs_layout(gym.spaces.Box(0, 255, (64, 64, 3), np.uint8), "Pixels-v0")
    with pytest.raises(GymnasiumError, match="Pendulum-v1: "):
        GymnasiumEnv("Pendulum-v1", kwargs={"no_such_argument": 1})


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_train_and_eval_a_gymnasium_id(algo, tmp_path, capsys):
    from embody.cli import main

    out = tmp_path / algo
    sets = ["sac.learning_starts=100", "sac.log_every=200", "sac.hidden=[16,16]", "eval_episodes=2", "video=false"]
    argv = ["train", "gym:Pendulum-v1", "--algo", algo, "--envs", "2", "--steps", "400", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    summary = json.loads((out / "eval.json").read_text())
    assert summary["task"] == "gym:Pendulum-v1" and summary["episodes"] == 2 and summary["length_mean"] == 200
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    assert main(["train", "gym:Pendulm-v1", "--out", str(tmp_path / "bad")]) == 2
    assert "close matches: Pendulum-v1" in capsys.readouterr().err and not (tmp_path / "bad").exists()
