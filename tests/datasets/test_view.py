"""embody dataset view / export-mcap / plot on a recorded H1-2 episode: the files are read back with Rerun's and
MCAP's own readers, and viewing writes nothing into the dataset."""

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from embody.datasets import load
from embody.datasets.record import RecordConfig, record
from embody.robots import get_robot

pytest.importorskip("rerun", reason="needs the viz extra")
pytest.importorskip("foxglove", reason="needs the viz extra")
pytestmark = pytest.mark.slow  # each test runs the CLI in a subprocess

POLICY = Path(__file__).parents[2] / "assets" / "h1_2" / "policies" / "velocity-seed0"
FRAMES = 40


@pytest.fixture(scope="module")
def h1_2_dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("view") / "h1_2"
    cfg = RecordConfig(
        task="h1_2-velocity",
        episodes=1,
        out=out,
        policy=POLICY,
        n_envs=1,
        overrides=[f"env.max_episode_steps={FRAMES}", "env.sim.render_width=64", "env.sim.render_height=48"],
    )
    assert record(cfg)["frames"] == FRAMES
    return out


def cli(*args):
    return subprocess.run([sys.executable, "-m", "embody.cli", *map(str, args)], capture_output=True, text=True)


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_rrd_holds_every_joint_by_name_the_video_and_the_geometry(h1_2_dataset, tmp_path):
    from rerun.chunk import RrdReader

    before = tree_digest(h1_2_dataset)
    out = cli("dataset", "view", h1_2_dataset, "--save", tmp_path / "ep.rrd")
    assert out.returncode == 0, out.stderr
    assert tree_digest(h1_2_dataset) == before  # read-only
    rows: dict[str, int] = {}
    times: dict[str, np.ndarray] = {}
    for chunk in RrdReader(tmp_path / "ep.rrd").stream().to_chunks():
        rows[chunk.entity_path] = rows.get(chunk.entity_path, 0) + chunk.num_rows
        if "time" in chunk.timeline_names:
            t = chunk.to_record_batch().column("time").to_numpy().astype("timedelta64[ns]").astype(np.int64)
            times[chunk.entity_path] = np.concatenate([times.get(chunk.entity_path, np.zeros(0, np.int64)), t])
    robot = get_robot("h1_2")
    left_leg = {robot.joint_names[j] for j in robot.groups["left_leg"]}
    for name in robot.joint_names:
        limb = "left_leg" if name in left_leg else None
        paths = [p for p in rows if p.startswith("/joints/") and p.split("/")[3] == name]
        assert {p.split("/")[-1] for p in paths} >= {"position", "velocity", "target"}, name
        assert limb is None or all(p.split("/")[2] == "left_leg" for p in paths)
        assert all(rows[p] == FRAMES for p in paths)
    assert {p.split("/")[-1] for p in rows if p.startswith("/joints/left_leg/left_knee_joint/")} >= {"action"}
    assert rows["/camera/observation.images.main"] == FRAMES
    t = times["/camera/observation.images.main"]
    assert len(t) == FRAMES and np.all(np.diff(t) == 20_000_000)  # in order, one per frame at 50 fps [ns]
    assert {"/world/robot/capsule", "/world/robot/box", "/world/robot/cylinder"} <= set(rows)
    assert rows["/signals/next.reward"] == FRAMES and rows["/events"] == 2  # episode start and end


def test_mcap_holds_joint_states_images_and_timestamps_in_order(h1_2_dataset, tmp_path):
    from mcap.reader import make_reader
    from mcap_protobuf.decoder import DecoderFactory

    before = tree_digest(h1_2_dataset)
    out = cli("dataset", "export-mcap", h1_2_dataset, "--out", tmp_path / "ep.mcap")
    assert out.returncode == 0, out.stderr
    assert tree_digest(h1_2_dataset) == before
    with open(tmp_path / "ep.mcap", "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        counts = {c.topic: summary.statistics.channel_message_counts[c.id] for c in summary.channels.values()}
        schemas = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
        states = list(reader.iter_decoded_messages(topics=["/joint_states"]))
    assert schemas["/joint_states"] == "foxglove.JointStates" and counts["/joint_states"] == FRAMES
    assert schemas["/camera/observation.images.main"] == "foxglove.CompressedImage"
    assert counts["/camera/observation.images.main"] == FRAMES
    assert schemas["/robot"] == "foxglove.SceneUpdate" and schemas["/events"] == "foxglove.Log"
    assert counts["/joints/target"] == counts["/joints/action"] == FRAMES
    log_times = np.array([m.log_time for _, _, m, _ in states])
    assert np.all(np.diff(log_times) == 20_000_000)  # 50 fps, from the episode start
    first = states[0][3]
    assert [j.name for j in first.joints] == list(get_robot("h1_2").joint_names)
    ds = load(h1_2_dataset)
    np.testing.assert_allclose([j.position for j in first.joints], ds.episode(0)["observation.state"][0], atol=1e-6)


def test_plot_draws_one_figure_per_feature_with_named_joints(h1_2_dataset, tmp_path):
    out = cli("dataset", "plot", h1_2_dataset, "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    names = {p.name for p in tmp_path.glob("*.png")}
    assert {"ep000_position.png", "ep000_velocity.png", "ep000_target.png", "ep000_action.png"} <= names
    assert "ep000_signals.png" in names and len(names) == 5


def test_a_damaged_dataset_or_a_missing_episode_is_refused_by_name(h1_2_dataset, tmp_path):
    out = cli("dataset", "view", h1_2_dataset, "--episode", 3, "--save", tmp_path / "x.rrd")
    assert out.returncode == 2 and "has no episode 3" in out.stderr and not (tmp_path / "x.rrd").exists()
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", h1_2_dataset, damaged], check=True)
    data = next((damaged / "data").rglob("*.parquet"))
    data.write_bytes(data.read_bytes()[:-100])
    for args in (
        ["view", damaged, "--save", tmp_path / "d.rrd"],
        ["export-mcap", damaged, "--out", tmp_path / "d.mcap"],
    ):
        out = cli("dataset", *args)
        assert out.returncode == 2 and str(data.relative_to(damaged)) in out.stderr, out.stderr
        assert out.stderr.count("\n") == 1  # one line, no traceback
    assert not (tmp_path / "d.rrd").exists() and not (tmp_path / "d.mcap").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_rerun_web_viewer_draws_the_saved_episode(h1_2_dataset, tmp_path):
    """Rerun's own web viewer (the viz extra's rerun CLI) on the saved file, in headless Chromium with WebGL on the
    CPU: the screenshot shows the episode's panels (a blank viewer is a few flat colours)."""
    from browser import HeadlessChromium
    from PIL import Image

    assert cli("dataset", "view", h1_2_dataset, "--save", tmp_path / "ep.rrd").returncode == 0
    web, grpc = free_port(), free_port()
    env = {**os.environ, "CI": "1", "XDG_CONFIG_HOME": str(tmp_path)}  # the viewer sends no usage data on CI
    args = ["--web-viewer", "--web-viewer-port", str(web), "--port", str(grpc), "--renderer", "webgl"]
    rerun = subprocess.Popen(
        [sys.executable, "-m", "rerun_cli", str(tmp_path / "ep.rrd"), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # rerun_cli runs the viewer binary as a child: stop the whole group
    )
    try:
        url = f"http://127.0.0.1:{web}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{grpc}%2Fproxy&renderer=webgl"
        for _ in range(100):  # the viewer's HTTP server is up
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        browser = HeadlessChromium(url, timeout_s=60, webgl=True)
        try:
            assert browser.wait_for("document.title", timeout_s=30) == "Rerun Viewer"
            colours, deadline = 0, time.monotonic() + 90
            while colours < 2000 and time.monotonic() < deadline:  # the wasm loads, then the data streams in
                time.sleep(2)
                shot = browser.screenshot(tmp_path / "rerun.png")
                colours = len(Image.open(shot).convert("RGB").getcolors(1 << 24))
        finally:
            browser.close()
    finally:
        os.killpg(rerun.pid, signal.SIGTERM)
        rerun.wait(10)
    assert colours >= 2000, f"the viewer drew {colours} colours: {shot}"
