"""`embody record` → dataset → `embody replay` (kinematic exact, dynamic to float32 precision) and
`embody dataset ...` on a real recording."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from embody.datasets.format import DatasetFormatError, load, validate
from embody.datasets.record import RecordConfig, record
from embody.datasets.replay import dynamic, kinematic


@pytest.fixture(scope="module")
def peg_dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rec") / "peg"
    summary = record(RecordConfig(task="peg-insert", episodes=2, out=out, n_envs=2, video=False))
    assert summary["episodes"] == 2
    return out


def test_recording_holds_the_standard_and_embody_columns(peg_dataset):
    ds = load(peg_dataset)
    assert ds.num_episodes == 2 and validate(peg_dataset) == []
    assert ds.info["robot_type"] == "peg_arm" and ds.info["embody"]["recording"]["task"] == "peg-insert"
    ep = ds.episode(0)
    for key in (
        "observation.state",
        "action",
        "next.reward",
        "next.done",
        "embody.observation",
        "embody.privileged",
        "embody.joint_target",
        "embody.sim_state",
        "embody.physics",
        "embody.push",
        "embody.fixture.board",
    ):
        assert key in ep and len(ep[key]) == len(ep["frame_index"]), key
    assert ep["next.done"][-1] and not ep["next.done"][:-1].any()
    assert np.ptp(ep["embody.fixture.board"], axis=0).max() == 0  # one board pose per episode


def test_kinematic_replay_is_exact_and_dynamic_replay_reproduces_the_joints(peg_dataset):
    ds = load(peg_dataset)
    assert all(r["max_state_error"] == 0.0 for r in kinematic(ds, "mujoco"))
    for r in dynamic(ds, "mujoco"):
        assert r["joint_max_error"] < 1e-5, r  # float32 targets and states, the same physics


def test_replay_on_another_simulator_is_refused_by_name(peg_dataset):
    with pytest.raises(DatasetFormatError, match="recorded on 'mujoco'.*not 'pybullet'"):
        kinematic(load(peg_dataset), "pybullet")


@pytest.mark.slow
def test_video_round_trip_within_codec_loss(tmp_path):
    out = tmp_path / "reach"
    record(
        RecordConfig(
            task="arm-reach",
            episodes=1,
            out=out,
            n_envs=1,
            overrides=["env.sim.render_width=64", "env.sim.render_height=48", "env.max_episode_steps=20"],
        )
    )
    ds = load(out)
    recorded = ds.frames(0, "observation.images.main")
    assert recorded.shape == (20, 48, 64, 3)
    kinematic(ds, "mujoco", tmp_path / "replay.mp4")
    import av

    with av.open(str(tmp_path / "replay.mp4")) as f:
        replayed = np.stack([fr.to_ndarray(format="rgb24") for fr in f.decode(video=0)])
    assert replayed.shape == recorded.shape
    assert np.abs(replayed.astype(float) - recorded.astype(float)).mean() < 8  # two lossy encodes of one scene


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "embody.cli", *map(str, args)], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_dataset_commands(peg_dataset, tmp_path):
    info = json.loads(cli("dataset", "info", peg_dataset).stdout)
    assert info["episodes"] == 2 and info["recorded"]["task"] == "peg-insert"
    assert cli("dataset", "validate", peg_dataset).returncode == 0
    stats = json.loads(cli("dataset", "stats", peg_dataset).stdout)
    assert len(stats["observation.state"]["mean"]) == 7
    out = cli("dataset", "plot", peg_dataset, "--out", tmp_path / "plots")
    plots = {p.name for p in (tmp_path / "plots").glob("*.png")}
    assert (
        out.returncode == 0 and {"ep000_position.png", "ep000_signals.png"} <= plots
    )  # the arm's action is Cartesian: a signal
    exported = cli(
        "dataset", "export-minari", peg_dataset, "--out", tmp_path / "minari", "--dataset-id", "embody/peg-v0"
    )
    assert exported.returncode == 0, exported.stderr
    back = cli("dataset", "import-minari", tmp_path / "minari", "--out", tmp_path / "back", "--fps", 25)
    assert back.returncode == 0 and load(tmp_path / "back").num_frames == load(peg_dataset).num_frames
    bad = cli("replay", tmp_path / "nothing-here")
    assert bad.returncode == 2 and "nothing-here" in bad.stderr


@pytest.mark.slow
def test_replay_on_the_simulated_arm_goes_through_the_supervisor(tmp_path):
    """robot-sim's board sits at the nominal hole: record one episode there and insert the peg again."""
    pytest.importorskip("cyclonedds", reason="needs the hardware extra")
    record(
        RecordConfig(
            task="peg-insert",
            episodes=1,
            out=tmp_path / "nominal",
            n_envs=1,
            video=False,
            overrides=["env.hole_xy_range=0"],
        )
    )
    domain = 190 + os.getpid() % 30
    log = tmp_path / "replay.rrd"
    out = cli("replay", tmp_path / "nominal", "--robot", "peg_arm", "--target", "sim", "--domain", domain, "--log", log)
    summary = json.loads(out.stdout)
    frames = load(tmp_path / "nominal").num_frames
    assert summary["ended_in"] == "POLICY" and summary["commands"] == frames, summary
    assert [(e["from"], e["to"]) for e in summary["events"][:3]] == [
        ("ZERO_TORQUE", "RAMP"),
        ("RAMP", "HOLD"),
        ("HOLD", "POLICY"),
    ]
    if importlib.util.find_spec("rerun"):  # the viz extra: the log holds every replayed frame and the events
        from rerun.chunk import RrdReader

        rows = {}
        for chunk in RrdReader(log).stream().to_chunks():
            rows[chunk.entity_path] = rows.get(chunk.entity_path, 0) + chunk.num_rows
        assert summary["log"] == str(log) and rows["/joints/joints/joint4/sent_target"] == frames
        assert rows["/events"] >= 2 + 3  # episode start and end, the supervisor's transitions
