"""Hindsight experience replay (policies/her.py): whole episodes stored as they happened plus relabelled copies
whose goals the episode achieved (later steps for "future", the last for "final"), rewards recomputed by the
environment's function; SAC+HER learns FetchReach where the sparse reward alone gives it little to go on."""

import json

import numpy as np
import pytest

from embody.policies.her import HERBuffer

LAYOUT = {"observation": (0, 1), "achieved_goal": (1, 2), "desired_goal": (2, 3)}


def reached(achieved, desired):
    return -(np.abs(achieved - desired)[:, 0] > 0.05).astype(np.float64)


def episode_rows(env: int, T: int):
    """Per step t of env ``env``: observation t, achieved goal 10·env + t (next: + 1), desired goal 99."""
    for t in range(T):
        yield {
            "obs": np.array([[t, 10 * env + t, 99.0]], np.float32),
            "actions": np.zeros((1, 2), np.float32),
            "rewards": np.array([-1.0], np.float32),
            "next_obs": np.array([[t + 1, 10 * env + t + 1, 99.0]], np.float32),
            "terminal": np.zeros(1, np.float32),
        }


@pytest.mark.parametrize("strategy", ["future", "final"])
def test_episodes_enter_whole_with_goals_they_achieved(strategy):
    buf = HERBuffer(1000, 3, 2, n_envs=1, layout=LAYOUT, compute_reward=reached, strategy=strategy, k=3)
    rows = list(episode_rows(0, 5))
    for i, r in enumerate(rows):
        buf.add_step(np.array([i == 4]), **r)
    assert buf.size == 5 + 15 and buf.lengths[0] == 0  # the episode, then 3 relabelled copies of each step
    real, relabelled = {k: v[:5] for k, v in buf.data.items()}, {k: v[5:20] for k, v in buf.data.items()}
    assert (real["obs"][:, 2] == 99).all() and (real["rewards"] == -1).all()
    t = relabelled["obs"][:, 0].astype(int)  # the step each copy is of
    goal = relabelled["obs"][:, 2]
    np.testing.assert_array_equal(relabelled["next_obs"][:, 2], goal)  # the same goal in obs and next_obs
    if strategy == "final":
        assert (goal == 5).all()  # the last next-achieved goal
    else:
        assert ((goal >= t + 1) & (goal <= 5)).all()  # a later achieved goal of the same episode
    np.testing.assert_array_equal(relabelled["rewards"], reached(relabelled["next_obs"][:, 1:2], goal[:, None]))
    assert (relabelled["rewards"][goal == t + 1] == 0).all()  # the goal it reached at once: success


def test_envs_keep_their_own_episodes_and_bad_layouts_are_refused():
    buf = HERBuffer(1000, 3, 2, n_envs=2, layout=LAYOUT, compute_reward=reached, k=0)
    a, b = list(episode_rows(0, 3)), list(episode_rows(1, 2))
    for i in range(3):
        rows = {k: np.concatenate([a[i][k], b[min(i, 1)][k]]) for k in a[i]}
        buf.add_step(np.array([i == 2, i == 1]), **rows)
    assert buf.size == 5 and sorted(buf.data["obs"][:5, 1].tolist()) == [0, 1, 2, 10, 11]
    assert buf.lengths[1] == 1  # env 1's next episode has begun
    with pytest.raises(ValueError, match="no achieved_goal, desired_goal"):
        HERBuffer(10, 3, 2, 1, {"obs": (0, 3)}, reached)
    with pytest.raises(ValueError, match="unknown HER strategy 'past'"):
        HERBuffer(10, 3, 2, 1, LAYOUT, reached, strategy="past")


@pytest.mark.slow
def test_sac_with_her_learns_fetch_reach(tmp_path):
    pytest.importorskip("gymnasium_robotics")
    from embody.cli import main

    out = tmp_path / "reach"
    sets = [
        "sac.learning_starts=400",
        "sac.log_every=1000",
        "sac.her=future",
        "sac.utd=1.0",
        "sac.hidden=[128,128]",
        "sac.gamma=0.95",
        "eval_episodes=20",
        "video=false",
    ]
    argv = ["train", "gym:FetchReach-v4", "--algo", "sac", "--envs", "4", "--steps", "6000", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    assert json.loads((out / "eval.json").read_text())["success_rate"] >= 0.8
