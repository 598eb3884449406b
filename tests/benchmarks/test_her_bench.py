"""``embody bench her``: both sides (embody's SAC+HER and SB3's) train on a Gymnasium-Robotics goal task and report
success at the same env steps; seed jobs pool into one folder and a rerun resumes."""

import json

import pytest


@pytest.mark.slow
def test_a_short_her_bench_measures_both_sides_as_resumable_seed_jobs(tmp_path, capsys, monkeypatch):
    pytest.importorskip("gymnasium_robotics")
    from embody.benchmarks.her import main

    argv = ["--steps", "1200", "--every", "600", "--eval", "2", "--hidden", "16", "16", "--out", str(tmp_path)]
    assert main(argv + ["--seed", "1"]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [(r["seed"], r["side"]) for r in runs] == [(1, "embody"), (1, "sb3")]
    for r in runs:
        assert [c[0] for c in r["curve"]] == [600, 1200] and all(0 <= c[1] <= 1 for c in r["curve"]), r
    assert (tmp_path / "her.png").stat().st_size > 0

    capsys.readouterr()
    assert main(argv + ["--seeds", "2", "--workers", "2"]) == 0  # seed 0 runs, seed 1 is kept
    assert "resuming: 2 of 4 jobs" in capsys.readouterr().out
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [(r["seed"], r["side"]) for r in runs] == [(0, "embody"), (0, "sb3"), (1, "embody"), (1, "sb3")]

    import embody.jobs

    real = embody.jobs.run_jobs

    def and_another_process_finishes_one(fn, jobs, store, **kw):  # a seed job of a process beside this one
        out = real(fn, jobs, store, **kw)
        other = embody.jobs.JobStore(store.root, store.fingerprint)
        job = embody.jobs.Job("FetchReach-v4-seed7-sb3", {**jobs[0].params, "seed": 7, "side": "sb3"})
        other.put(job, {**runs[1], "seed": 7})
        return out

    monkeypatch.setattr(embody.jobs, "run_jobs", and_another_process_finishes_one)
    assert main(argv + ["--seed", "1"]) == 0
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [(r["seed"], r["side"]) for r in runs][-1] == (7, "sb3")  # results.json covers it too
    monkeypatch.undo()

    with pytest.raises(ValueError, match="another configuration"):
        main(argv + ["--seed", "0", "--utd", "1"])
    with pytest.raises(ValueError, match=r"\(init differ\)"):  # torch's initialization: another folder
        main(argv + ["--seed", "0", "--init", "torch"])


def test_the_swap_side_trains_embodys_policy_on_sb3s_her_batches():
    """``--sides swap``: SB3 collects, relabels and normalizes; embody's policy acts and embody's update learns."""
    pytest.importorskip("gymnasium_robotics")
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from embody.benchmarks.her import _embody_update_on
    from embody.sims.gymnasium_env import _load_registries

    s = {"hidden": [16, 16], "batch_size": 32, "lr": 1e-3, "gamma": 0.95, "tau": 0.005, "learning_starts": 100}
    s |= {"utd": 0.5, "init": "torch"}
    _load_registries("FetchReach-v4")
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("FetchReach-v4")]), norm_reward=False)
    model = _embody_update_on(SAC, s)(
        "MultiInputPolicy", venv, learning_starts=100, batch_size=32, replay_buffer_class=HerReplayBuffer, seed=0
    )
    ours, theirs = model.ours.policy, model.actor
    before = [p.detach().clone() for p in (*ours.parameters(), *theirs.parameters())]
    model.learn(300)
    after = [*ours.parameters(), *theirs.parameters()]
    changed = [not torch.equal(a, b) for a, b in zip(before, after)]
    n_ours = len(list(ours.parameters()))
    assert model.ours.updates == 200 and all(changed[:n_ours]) and not any(changed[n_ours:])
    action, _ = model.predict(venv.normalize_obs(venv.reset()), deterministic=True)
    assert action.shape == (1, 4) and abs(action).max() <= 1


def test_the_glued_side_trains_a_second_sb3_sac_on_sb3s_her_batches():
    """``--sides glued`` (the swap's control): SB3 collects, relabels and normalizes; a second SB3 SAC over the flat
    observation acts and learns through the swap's glue; the outer SB3 policy stays as it was."""
    pytest.importorskip("gymnasium_robotics")
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from embody.benchmarks.her import _embody_update_on
    from embody.sims.gymnasium_env import _load_registries

    s = {"hidden": [16, 16], "batch_size": 32, "lr": 1e-3, "gamma": 0.95, "tau": 0.005, "learning_starts": 100}
    s |= {"utd": 0.5, "envs": 1}
    _load_registries("FetchReach-v4")
    venv = VecNormalize(DummyVecEnv([lambda: gym.make("FetchReach-v4")]), norm_reward=False)
    model = _embody_update_on(SAC, s, "sb3")(
        "MultiInputPolicy", venv, learning_starts=100, batch_size=32, replay_buffer_class=HerReplayBuffer, seed=0
    )
    inner, outer = model.ours.sb3.policy, model.actor
    before = [p.detach().clone() for p in (*inner.parameters(), *outer.parameters())]
    model.learn(300)
    after = [*inner.parameters(), *outer.parameters()]
    changed = [not torch.equal(a, b) for a, b in zip(before, after)]
    n_inner = len(list(inner.parameters()))
    assert model.ours.updates == 200 and model.ours.sb3._n_updates == 200
    assert any(changed[:n_inner]) and not any(changed[n_inner:])
    action, _ = model.predict(venv.normalize_obs(venv.reset()), deterministic=True)
    assert action.shape == (1, 4) and abs(action).max() <= 1


def test_the_reverse_side_trains_sb3s_policy_on_embodys_her_batches():
    """``--sides reverse``: embody collects, relabels and normalizes; SB3's actor acts and SB3's update learns."""
    pytest.importorskip("gymnasium_robotics")
    import torch

    from embody.benchmarks.her import _sb3_update_on
    from embody.benchmarks.sac import embody_config
    from embody.policies.evaluate import evaluate
    from embody.policies.sac import SAC, SACPolicy
    from embody.sims.gymnasium_env import GymnasiumEnv

    s = {"hidden": [16, 16], "batch_size": 32, "lr": 1e-3, "gamma": 0.95, "tau": 0.005, "learning_starts": 100}
    s |= {"utd": 0.5, "envs": 2}
    env = GymnasiumEnv("FetchReach-v4", 2, 0)
    ours = SACPolicy(env.observation_size, env.action_size, s["hidden"])
    sac = _sb3_update_on(SAC, s, 0)(env, ours, embody_config(s, buffer_size=1000, her="future", her_k=4), seed=0)
    theirs = sac.sb3.policy
    before = [p.detach().clone() for p in (*ours.parameters(), *theirs.parameters())]
    returns: list[float] = []
    while sac.env_steps < 300:
        sac.step(returns, [])
    after = [*ours.parameters(), *theirs.parameters()]
    changed = [not torch.equal(a, b) for a, b in zip(before, after)]
    n_ours = len(list(ours.parameters()))
    assert sac.updates == 100 and sac.sb3._n_updates == 100  # 0.5 per env step past 100
    assert not any(changed[:n_ours]) and any(changed[n_ours:])  # embody's networks untouched, SB3's trained
    assert ours.obs_norm.count > 300  # embody's normalizer saw every observation SB3's actor acted on
    result = evaluate(GymnasiumEnv("FetchReach-v4", 1, 1), ours, 1)  # evaluation acts through SB3's actor
    assert len(result.success) == 1
    env.close()
