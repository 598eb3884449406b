"""Hindsight experience replay (policies/her.py): whole episodes stored as they happened; batches drawn with a
share k / (k + 1) relabelled, each time afresh, by goals the episode achieved (later steps for "future", the last
for "final"), rewards recomputed by the environment's function, also across the ring's wrap; SAC+HER learns
FetchReach where the sparse reward alone gives it little to go on."""

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


def fill(buf: HERBuffer, T: int, episodes: int) -> None:
    """``episodes`` episodes of one env, episode e's achieved goals 10·e + t (``episode_rows``' env label)."""
    for e in range(episodes):
        for i, r in enumerate(episode_rows(e, T)):
            buf.add_step(np.array([i == T - 1]), **r)


@pytest.mark.parametrize("strategy", ["future", "final"])
def test_batches_are_relabelled_afresh_with_goals_the_episode_achieved(strategy):
    buf = HERBuffer(1000, 3, 2, n_envs=1, layout=LAYOUT, compute_reward=reached, strategy=strategy, k=3)
    fill(buf, 5, 1)
    assert buf.size == 5 and buf.lengths[0] == 0  # the episode as it happened, nothing added
    np.testing.assert_array_equal(buf.data["to_end"][:5], [4, 3, 2, 1, 0])
    assert (buf.data["obs"][:5, 2] == 99).all()
    b = {k: v.numpy() for k, v in buf.sample(4000, np.random.default_rng(0), "cpu").items()}
    assert (buf.data["obs"][:5, 2] == 99).all()  # the ring is not touched
    t, goal = b["obs"][:, 0].astype(int), b["obs"][:, 2]
    relabelled = goal != 99
    assert abs(relabelled.mean() - 0.75) < 0.03  # k / (k + 1)
    np.testing.assert_array_equal(b["next_obs"][:, 2], goal)  # the same goal in obs and next_obs
    if strategy == "final":
        assert (goal[relabelled] == 5).all()  # the last next-achieved goal
    else:
        g, s = goal[relabelled], t[relabelled]
        assert ((g >= s + 1) & (g <= 5)).all()  # a later achieved goal of the same episode
        assert len({(a, b) for a, b in zip(s, g)}) == 15  # every (step, future) pair drawn: fresh goals each time
    np.testing.assert_array_equal(b["rewards"], reached(b["next_obs"][:, 1:2], goal[:, None]))
    assert (b["rewards"][relabelled & (goal == t + 1)] == 0).all()  # the goal it reached at once: success
    assert (b["rewards"][~relabelled] == -1).all()


def test_futures_stay_in_their_episode_across_the_ring_wrap_and_a_saved_buffer(tmp_path):
    buf = HERBuffer(12, 3, 2, n_envs=1, layout=LAYOUT, compute_reward=reached, k=4)
    fill(buf, 5, 3)  # 15 rows into 12: the third episode wraps, the first lost its head
    assert buf.size == 12 and buf.ptr == 3
    for b in (buf, HERBuffer(12, 3, 2, 1, LAYOUT, reached, k=4)):
        if b is not buf:
            buf.save(tmp_path / "replay.safetensors")
            b.restore(tmp_path / "replay.safetensors")
        s = {k: v.numpy() for k, v in b.sample(3000, np.random.default_rng(1), "cpu").items()}
        achieved, goal = s["obs"][:, 1], s["obs"][:, 2]  # achieved 10·e + t
        r = goal != 99
        assert ((goal[r] >= achieved[r] + 1) & (goal[r] <= achieved[r] // 10 * 10 + 5)).all()  # its own episode
        wrapped = (
            r & (achieved >= 20) & (achieved <= 21)
        )  # episode 2's first rows, at the ring's end: their futures at its start
        assert set(goal[wrapped].astype(int)) == {21, 22, 23, 24, 25}


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
