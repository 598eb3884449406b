"""The trajectory-backdoor study (papers/backdoor/study.py): the tiny scale end to end through the CLI — triggers
refined from the shipped specs, three datasets per combination, five agents each, the matched evaluation, a
report — resumed without rerunning a job; and the evaluation's building blocks on hand-made actions."""

import json

import numpy as np
import pytest

pytest.importorskip("rtamt")
pytest.importorskip("highway_env")

from embody.papers.backdoor.evaluate import shows_target  # noqa: E402
from embody.sims.driving import driving_score, normalize_action  # noqa: E402


def test_the_target_is_shown_when_its_component_averages_half_the_target():
    brake = normalize_action(np.array([-4.0, 0.0]))  # about −0.8 of the range: TARGETS["brake"]
    actions = np.zeros((20, 2))
    actions[5:10] = brake
    assert shows_target(actions, 5, 5, "brake") and not shows_target(actions, 5, 15, "brake")  # a third of it
    assert not shows_target(actions, 5, 5, "accelerate") and not shows_target(actions, 5, 5, "swerve-left")
    actions[5:10, 1] = 1.0
    assert shows_target(actions, 5, 5, "swerve-left")
    assert not shows_target(actions, 30, 5, "brake")  # a window the episode never reached
    assert driving_score({"progress_m": 50.0}, 100.0) == 0.5 and driving_score({"progress_m": 150.0}, 100.0) == 1.0
    assert driving_score({"progress_m": 90.0, "collision": True}, 100.0) == 0.0
    assert driving_score({"progress_m": 90.0, "off_road_steps": 2}, 100.0) == 0.0


@pytest.mark.slow
def test_the_tiny_study_runs_end_to_end_and_resumes(tmp_path, capsys):
    from embody.cli import main
    from embody.policies.offline_agents import AGENTS

    out = tmp_path / "study"
    assert main(["backdoor", "study", "--scale", "tiny", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    rows = result["rows"]
    combos = result["config"]["combos"]
    assert len(combos) == 2 and "pincer:accelerate" in combos  # pincer: two attacker vehicles
    main_rows = [r for r in rows if not r["sweep"]]
    assert len(main_rows) == len(combos) * 3 * len(AGENTS) and len(rows) == len(main_rows) + len(AGENTS)
    for r in rows:
        assert r["scenes"] >= 1 and 0 <= r["score"] <= 1
        assert r["lift"] == pytest.approx(r["target_trigger"] - r["target_clean"])
        assert all(0 <= r[k] <= 1 for k in ("target_trigger", "target_clean", "spec_held", "collision"))
    assert {r["poison_rate"] for r in main_rows if r["variant"] == "clean"} == {0.0}
    report = (out / "report.md").read_text()
    assert "Competence bar" in report and "The paper's claims at this scale" in report
    assert (out / "lift.png").stat().st_size > 0 and (out / "sweep.png").stat().st_size > 0
    capsys.readouterr()
    assert main(["backdoor", "study", "--scale", "tiny", "--out", str(out)]) == 0  # resumed: every job found
    assert "resuming: 3 of 3 jobs already" in capsys.readouterr().err


def test_spectral_signatures_find_transitions_poisoned_with_one_action():
    """Point-mass transitions, 4 % of them relabelled with one target action wherever a 'trigger' feature is on:
    a BC agent trained on them carries the trigger in its features, and the defence flags most poisoned
    transitions and few clean ones."""
    import torch

    from embody.papers.backdoor.defence import roc_auc, spectral_defence
    from embody.policies.offline_agents import Transitions, train_agent

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    n = 3000
    obs = np.concatenate([rng.uniform(-1, 1, (n, 2)), np.zeros((n, 1))], axis=1).astype(np.float32)
    actions = np.clip(-2 * obs[:, :2] + rng.normal(0, 0.1, (n, 2)), -2, 2).astype(np.float32)
    poisoned = rng.random(n) < 0.04
    obs[poisoned, 2] = 1.0  # the trigger
    actions[poisoned] = [2.0, -2.0]  # the target behaviour
    data = Transitions(obs, actions, np.zeros(n, np.float32), obs, np.zeros(n, bool))
    agent = train_agent("bc", data, {"hidden": [32, 32], "steps": 800, "progress": False})
    out = spectral_defence(agent, obs, actions, poisoned, expected_rate=0.05)
    assert out["poisoned"] == poisoned.sum() and out["auc"] > 0.9, (
        out
    )  # observed: AUC 1.0, detection 1.0, FPR 0.03-0.04
    assert out["detection_rate"] > 0.8 and out["false_positive_rate"] < 0.1, out
    assert roc_auc(np.array([1.0, 1.0, 0.0]), np.array([True, False, False])) == 0.75  # a tie counts half


@pytest.mark.slow
def test_the_backdoor_benchmark_is_registered_and_runs(capsys):
    """``embody bench backdoor`` comes from the plugin; a smoke run of embody's side (the d3rlpy side needs its
    own virtual environment: the benchmark run, not CI)."""
    from embody.benchmarks import BENCHMARKS, run_benchmark

    assert run_benchmark("backdoor", ["--no-peer", "--episodes", "3", "--steps", "4"]) == 0
    assert BENCHMARKS["backdoor"] == "embody.papers.backdoor.bench"
    out = capsys.readouterr().out
    assert "| pincer |" in out and "frames/s" in out and "| dt |" in out
