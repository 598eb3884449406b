"""papers/blindfolded: mazes, experts, task information, history BC, demonstration files, the CLI study."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("minigrid")

from embody.datasets.format import DatasetFormatError  # noqa: E402
from embody.papers.blindfolded import demos as demo_io  # noqa: E402
from embody.papers.blindfolded.information import average_discrete_information, box_information, discrete_information  # noqa: E402
from embody.papers.blindfolded.maze import (  # noqa: E402
    N_ACTIONS,
    Level,
    MazeDomain,
    candidates,
    carve,
    evaluate,
    features,
    level_information,
    make_env,
    path_distances,
    run_expert,
)


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_carve_is_a_perfect_maze():
    for seed in range(5):
        free = carve(4, np.random.default_rng(seed))
        assert free.shape == (9, 9)
        assert not free[0].any() and not free[-1].any() and not free[:, 0].any() and not free[:, -1].any()
        squares = [tuple(p) for p in np.argwhere(free)]
        assert len(squares) == 2 * 16 - 1  # 16 cells + 15 passages: a spanning tree
        assert len(path_distances(free, squares[0])) == len(squares)  # connected


def test_missing_minigrid_names_the_games_extra(monkeypatch):
    import sys

    from embody.extras import MissingExtra
    from embody.papers.blindfolded import maze

    monkeypatch.setattr(maze, "_ENV_CLASS", None)
    monkeypatch.setitem(sys.modules, "minigrid", None)
    with pytest.raises(MissingExtra, match="'games' extra"):
        make_env()


def test_maze_generation_is_deterministic_and_solvable():
    env = make_env(4, 100, 3, 4)
    obs, _ = env.reset(seed=11)
    a = (env.free.copy(), env.start_pos, env.goal_pos, env.agent_dir, obs["image"].copy())
    env.reset(seed=12)
    assert not (np.array_equal(env.free, a[0]) and env.goal_pos == a[2])
    obs, _ = env.reset(seed=11)
    assert np.array_equal(env.free, a[0]) and (env.start_pos, env.goal_pos, env.agent_dir) == a[1:4]
    assert np.array_equal(obs["image"], a[4]) and obs["image"].shape == (3, 3, 3)
    for seed in range(20):
        env.reset(seed=seed)
        dist = path_distances(env.free, env.start_pos)
        assert env.goal_pos in dist and dist[env.goal_pos] >= 4
        assert env.goal_pos in env.goal_prior and env.start_pos not in env.goal_prior


def test_experts_always_succeed_within_the_step_limit_and_deterministically():
    env = make_env(4, 100, 3, 4)
    steps = {}
    for name in ("informed", "region-3", "region-5", "blind", "blind-wall"):
        eps = [run_expert(env, Level.parse(name), s) for s in range(60)]
        assert all(e.success for e in eps), name
        steps[name] = float(np.mean([len(e.action) for e in eps]))
    assert steps["informed"] < steps["region-5"] < steps["blind"]
    assert steps["blind"] > 1.3 * steps["informed"] and steps["blind-wall"] > 1.3 * steps["informed"]
    big = make_env(6, 300, 3, 6)  # the paper's mazes: the slowest experts still finish well within the limit
    for name in ("blind", "blind-wall"):
        assert max(len(run_expert(big, Level.parse(name), s).action) for s in range(40)) < 250
    a, b = run_expert(env, Level.parse("blind"), 5), run_expert(env, Level.parse("blind"), 5)
    assert np.array_equal(a.action, b.action) and np.array_equal(a.image, b.image)
    env.reset(seed=5)
    dist = path_distances(env.free, env.start_pos)
    inf = run_expert(env, Level.parse("informed"), 5)
    assert inf.action.tolist().count(2) == dist[env.goal_pos]  # forward moves: the shortest path


def test_region_window_contains_the_goal_and_is_seeded():
    env = make_env(4, 100, 3, 4)
    for seed in range(10):
        env.reset(seed=seed)
        c3 = candidates(env, Level.parse("region-3"), seed)
        assert env.goal_pos in c3 and c3 <= set(env.goal_prior)
        assert c3 == candidates(env, Level.parse("region-3"), seed)
        xs, ys = [p[0] for p in c3], [p[1] for p in c3]
        assert max(xs) - min(xs) < 3 and max(ys) - min(ys) < 3
        assert candidates(env, Level.parse("informed"), seed) == {env.goal_pos}
        assert candidates(env, Level.parse("blind"), seed) == set(env.goal_prior)
    with pytest.raises(ValueError, match="unknown information level"):
        Level.parse("half-blind")


def test_information_values():
    assert discrete_information(8, 1) == 3.0
    assert discrete_information(8, 8) == 0.0
    assert discrete_information(8, [2, 4]) == pytest.approx(1.5)  # (2 + 1) / 2
    assert average_discrete_information([(8, 1), (4, 4)]) == pytest.approx(1.5)
    assert box_information([0.04, 0.02], [0.01, 0.02]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        discrete_information(4, 5)
    with pytest.raises(ValueError):
        box_information([1.0], [2.0])
    env = make_env(4, 100, 3, 4)
    env.reset(seed=3)
    n = len(env.goal_prior)
    assert level_information(env, Level.parse("informed"), [3]) == pytest.approx(math.log2(n))
    k = len(candidates(env, Level.parse("region-5"), 3))
    assert level_information(env, Level.parse("region-5"), [3]) == pytest.approx(math.log2(n) - math.log2(k))
    tasks = range(20)
    i = [level_information(env, Level.parse(lv), tasks) for lv in ("informed", "region-3", "region-5", "blind")]
    assert i[0] > i[1] > i[2] > i[3] == 0.0


def test_features_shape():
    env = make_env(4, 100, 3, 4)
    obs, _ = env.reset(seed=0)
    f = features(obs["image"], obs["direction"])
    assert f.shape == (3 * 3 * 4 + 4,) and f.sum() == 3 * 3 + 1
    ep = run_expert(env, Level.parse("informed"), 0)
    assert features(ep.image, ep.direction).shape == (len(ep.action), 40)


def test_history_bc_learns_training_mazes_beyond_a_random_policy(tmp_path):
    from embody.papers.blindfolded.history_bc import HistoryBCConfig, load_policy, save_policy, train_history_bc
    from embody.policies.checkpoint import CheckpointError

    env = make_env(4, 100, 3, 4)
    tasks = [100, 101]
    eps = [run_expert(env, Level.parse("blind"), t) for t in tasks]
    policy, info = train_history_bc(
        [features(e.image, e.direction) for e in eps],
        [e.action for e in eps],
        N_ACTIONS,
        HistoryBCConfig(hidden=32, embed=32, epochs=150, target_loss=0.02),
    )
    assert info["accuracy"] > 0.95
    cloned = evaluate(policy, tasks * 6, seed=1)
    rand = evaluate(None, tasks * 6, seed=1)
    assert cloned.success.mean() >= 0.8
    assert cloned.success.mean() > rand.success.mean() + 0.3
    assert cloned.steps.mean() < rand.steps.mean()
    save_policy(policy, tmp_path / "bc", {"level": "blind"})  # safetensors + JSON, reloads identically
    loaded, meta = load_policy(tmp_path / "bc")
    assert meta["level"] == "blind"
    assert np.array_equal(evaluate(loaded, tasks, seed=3).steps, evaluate(policy, tasks, seed=3).steps)
    (tmp_path / "bc" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_policy(tmp_path / "bc")


def _demos(tmp_path):
    dom = MazeDomain(__import__("embody.papers.blindfolded.config", fromlist=["MazeConfig"]).MazeConfig())
    d = dom.collect("informed", [1, 2], 4.5)
    path = demo_io.save(d, tmp_path / "d.npz")
    return dom, d, path


def test_demo_files_round_trip(tmp_path):
    dom, d, path = _demos(tmp_path)
    back = demo_io.load(path, dom.obs_spec)
    assert back.meta["tasks"] == [1, 2] and back.meta["level"] == "informed"
    assert np.array_equal(back.actions, d.actions) and back.obs_spec == dom.obs_spec
    assert len(back.first(1).episode_lengths) == 1 and len(back.episodes()) == 2


def _rewrite(path, drop=(), **replace):
    with np.load(path) as z:
        data = {k: z[k] for k in z.files if k not in drop}
    data.update(replace)
    np.savez(path, **data)


def test_demo_file_missing_field_is_refused(tmp_path):
    _, _, path = _demos(tmp_path)
    _rewrite(path, drop=("actions",))
    with pytest.raises(DatasetFormatError, match=r"d\.npz: missing field\(s\) actions"):
        demo_io.load(path)


def test_demo_file_mismatched_observation_spec_is_refused(tmp_path):
    dom, _, path = _demos(tmp_path)
    with pytest.raises(DatasetFormatError, match="observation spec mismatch"):
        demo_io.load(path, {"direction": (), "image": (7, 7, 3)})
    with np.load(path) as z:
        image = z["obs/image"]
    _rewrite(path, **{"obs/image": np.zeros((len(image), 5, 5, 3), np.uint8)})
    with pytest.raises(DatasetFormatError, match=r"d\.npz: observation spec mismatch"):
        demo_io.load(path)


def test_demo_file_empty_episodes_are_refused(tmp_path):
    _, d, path = _demos(tmp_path)
    lengths = d.episode_lengths.copy()
    _rewrite(path, episode_lengths=np.array([int(lengths.sum()), 0]))
    with pytest.raises(DatasetFormatError, match=r"d\.npz: empty episode\(s\) \[1\]"):
        demo_io.load(path)
    _rewrite(path, episode_lengths=np.array([], dtype=np.int64))
    with pytest.raises(DatasetFormatError, match="no episodes"):
        demo_io.load(path)
    _rewrite(path, episode_lengths=np.array([1, 1]))
    with pytest.raises(DatasetFormatError, match="episode_lengths add up to 2"):
        demo_io.load(path)


def test_cli_refuses_a_bad_demo_file(tmp_path, capsys):
    from embody.cli import main

    out = tmp_path / "run"
    assert main(["blindfolded", "collect", "--out", str(out), "--level", "blind", "--m", "2"]) == 0
    path = out / "demos" / "blind_seed0.npz"
    _rewrite(path, drop=("episode_lengths",))
    assert main(["blindfolded", "train", "--out", str(out), "--level", "blind"]) == 2
    err = capsys.readouterr().err
    assert "blind_seed0.npz: missing field(s) episode_lengths" in err


def test_study_fit_and_summary_helpers():
    from embody.papers.blindfolded.study import fit_line
    from embody.stats import bootstrap_ci

    f = fit_line([0, 1, 2], [1, 3, 5])
    assert f["slope"] == pytest.approx(2) and f["intercept"] == pytest.approx(1) and f["r2"] == pytest.approx(1)
    lo, hi = bootstrap_ci([0, 1] * 20, 500)
    assert lo < 0.5 < hi


@pytest.mark.slow
def test_cli_tiny_study_and_stages_end_to_end(tmp_path):
    from embody.cli import main

    out = tmp_path / "study"
    assert main(["blindfolded", "study", "--scale", "tiny", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    for name in ("report.md", "success_vs_m.png", "gap_vs_sqrt_I_over_m.png"):
        assert (out / name).stat().st_size > 0
    info = res["information_bits"]
    assert info["informed"] > info["region-5"] > info["blind"] == info["blind-wall"] == 0
    assert all(e["success"] == 1.0 for e in res["experts"].values())
    table = res["summary"]["table"]
    assert len(table) == 4 * 4 and all(0 <= c["heldout_success"] <= 1 for c in table)
    assert res["summary"]["verdict"] in ("holds", "partly holds", "does not hold")
    assert "held-out success" in (out / "report.md").read_text().lower()
    # the stages one by one
    stages = tmp_path / "stages"
    for action in ("collect", "train", "eval"):
        assert main(["blindfolded", action, "--out", str(stages), "--m", "2", "--level", "informed"]) == 0
    ev = json.loads((stages / "eval.json").read_text())
    assert ev["informed"]["m"] == 2 and 0 <= ev["informed"]["heldout_success"] <= 1


@pytest.mark.slow
def test_study_workers_reproduce_the_sequential_study_and_runs_merge(tmp_path):
    from embody.papers.blindfolded.config import for_scale
    from embody.papers.blindfolded.study import run_study

    cfg = for_scale("tiny", seed=3)
    cfg.maze.levels, cfg.m_values, cfg.seeds, cfg.heldout, cfg.train_eval_episodes = (
        ["informed", "blind-wall"],
        [1, 2],
        1,
        4,
        2,
    )
    cfg.bc.epochs = 5
    runs = []
    for workers in (1, 2):
        cfg.workers = workers
        res = run_study(cfg, tmp_path / f"w{workers}", log=lambda s: None)
        runs.append([{k: v for k, v in r.items() if k != "bc"} for r in res["runs"]])
    assert [(r["level"], r["m"]) for r in runs[0]] == [
        ("informed", 1),
        ("informed", 2),
        ("blind-wall", 1),
        ("blind-wall", 2),
    ]
    assert runs[0] == runs[1]
    # another seed's run, pooled with the first: one study of two seeds; the same seed twice is refused
    from embody.papers.blindfolded.study import merge_studies

    cfg.seed, cfg.workers = 4, 1
    run_study(cfg, tmp_path / "s4", log=lambda s: None)
    merged = merge_studies([tmp_path / "w1", tmp_path / "s4"], tmp_path / "merged", log=lambda s: None)
    assert merged["config"]["seeds"] == 2 and len(merged["runs"]) == 8
    assert {c["seeds"] for c in merged["summary"]["table"]} == {2}
    assert "pooled from" in (tmp_path / "merged" / "report.md").read_text()
    with pytest.raises(ValueError, match="already in an earlier run"):
        merge_studies([tmp_path / "w1", tmp_path / "w2"], tmp_path / "bad", log=lambda s: None)
    cfg.seed, cfg.heldout = 5, 3
    run_study(cfg, tmp_path / "s5", log=lambda s: None)
    with pytest.raises(ValueError, match="heldout differ"):
        merge_studies([tmp_path / "w1", tmp_path / "s5"], tmp_path / "bad", log=lambda s: None)
    with pytest.raises(ValueError, match="not a study"):
        merge_studies([tmp_path / "w1", tmp_path / "nothing"], tmp_path / "bad", log=lambda s: None)


def test_cli_merge_refuses_missing_studies(tmp_path, capsys):
    from embody.cli import main

    assert main(["blindfolded", "merge", "--out", str(tmp_path)]) == 2
    assert "required: --from" in capsys.readouterr().err
    assert main(["blindfolded", "merge", "--from", str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    assert "not a study's results" in capsys.readouterr().err


def test_scales_set_the_fields_they_name():
    """for_scale passes sub-configs by keyword: a field added to StudyConfig once shifted a positional
    HistoryBCConfig into ``peg``, and maze studies silently trained with the default BC settings."""
    from embody.papers.blindfolded.config import HistoryBCConfig, PegConfig, for_scale

    for scale, hidden in (("tiny", 64), ("paper", 128)):
        cfg = for_scale(scale)
        assert isinstance(cfg.peg, PegConfig) and isinstance(cfg.bc, HistoryBCConfig) and cfg.bc.hidden == hidden


@pytest.mark.slow
def test_a_killed_study_resumes_to_the_same_table(tmp_path):
    """`embody blindfolded study` killed mid-way (SIGKILL), then rerun on the same --out: it runs only the
    missing (seed, level) jobs and ends with the table of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    small = ["--set", "m_values=[1,2]", "--set", "heldout=6", "--set", "train_eval_episodes=2", "--set", "bc.epochs=8"]

    def study(out):
        return [
            sys.executable,
            "-m",
            "embody.cli",
            "blindfolded",
            "study",
            "--scale",
            "tiny",
            "--out",
            str(out),
            *small,
        ]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(study(killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 240
    while len(list((killed / "jobs").glob("[!.]*.json"))) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((killed / "jobs").glob("[!.]*.json")))
    assert 1 <= done_before < 8 and not (killed / "results.json").exists()
    resumed = subprocess.run(study(killed), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {done_before} of 8 jobs" in resumed.stderr
    whole = tmp_path / "whole"
    assert subprocess.run(study(whole), capture_output=True, timeout=600).returncode == 0

    def table(out):
        return json.loads((out / "results.json").read_text())["summary"]["table"]

    assert table(killed) == table(whole)
