"""Preference reward learning (policies/preference.py): the scripted teacher's B-Pref noise models, Bradley–Terry
recovering a reward's ranking, disagreement-based selection, segments that never cross an episode end, the
relabelled replay buffer, the labelled pairs' safe file format, and ``embody train --algo sac`` on a learned reward
(resumed; a reward model of another task refused)."""

import json

import numpy as np
import pytest
import torch

from embody.policies.networks import EnsembleMLP
from embody.policies.preference import (
    PreferenceConfig,
    PreferenceDataset,
    PreferenceError,
    PreferenceLearner,
    ScriptedTeacher,
    SegmentHistory,
    spearman,
)
from embody.policies.sac import ReplayBuffer


def pairs_with_rewards(rewards: np.ndarray) -> dict[str, np.ndarray]:
    k, _, L = rewards.shape
    return {"obs": np.zeros((k, 2, L, 3), np.float32), "actions": np.zeros((k, 2, L, 1)), "rewards": rewards}


def test_the_scripted_teacher_follows_each_noise_model():
    r = np.zeros((4, 2, 4))
    r[0, 0] = 1.0  # first better
    r[1, 1] = 1.0  # second better
    r[2, :, :] = 0.5
    r[2, 1, 0] += 0.01  # nearly equal
    r[3, 0, 0], r[3, 1, 3] = 1.2, 1.0  # the first earns more, but early: a myopic teacher prefers the second
    exact = ScriptedTeacher().label(pairs_with_rewards(r))
    assert exact.tolist() == [0, 1, 1, 0]
    assert ScriptedTeacher(mistake=1.0).label(pairs_with_rewards(r)).tolist() == [1, 0, 0, 1]
    assert ScriptedTeacher(gamma=0.5).label(pairs_with_rewards(r))[3] == 1
    assert ScriptedTeacher(equal=0.05).label(pairs_with_rewards(r))[2] == 0.5
    skipped = ScriptedTeacher(skip=0.9).label(pairs_with_rewards(r))  # margin: mean |return| 1.78; skip < 1.6
    assert np.isnan(skipped).tolist() == [False, False, False, True]
    noisy = ScriptedTeacher(beta=0.25, seed=1).label(pairs_with_rewards(np.repeat(r[:1], 2000, 0)))
    assert abs(noisy.mean() - 1 / (1 + np.e)) < 0.03  # Bradley–Terry: P(second) = σ(β · (0 − 4)), β = 0.25


def linear_history(n_envs=4, steps=400, obs=3, seed=0) -> tuple[SegmentHistory, np.ndarray]:
    """A history whose env reward is w · obs, episodes ending every 50 steps."""
    rng, w = np.random.default_rng(seed), np.array([1.0, -2.0, 0.5])
    h = SegmentHistory(steps, n_envs, obs, 1)
    for t in range(steps):
        o = rng.normal(size=(n_envs, obs)).astype(np.float32)
        h.add(o, rng.uniform(-1, 1, (n_envs, 1)), o @ w, np.full(n_envs, t % 50 == 49))
    return h, w


def test_segments_never_cross_an_episode_end():
    h, _ = linear_history()
    rows, cols = h.sample(500, 20, np.random.default_rng(0))
    assert rows.shape == (500, 20) and cols.shape == (500, 1)
    assert not h.done[rows[:, :-1], cols].any()  # an episode may end on a segment's last step only
    assert (np.diff(rows, axis=1) % h.T == 1).all()  # consecutive steps of one env
    assert SegmentHistory(10, 2, 3, 1).sample(4, 20, np.random.default_rng(0)) is None  # not enough steps yet


def test_bradley_terry_learns_the_ranking_of_the_teachers_reward_choosing_by_disagreement():
    torch.manual_seed(0)
    h, _ = linear_history()
    c = PreferenceConfig(segment=10, per_session=60, candidates=5, ensemble=3, hidden=[32, 32], epochs=200)
    learner = PreferenceLearner(c, ScriptedTeacher(), 3, 1, 4, seed=0)
    candidates = h.pairs(300, 10, np.random.default_rng(1))
    spread = learner.disagreement(candidates)
    assert spread.shape == (300,) and spread.std() > 0
    learner.history = h
    for _ in range(3):
        assert learner.session()
    assert len(learner.dataset) == 180 and learner.accuracy >= 0.9
    rho = learner.metrics()["reward_spearman"]  # 256 fresh segments: learned vs true segment returns
    assert rho > 0.9, rho


def test_foresight_segments_enter_the_query_buffer_and_the_agents_experience_displaces_them():
    h, w = linear_history(n_envs=4, steps=400)
    c = PreferenceConfig(
        segment=10, per_session=20, selection="uniform", ensemble=2, hidden=[8], epochs=1, foresight_pool=30
    )
    plain, mixed = (PreferenceLearner(c, ScriptedTeacher(), 3, 1, 4, seed=0) for _ in range(2))
    plain.history = mixed.history = h
    o = np.full((10, 25, 3), 5.0, np.float32)  # far from the history's observations: recognisable
    mixed.add_foresight({"obs": o[:8], "actions": np.zeros((8, 25, 1)), "rewards": o[:8] @ w})
    assert mixed.pool["obs"].shape == (16, 10, 3) and mixed.pool["rewards"].shape == (16, 10)  # 2 per trajectory
    mixed.add_foresight({"obs": o, "actions": np.zeros((10, 25, 1)), "rewards": o @ w})
    assert len(mixed.pool["rewards"]) == 30  # the newest foresight_pool kept
    pairs = h.pairs(2000, 10, np.random.default_rng(1))
    taken = mixed.mix_foresight(pairs)
    share = 30 / (30 + 400 * 4 / 10)  # P / (P + H)
    assert abs(taken.mean() - share) < 0.03
    assert ((pairs["obs"] == 5.0).all((2, 3)) == taken).all()  # the replaced segments hold foresight's data
    np.testing.assert_allclose(pairs["rewards"][taken], 5.0 * w.sum())  # with their env rewards (scripted teacher)
    assert mixed.session() and 0 < mixed.foresight_queries <= 20 and mixed.metrics()["foresight_queries"] > 0
    plain.session()
    assert plain.foresight_queries == 0 and plain.rng.random() != mixed.rng.random()  # the pool draws its own


def test_foresight_shorter_than_a_segment_is_refused():
    learner = PreferenceLearner(PreferenceConfig(segment=10), ScriptedTeacher(), 3, 1, 4)
    with pytest.raises(ValueError, match="shorter than preference.segment=10"):
        learner.add_foresight({"obs": np.zeros((2, 5, 3)), "actions": np.zeros((2, 5, 1)), "rewards": np.zeros((2, 5))})


def test_spearman_handles_ties_and_constants():
    assert spearman(np.array([1, 2, 3.0]), np.array([10, 20, 30.0])) == pytest.approx(1.0)
    assert spearman(np.array([1, 1, 2.0]), np.array([3, 2, 1.0])) == pytest.approx(-np.sqrt(3) / 2)
    assert np.isnan(spearman(np.ones(3), np.arange(3.0)))


def test_the_ensemble_equals_its_members_run_one_by_one():
    torch.manual_seed(0)
    net, x = EnsembleMLP([4, 8, 1], 3, "relu"), torch.randn(5, 4)
    for k in range(3):
        h = torch.relu(x @ net.weights[0][k] + net.biases[0][k])
        torch.testing.assert_close(net(x)[k], (h @ net.weights[1][k] + net.biases[1][k]).squeeze(-1))


def test_relabelling_replaces_every_stored_reward():
    buf = ReplayBuffer(10, 2, 1)
    obs = np.arange(14, dtype=np.float32).reshape(7, 2)
    buf.add(obs=obs, actions=np.ones((7, 1)), rewards=np.zeros(7), next_obs=obs, terminal=np.zeros(7))
    buf.relabel(lambda o, a: o[:, 0] + a[:, 0], chunk=3)
    assert buf.data["rewards"][:7].tolist() == (obs[:, 0] + 1).tolist() and buf.data["rewards"][7:].sum() == 0


def test_labelled_pairs_round_trip_and_bad_files_are_refused_by_name(tmp_path):
    h, _ = linear_history()
    pairs = h.pairs(5, 10, np.random.default_rng(0))
    d = PreferenceDataset()
    d.add(pairs, np.array([0, 1, 0.5, np.nan, 1]))  # the skipped pair is not kept
    d.save(tmp_path / "p.safetensors")
    back = PreferenceDataset.load(tmp_path / "p.safetensors", 3, 1)
    assert back.data["labels"].tolist() == [0, 1, 0.5, 1] and back.data["obs"].shape == (4, 2, 10, 3)
    with pytest.raises(PreferenceError, match=r"p.safetensors: pairs of obs .* do not fit this task"):
        PreferenceDataset.load(tmp_path / "p.safetensors", 5, 1)
    (tmp_path / "bad.safetensors").write_bytes(b"{not safetensors")
    with pytest.raises(PreferenceError, match="bad.safetensors: not a readable preference dataset"):
        PreferenceDataset.load(tmp_path / "bad.safetensors", 3, 1)


def test_sac_on_a_learned_reward_writes_its_model_and_labels_and_resumes(tmp_path, capsys):
    from embody.cli import main

    out = tmp_path / "run"
    sets = [
        "preference.teacher=scripted",
        "sac.learning_starts=200",
        "preference.unsup_steps=200",
        "preference.every=200",
        "preference.per_session=10",
        "preference.budget=30",
        "preference.segment=10",
        "preference.hidden=[16,16]",
        "sac.hidden=[32,32]",
        "sac.log_every=200",
        "video=false",
        "eval_episodes=1",
    ]
    argv = ["train", "cartpole-swingup", "--algo", "sac", "--envs", "4", "--steps", "800", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["feedback"] for r in rows] == [0, 0, 10, 20]  # sessions at 400 and 600 env steps
    assert rows[1]["reward_spearman"] is None and -1 <= rows[-1]["reward_spearman"] <= 1  # NaN is written null
    ev = json.loads((out / "eval.json").read_text())  # the learned reward ranks the evaluation's segments too
    assert ev["reward_segments"] == ev["length_mean"] // 10 and -1 <= ev["reward_spearman"] <= 1
    replay = ReplayBuffer(10_000, 5, 1).restore(out / "replay.safetensors")
    assert np.abs(replay.data["rewards"][: replay.size]).max() <= 1  # relabelled: tanh rewards, not the env's
    assert main(["train", "--resume", str(out), "--steps", "1000"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["feedback"] == 30 and len(PreferenceDataset.load(out / "preferences.safetensors", 5, 1)) == 30
    meta = json.loads((out / "reward_model" / "checkpoint.json").read_text())
    meta["spec"]["obs_size"] = 7  # a reward model of another task
    meta["spec_hash"] = "0" * 16
    (out / "reward_model" / "checkpoint.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--steps", "1200"]) == 2
    assert "reward_model was trained for a different observation/action spec" in capsys.readouterr().err
