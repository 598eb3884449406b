"""papers/blindfolded/teleop.py ``teleop_demos`` and ``embody blindfolded import``: human demonstrations
into the peg study's pipeline.

Datasets are recorded as in test_blindfolded_teleop.py: `embody robot-sim peg_arm` in its own process
on loopback DDS, the peg arm's DDS driver with its safety supervisor; only the human is scripted
(a ScriptedDevice holding moves and pressing buttons at given reads). The malformed datasets are
written with the real DatasetWriter.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from embody.datasets.format import DatasetFormatError, DatasetWriter, feature, load  # noqa: E402
from embody.papers.blindfolded import demos as demo_io  # noqa: E402
from embody.papers.blindfolded import teleop as T  # noqa: E402
from embody.sims.tasks.peg_insert import OBS_SIZE, PegInsertConfig  # noqa: E402

DOMAIN = 150 + os.getpid() % 25  # not test_blindfolded_teleop's range
SEED = 3
CONFIG = PegInsertConfig(start_xy_noise=0.0)  # the simulated board's hole is at the nominal place
FAST = {"rate_hz": 25, "home_speed": 0.25, "seed": SEED}
REGION = T.Region((0.001, -0.002), 0.004)  # contains the hole (at the nominal place); side 8 mm: 2 bits


class ScriptedDevice:
    """The simulated human: at read n, ``script[n]`` = (move to hold from now on or None, buttons pressed)."""

    name = "scripted"

    def __init__(self, script: dict[int, tuple]):
        self.script, self.reads, self.move = script, 0, np.zeros(3)

    def read(self):
        move, buttons = self.script.get(self.reads, (None, ()))
        self.reads += 1
        if move is not None:
            self.move = np.asarray(move, dtype=np.float64)
        return self.move.copy(), set(buttons)

    def close(self):
        pass


DOWN, DONE = (0.0, 0.0, -1.0), (None, ("done",))


def record(connect, out, script, episodes, region=None):
    """teleoperate on a fresh robot-sim (``connect``: the peg_robot_sim fixture) with ScriptedDevice(script)."""
    driver = connect(T.TeleopTask(CONFIG, SEED).robot)
    with driver:
        summary = T.teleoperate(
            driver,
            CONFIG,
            ScriptedDevice(script),
            episodes=episodes,
            out=out,
            region=region,
            max_steps=200,
            display=T.TerminalDisplay(io.StringIO()),
            **FAST,
        )
    assert not summary["aborted"] and summary["fault"] is None, summary
    return summary


@pytest.fixture(scope="module")
def datasets(peg_robot_sim, tmp_path_factory):
    """ "plain": nothing told; episode 0 moves +x then "done" (not a success), episode 1 goes down into the
    hole (success). "told": REGION told; one success."""
    root = tmp_path_factory.mktemp("teleop_import")
    plain, told = root / "plain", root / "told"
    # read 0 of each episode is the one after homing: episode 0's frames are reads 1..5; episode 1 starts at read 7
    s1 = record(peg_robot_sim, plain, {0: ((1.0, 0.0, 0.0), ()), 6: DONE, 7: (DOWN, ())}, episodes=2)
    assert [e["outcome"] for e in s1["episodes"]] == ["done", "success"], s1
    s2 = record(peg_robot_sim, told, {0: (DOWN, ())}, episodes=1, region=REGION)
    assert [e["outcome"] for e in s2["episodes"]] == ["success"], s2
    return plain, told


def test_successful_episodes_convert_exactly(datasets):
    plain, _ = datasets
    ds = load(plain)
    assert ds.num_episodes == 2
    d = T.teleop_demos(plain)
    lo, hi = ds.episode_bounds
    assert d.episode_lengths.tolist() == [hi[1] - lo[1]]  # episode 0 ("done") left out
    assert d.obs_spec == {"obs": (OBS_SIZE,)} and d.actions.shape == (int(d.episode_lengths.sum()), 3)
    both = T.teleop_demos(plain, outcomes=("success", "done"))
    assert both.meta["dataset_episodes"] == [0, 1] and both.episode_lengths.tolist() == [5, hi[1] - lo[1]]
    np.testing.assert_array_equal(both.actions[:5], np.tile([1.0, 0.0, 0.0], (5, 1)))
    for (obs, act), i in zip(both.episodes(), (0, 1)):
        ep = ds.episode(i)
        np.testing.assert_array_equal(obs["obs"], ep["observation.state"])
        np.testing.assert_array_equal(act, ep["action"])
        assert obs["obs"].dtype == np.float32 and act.dtype == np.float32
    np.testing.assert_array_equal(d.obs["obs"], ds.episode(1)["observation.state"])
    np.testing.assert_array_equal(d.actions, ds.episode(1)["action"])
    m = d.meta
    assert m["domain"] == "peg" and m["level"] == "human" and m["information_bits"] == 0.0 and m["region"] is None
    assert m["dataset_episodes"] == [1] and m["outcomes"] == ["success"]
    assert m["tasks"] == [[0.0, 0.0]] and m["episode_tasks"] == [0]  # the board, at the nominal place
    assert m["expert_success"] == [0, 1] and m["expert_steps"] == (hi - lo).tolist()
    assert m["dataset"] == str(plain.resolve()) and m["rate_hz"] == 25
    assert both.meta["tasks"] == [[0.0, 0.0]] and both.meta["episode_tasks"] == [0, 0]
    np.testing.assert_array_equal(both.obs["obs"][5:], d.obs["obs"])
    only = T.teleop_demos(plain, episodes=[1])
    assert only.meta["dataset_episodes"] == [1] and only.meta["expert_success"] == [1]
    with pytest.raises(ValueError, match="outcomes must be some of"):
        T.teleop_demos(plain, outcomes=("won",))


def test_the_region_told_sets_level_and_information(datasets):
    from embody.papers.blindfolded.peg import information_bits

    _, told = datasets
    d = T.teleop_demos(told)
    assert d.meta["level"] == "human-region-8mm" == T.human_level(REGION)
    assert d.meta["information_bits"] == information_bits("region-8mm") == 2.0  # the same count as the experts'
    assert d.meta["region"] == {"center": [0.001, -0.002], "half_width": 0.004}
    assert T.region_information(T.Region((0, 0), 0.002)) == information_bits("region-4mm") == 4.0
    assert T.region_information(T.Region((0, 0), 0.0001)) == 8.0  # no better than δ = 1 mm
    assert T.region_information(T.Region((0, 0), 0.05)) == 0.0  # wider than the prior
    assert T.human_level(None) == "human" and T.human_level(T.Region((0, 0), 0.00125)) == "human-region-2.5mm"


def test_no_successful_episode_is_an_error_naming_the_dataset(datasets):
    plain, _ = datasets
    with pytest.raises(ValueError, match=f"{plain}: no success episode to convert among its 1 \\(1 done\\)"):
        T.teleop_demos(plain, episodes=[0])


def write_dataset(root, features, obs_size=OBS_SIZE, recording=None, outcome="success", steps=3):
    """A small dataset written with the real DatasetWriter: ``steps`` frames of zeros (the teleop
    features that are declared) in one episode."""
    full = T.teleop_features(OBS_SIZE, 7)
    if obs_size != OBS_SIZE:
        full["observation.state"] = feature("float32", (obs_size,))
    features = {k: full[k] for k in features}
    with DatasetWriter(
        root,
        fps=25,
        features=features,
        robot_type="peg_arm",
        recording={"source": "teleop", "task_config": {"hole_pos": [0.5, 0.0, 0.0]}}
        if recording is None
        else recording,
    ) as w:
        for i in range(steps):
            frame = {k: np.zeros(ft["shape"], dtype=ft["dtype"]) for k, ft in features.items()}
            if "embody.teleop.outcome" in frame:
                frame["embody.teleop.outcome"] = np.array([T.OUTCOMES.index(outcome)])
            if "next.done" in frame:
                frame["next.done"] = np.array([i == steps - 1])
            w.add_frame(frame, task="peg-insert")
        w.save_episode()
    return root


def test_bad_datasets_are_one_readable_error(tmp_path):
    with pytest.raises(DatasetFormatError, match="no such dataset folder"):
        T.teleop_demos(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetFormatError, match="not a LeRobot v3.0 dataset"):
        T.teleop_demos(tmp_path / "empty")
    other = write_dataset(
        tmp_path / "other", ["observation.state", "action", "next.done"], recording={"source": "scripted"}
    )
    with pytest.raises(DatasetFormatError, match=f"{other}: not a teleop dataset: missing feature"):
        T.teleop_demos(other)
    everything = list(T.teleop_features())
    foreign = write_dataset(tmp_path / "foreign", everything, recording={"source": "replay"})
    with pytest.raises(DatasetFormatError, match="recording source is 'replay'"):
        T.teleop_demos(foreign)
    small = write_dataset(tmp_path / "small", everything, obs_size=20)
    with pytest.raises(
        DatasetFormatError, match=f"{small}: observation.state has shape \\(20,\\) per frame, expected \\(33,\\)"
    ):
        T.teleop_demos(small)
    ok = T.teleop_demos(write_dataset(tmp_path / "ok", everything))  # the same, with 33: converts
    assert ok.episode_lengths.tolist() == [3] and ok.meta["level"] == "human"
    failed = write_dataset(tmp_path / "failed", everything, outcome="timeout")
    with pytest.raises(ValueError, match=f"{failed}: no success episode .* \\(1 timeout\\)"):
        T.teleop_demos(failed)


def test_episodes_told_different_regions_are_not_mixed(tmp_path):
    root = write_dataset(tmp_path / "mixed", list(T.teleop_features()))
    features = T.teleop_features()
    with DatasetWriter(root, fps=25, features=features, robot_type="peg_arm") as w:  # appended: region told
        frame = {k: np.zeros(ft["shape"], dtype=ft["dtype"]) for k, ft in features.items()}
        frame["embody.teleop.region"] = np.array([1.0, 0.0, 0.0, 0.002])
        w.add_frame(frame, task="peg-insert")
        w.save_episode()
    with pytest.raises(ValueError, match="told different regions"):
        T.teleop_demos(root)
    assert T.teleop_demos(root, episodes=[1]).meta["level"] == "human-region-4mm"


def test_the_import_command(datasets, tmp_path, capsys):
    from embody.cli import main

    plain, told = datasets
    target = tmp_path / "human.npz"
    assert main(["blindfolded", "import", "--dataset", str(plain), "--out", str(target)]) == 0
    d = demo_io.load(target, {"obs": (OBS_SIZE,)})
    expected = T.teleop_demos(plain)
    np.testing.assert_array_equal(d.obs["obs"], expected.obs["obs"])
    np.testing.assert_array_equal(d.actions, expected.actions)
    assert d.meta == expected.meta
    err = capsys.readouterr().err
    assert "1 episode(s) (success" in err and str(target) in err and err.count("\n") == 1
    # --out a folder: OUT/demos/<level>_seed<S>.npz, as collect names the experts' files
    assert main(["blindfolded", "import", "--dataset", str(told), "--out", str(tmp_path), "--seed", "4"]) == 0
    assert demo_io.load(tmp_path / "demos" / "human-region-8mm_seed4.npz").meta["information_bits"] == 2.0
    capsys.readouterr()
    assert main(["blindfolded", "import", "--dataset", str(tmp_path / "nowhere"), "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("embody blindfolded import: error: ") and "nowhere" in err and err.count("\n") == 1
    assert main(["blindfolded", "import", "--out", str(tmp_path / "x.npz")]) == 2  # which dataset?
    assert "needs --dataset" in capsys.readouterr().err


def test_train_the_student_on_imported_demonstrations(datasets, tmp_path, capsys):
    """``train --domain peg --demos FILE``: the GRU student (tiny scale: plain BC, no DAgger for a human
    level) as a deployable run directory named by the demonstrations' level and episode count."""
    import torch

    from embody.cli import main
    from embody.papers.blindfolded.peg import load_student_run

    plain, _ = datasets
    target = tmp_path / "human.npz"
    assert main(["blindfolded", "import", "--dataset", str(plain), "--out", str(target)]) == 0
    assert main(["blindfolded", "train", "--domain", "peg", "--demos", str(target), "--out", str(tmp_path)]) == 0
    policy, meta = load_student_run(tmp_path / "models" / "human_seed0_m1")
    assert meta["level"] == "human" and meta["m"] == 1 and meta["demos"] == str(target)
    obs = torch.as_tensor(demo_io.load(target).obs["obs"][:4])
    policy.reset()
    assert policy.act(obs, deterministic=True).shape == (4, 3)
    capsys.readouterr()
    assert main(["blindfolded", "train", "--demos", str(target), "--out", str(tmp_path)]) == 2  # maze
    assert (
        main(["blindfolded", "train", "--domain", "peg", "--demos", str(tmp_path / "no.npz"), "--out", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err.splitlines()
    assert "is for `train --domain peg`" in err[0] and "no.npz: no such demonstrations file" in err[1]
