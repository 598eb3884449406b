"""Blindfolded experts, peg domain (embody.papers.blindfolded.peg): tasks = hole poses, experts at
information levels, I per level, demonstrations without privileged information, and a tiny
clone-and-evaluate run. MuJoCo, small batches; the numbers asserted were measured with headroom."""

import math

import numpy as np
import pytest
import torch

from embody.papers.blindfolded import peg
from embody.sims.tasks.peg_insert import LAST

pytest.importorskip("mujoco")


def test_information_per_level_exact_values_and_order():
    # delta = 1 mm, range ±8 mm: H(hole) = log2(16²) = 8 bits
    assert peg.information_bits("informed") == pytest.approx(8.0)
    assert peg.information_bits("region-4mm") == pytest.approx(8.0 - 2 * math.log2(4))
    assert peg.information_bits("region-8mm") == pytest.approx(8.0 - 2 * math.log2(8))
    assert peg.information_bits("blind") == pytest.approx(0.0)
    bits = [peg.information_bits(level) for level in peg.LEVELS]
    assert bits == sorted(bits, reverse=True)
    # the edge effect (a random-offset region sticks out of the prior) only adds information
    assert peg.information_bits_exact("informed") == pytest.approx(8.0)
    assert peg.information_bits_exact("blind") == pytest.approx(0.0)
    for level in ("region-4mm", "region-8mm"):
        assert peg.information_bits(level) <= peg.information_bits_exact(level) < peg.information_bits(level) + 1
    with pytest.raises(ValueError, match="unknown level"):
        peg.information_bits("sighted")
    # the same box formula as the maze half's information module
    from embody.papers.blindfolded.information import box_information

    assert peg.information_bits("region-4mm") == pytest.approx(box_information((0.016, 0.016), (0.004, 0.004)))


def test_task_ids_map_to_fixed_holes_in_range():
    a, b = peg.hole_of([3, 4, 3]), peg.hole_of([4])
    assert a.shape == (3, 2) and np.abs(a).max() <= peg.HOLE_XY_RANGE
    np.testing.assert_array_equal(a[0], a[2])
    np.testing.assert_array_equal(a[1], b[0])
    assert not np.array_equal(a[0], a[1])


def test_peg_scales_and_first_tasks_keep_only_the_episodes_of_the_first_m_tasks():
    from embody.papers.blindfolded import demos as demo_io
    from embody.papers.blindfolded.config import for_scale
    from embody.papers.blindfolded.study import first_tasks, get_domain

    tiny, paper = for_scale("tiny", 0, "peg"), for_scale("paper", 0, "peg")
    assert isinstance(get_domain(tiny), peg.PegDomain)
    assert len(paper.m_values) >= 5 and paper.m_values[0] == 1 and len(paper.peg.levels) >= 3 and paper.seeds >= 3
    assert paper.peg.max_steps <= 600
    # task 1's expert failed both times: its tasks are [0, 1, 2], its kept episodes from tasks 0, 0, 2
    d = demo_io.from_episodes(
        [{"obs": np.zeros((n, 33), np.float32)} for n in (3, 4, 5)],
        [np.zeros((n, 3), np.float32) for n in (3, 4, 5)],
        {"tasks": [7, 8, 9], "episode_tasks": [0, 0, 2]},
    )
    assert first_tasks(d, 1).episode_lengths.tolist() == [3, 4]
    two = first_tasks(d, 2)
    assert two.episode_lengths.tolist() == [3, 4] and two.meta["tasks"] == [7, 8]
    assert first_tasks(d, 3).episode_lengths.tolist() == [3, 4, 5]
    d.meta["episode_tasks"] = [2]
    d2 = demo_io.from_episodes([{"obs": np.zeros((5, 33), np.float32)}], [np.zeros((5, 3), np.float32)], d.meta)
    assert first_tasks(d2, 2) is None  # no successful demonstration among the first 2 tasks


def test_tasks_are_in_range_and_held_out_disjoint():
    train, held = peg.split_tasks(0, 8, 32)
    assert train.shape == (8, 2) and held.shape == (32, 2)
    assert np.abs(np.r_[train, held]).max() <= peg.HOLE_XY_RANGE
    assert not {tuple(t) for t in train.round(9)} & {tuple(t) for t in held.round(9)}
    np.testing.assert_array_equal(peg.split_tasks(0, 2, 32)[1], held)  # held-out set independent of m


def test_given_tasks_move_the_hole_per_env_and_the_queue_runs_out():
    env = peg.make_env(3, seed=0)
    tasks = np.array([[0.005, -0.002], [-0.007, 0.001], [0.0, 0.006], [0.003, 0.003]])
    env.task.assign(tasks)
    obs, priv = env.reset()
    assert obs.shape == (3, 33) and priv.shape == (3, 5)
    np.testing.assert_allclose(priv[:, :2], tasks[:3], atol=1e-6)  # the privileged obs shows the given holes
    np.testing.assert_array_equal(env.task.episode_id, [0, 1, 2])
    env.task.sample_fixtures(np.array([1, 2]))  # two resets, one queued hole left: env 2 idles
    np.testing.assert_array_equal(env.task.episode_id, [0, 3, -1])
    np.testing.assert_allclose(env.task.hole[1, :2] - env.task.nominal[:2], tasks[3])
    with pytest.raises(ValueError, match="within"):
        env.task.assign(np.array([[0.02, 0.0]]))
    env.close()


def test_rollouts_record_the_teachers_labels_and_execute_the_students_or_noisy_actions():
    from embody.sims.tasks.peg_insert import LAST

    cfg = peg.make_config(12)
    env = peg.make_env(2, seed=0, config=cfg)
    holes = np.array([[0.004, -0.003], [-0.002, 0.005]])
    expert = peg.make_expert("informed", cfg)
    # DAgger, beta = 0: the student (holding still) acts, the informed expert's actions are the labels
    ep = peg.run_episodes(env, peg.ZeroPolicy(), holes, privileged=False, record=True, teacher=expert, beta=0.0)
    assert ep.obs.shape == (24, 33) and ep.actions.shape == (24, 3) and ep.starts.sum() == 2
    assert np.abs(ep.actions).max() > 0.1  # the expert's labels
    np.testing.assert_allclose(ep.obs[:, LAST], 0.0, atol=1e-6)  # yet only the student's zeros were executed
    # DART: the expert acts on noisy executed actions; its own (clean) actions are recorded
    ep = peg.run_episodes(env, expert, holes, privileged=True, record=True, noise=0.3)
    executed = ep.obs[1:12, LAST]
    assert np.abs(executed - ep.actions[0:11]).max() > 0.1
    env.close()


@pytest.mark.parametrize("history", [False, True])
def test_search_expert_reads_the_privileged_obs_only_for_its_region(history):
    cfg = peg.make_config(contact_history=history)  # the privileged part is the last 5 columns either way
    env = peg.make_env(2, seed=0, config=cfg)
    env.task.assign(np.array([[0.004, -0.003], [-0.002, 0.005]]))
    obs, priv = env.reset()
    a, b = peg.SearchExpert(cfg, 0.004, seed=3), peg.SearchExpert(cfg, 0.004, seed=3)
    x = torch.as_tensor(np.concatenate([obs, priv], 1))
    torch.testing.assert_close(a.act(x), b.act(x))
    for _ in range(5):  # after the first step, a lying privileged obs changes nothing
        obs, _, _, _, info = env.step(a.act(x).numpy())
        x = torch.as_tensor(np.concatenate([obs, info.privileged_obs], 1))
        lie = x.clone()
        lie[:, obs.shape[1] : obs.shape[1] + 2] = 0.0
        torch.testing.assert_close(b.act(lie), a.act(x))
    assert np.abs(a.centre - priv[:, :2]).max() <= 0.002 + 1e-9  # the region contains the hole
    env.close()


def test_a_resyncing_teacher_skips_ahead_only_to_a_tip_on_its_own_pass():
    """A DAgger teacher (``resync``) whose student slid the peg further along the spiral resumes from there; a tip
    beside the next pass, a tip behind, or a tip not sliding leaves its progress alone."""
    cfg = peg.make_config()
    e = peg.SearchExpert(cfg, None, resync=0.008)
    e.centre, e.d = np.zeros((4, 2)), np.full(4, 0.010)
    ahead = e._point(np.full(1, 0.013))[0]
    outward = ahead * (1 + e.pitch / np.abs(ahead).max())  # the same place one pass further out
    behind = e._point(np.full(1, 0.007))[0]
    xy = np.stack([ahead, outward, behind, ahead])
    d = e._caught_up(xy, np.array([True, True, True, False]))
    assert d[0] == pytest.approx(0.013, abs=0.0003)
    np.testing.assert_array_equal(d[1:], 0.010)


@pytest.mark.slow
def test_experts_insert_and_search_takes_longer_with_less_information():
    tasks = peg.sample_tasks(np.random.default_rng(0), 16)
    out = {
        level: peg.evaluate(peg.make_expert(level), tasks, 1, privileged=True)
        for level in ("informed", "region-4mm", "blind")
    }
    # measured (MuJoCo, 600 steps, 64 other holes): informed 100% in ~62 steps, region-4mm 100% in
    # ~93, blind 89% in ~266
    assert out["informed"]["success"] == 1.0
    assert out["region-4mm"]["success"] >= 0.8
    assert out["blind"]["success"] >= 0.6
    steps = [out[level]["steps_to_insert"] for level in ("informed", "region-4mm", "blind")]
    assert steps[0] + 20 < steps[1] < steps[2] - 30
    assert all(0 < r["peak_force"] < 40 for r in out.values())


def test_demonstrations_hold_the_learner_observation_only():
    tasks = np.array([[0.003, -0.004]])
    demos = peg.collect("informed", tasks, episodes_per_task=3, seed=0, n_envs=2)
    assert demos.obs_size == 33 and demos.action_size == 3
    assert int(demos.episode_starts.sum()) == 3 == len(demos.meta["success"])
    assert all(demos.meta["success"]) and len(demos) == sum(demos.meta["length"])
    assert demos.meta["information_bits"] == pytest.approx(8.0)


@pytest.mark.slow
def test_clone_of_the_informed_expert_inserts_at_its_training_holes_not_elsewhere():
    torch.set_num_threads(1)
    train, held = peg.split_tasks(0, 2, 32)
    demos = peg.collect("informed", train, episodes_per_task=4, seed=0)
    student = peg.train_student(demos, hidden=64, seed=0, level="informed", tasks=train)  # BC, then DAgger
    assert student.fit["mse"] < 0.02 and len(student.dagger) == peg.DAGGER_ITERATIONS
    at_train = peg.evaluate(student, train, episodes_per_task=8, seed=1)
    at_held = peg.evaluate(student, held, 1, seed=2)
    zero = peg.evaluate(peg.ZeroPolicy(), train, episodes_per_task=2, seed=1)
    # measured before DAgger (16 demos per hole, BC only): 62% at the 2 training holes, 6% held out;
    # with DAgger (PegDomain.train's recipe, 4 demos per hole, 16 episodes): 56-69% / 0-19%; 0% holding still
    assert zero["success"] == 0.0
    assert at_train["success"] >= 0.3
    assert at_train["success"] >= at_held["success"] + 0.25


@pytest.mark.parametrize("history", [False, True])
def test_domain_collect_clones_only_successful_expert_episodes(history):
    from embody.papers.blindfolded.config import PegConfig

    cfg = PegConfig(levels=["informed"], max_steps=62, demos_per_task=2, n_envs=4, contact_history=history)
    domain = peg.PegDomain(cfg)
    size = 38 if history else 33  # the contact-history observation (paper scale) adds 5 columns
    assert domain.obs_spec == {"obs": (size,)}
    d = domain.collect("informed", [0, 1, 2], domain.information("informed"))
    ok = np.array(d.meta["expert_success"], dtype=bool)
    assert len(ok) == 6 and 0 < ok.sum() < 6  # 62 steps: the informed expert (~62 steps) sometimes runs out
    assert len(d.episode_lengths) == ok.sum() and d.meta["episode_tasks"] == [e // 2 for e in np.flatnonzero(ok)]
    assert d.episode_lengths.tolist() == np.array(d.meta["expert_steps"])[ok].tolist()
    assert d.obs["obs"].shape == (int(d.episode_lengths.sum()), size) and d.actions.shape[1] == 3


def test_the_paper_scale_runs_dagger_for_the_informed_level_only():
    """The search experts' DAgger labels follow their own spiral progress (peg-ablation "Round 2"): the paper scale
    clones the search levels by BC on DART demonstrations; the stateless informed expert keeps DAgger."""
    from embody.papers.blindfolded.config import for_scale

    cfg = for_scale("paper", domain="peg")
    domain = peg.PegDomain(cfg.peg)
    assert cfg.peg.demo_noise == 0.1
    assert [domain._dagger_iterations(lv) for lv in cfg.peg.levels] == [peg.DAGGER_ITERATIONS, 0, 0, 0]
    assert peg.PegDomain(for_scale("tiny", domain="peg").peg)._dagger_iterations("blind") == 1


def test_demo_noise_perturbs_what_the_expert_executes_not_its_labels():
    """DART demonstrations: the next row's previous-action columns hold the executed (noisy, clipped) action, the
    label the expert's own; without noise they agree."""
    from embody.papers.blindfolded.config import PegConfig

    def gaps(noise):
        cfg = PegConfig(levels=["informed"], max_steps=80, demos_per_task=1, n_envs=2, demo_noise=noise)
        d = peg.PegDomain(cfg).collect("informed", [0, 1])
        obs, act = d.obs["obs"], d.actions
        first = np.r_[0, np.cumsum(d.episode_lengths)[:-1]]
        inner = np.setdiff1d(np.arange(1, len(obs)), first)  # rows whose previous row is of the same episode
        return np.abs(obs[inner, LAST] - np.clip(act[inner - 1], -1, 1))

    assert gaps(0.0).max() < 1e-6
    assert 0.05 < gaps(0.2).mean() < 0.3


@pytest.mark.slow
def test_tiny_peg_study_runs_through_the_cli(tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "embody.cli",
            "blindfolded",
            "study",
            "--domain",
            "peg",
            "--scale",
            "tiny",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert result["experts"]["informed"]["success"] == 1.0
    assert {(r["level"], r["m"]) for r in result["runs"]} == {
        (lv, m) for lv in ("informed", "region-4mm", "blind") for m in (1, 2)
    }
    assert (tmp_path / "report.md").exists() and (tmp_path / "demos" / "blind_seed0.npz").exists()
    # students' contact forces on the held-out holes: every episode's peak, pooled per cell, in the report
    assert all(len(r["heldout_peak_force"]) == 8 and min(r["heldout_peak_force"]) >= 0 for r in result["runs"])
    assert all(0 <= c["heldout_peak_force"] <= c["heldout_peak_force_max"] for c in result["summary"]["table"])
    assert "peak wrist force" in (tmp_path / "report.md").read_text()


def test_dagger_follows_its_beta_schedule():
    from embody.policies.bc import BCConfig

    torch.set_num_threads(1)
    hole = np.array([[0.002, -0.003]])
    demos = peg.collect("informed", hole, episodes_per_task=1, seed=0, n_envs=1)
    student = peg.train_student(demos, hidden=8, epochs=1, seq_len=16, seed=0, min_grad_steps=2)
    history = peg.dagger(
        student,
        demos,
        "informed",
        hole,
        BCConfig(epochs=1, batch_size=64, seq_len=16, burn_in=4),
        episodes=1,
        epochs=1,
        config=peg.make_config(150),
        n_envs=1,
        min_grad_steps=2,
        betas=[1.0, 0.0],
    )
    assert [h["beta"] for h in history] == [1.0, 0.0]
    assert history[0]["rollout_success"] == 1.0  # beta 1: the expert drives every step
    assert history[1]["samples"] > history[0]["samples"] > len(demos)
