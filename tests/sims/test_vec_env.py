"""Same-step autoreset, final observations, staggered resets, and the gymnasium facade."""

import gymnasium as gym
import numpy as np
import pytest

from embody.sims.tasks import TASKS
from embody.sims.vec_env import make_env


def short_cartpole(n=3, steps=5, **kw):
    cfg = TASKS.get("cartpole-swingup").config_class()
    cfg.max_episode_steps = steps
    return make_env("cartpole-swingup", n_envs=n, config=cfg, **kw)


def test_truncation_resets_in_the_same_step_and_returns_final_obs():
    env = short_cartpole()
    obs, _ = env.reset()
    for _ in range(5):
        prev = obs
        obs, reward, terminated, truncated, info = env.step(np.ones((3, 1)))
    assert truncated.all() and not terminated.any()
    assert len(info.episode_return) == 3 and (info.episode_length == 5).all()
    # the returned obs is a fresh reset (pole hanging), the final obs is where the episode ended
    np.testing.assert_allclose(obs[:, 1], -1.0, atol=1e-3)  # cos(pi)
    assert not np.allclose(info.final_obs, obs)
    assert np.abs(info.final_obs[:, 0]).min() > np.abs(prev[:, 0]).min()  # the cart had moved on
    assert (env.episode_step == 0).all()


def test_staggered_resets_spread_episode_ends():
    env = short_cartpole(n=64, steps=50, staggered=True)
    env.reset()
    ends, lengths = [], []
    for t in range(50):
        *_, truncated, info = env.step(np.zeros((64, 1)))
        ends.append(int(truncated.sum()))
        lengths += [(t + 1, n) for n in info.episode_length]
    assert max(ends) < 16 and sum(ends) == 64  # synchronous resets would end all 64 at once
    assert all(n == t for t, n in lengths)  # reported lengths are steps taken, not the staggered counter


def test_non_finite_actions_terminate_and_reset_never_propagate():
    env = short_cartpole(n=2, steps=100)
    env.reset()
    obs, reward, terminated, _, info = env.step(np.array([[np.nan], [0.5]]))
    assert terminated.tolist() == [True, False] and info.diverged.tolist() == [True, False]
    assert np.isfinite(obs).all() and np.isfinite(reward).all()
    assert env.diverged_total == 1


def test_gymnasium_vector_facade_same_step():
    import embody.sims.gym  # noqa: F401  (registers embody/<task>-v0)

    env = gym.make_vec("embody/cartpole-swingup-v0", num_envs=2)
    assert env.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2, 5)
    for _ in range(250):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert truncated.all() and info["_final_obs"].all() and info["final_obs"].shape == (2, 5)
    env.close()


def _all_tasks() -> list[str]:
    from embody.sims.tasks import TASKS

    return TASKS.names()  # plugins' tasks included


@pytest.mark.parametrize("task", _all_tasks())
def test_every_registered_task_passes_the_gymnasium_env_checker(task):
    from gymnasium.utils.env_checker import check_env

    from embody.sims.gym import register_all

    register_all()
    env = gym.make(f"embody/{task}-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_reward_fn_replaces_the_task_reward():
    env = short_cartpole(n=2, steps=100)
    env.reward_fn = lambda state, action, task_reward: -(state.joint_pos[:, 0] ** 2) + 0 * task_reward
    env.reset()
    _, reward, *_ = env.step(np.ones((2, 1)))
    s = env.sim.state()
    np.testing.assert_allclose(reward, -(s.joint_pos[:, 0] ** 2), rtol=1e-6)
