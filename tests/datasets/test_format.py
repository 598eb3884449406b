"""The LeRobot v3.0 layout: round trip, crash safety, integrity checks, migration, compaction."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402
from dataset_helpers import FPS, add_episode, episode_arrays, features, write_dataset  # noqa: E402

from embody.datasets import (  # noqa: E402
    CODEBASE_VERSION,
    DatasetFormatError,
    DatasetWriter,
    _storage,  # noqa: E402
    compact,
    feature,
    load,
    validate,
)

CAM = "observation.images.front"
ARRAY_KEYS = [
    "observation.state",
    "action",
    "observation.privileged",
    "embody.sim_state",
    "embody.command",
    "embody.supervisor_event",
]


def _assert_same_arrays(ds, written):
    assert ds.num_episodes == len(written)
    for e, ep in enumerate(written):
        got = ds.episode(e)
        for k in ARRAY_KEYS:
            assert got[k].dtype == ep[k].dtype, k
            np.testing.assert_array_equal(got[k], ep[k], err_msg=k)
        n = len(ep["action"])
        np.testing.assert_array_equal(got["frame_index"], np.arange(n))
        np.testing.assert_array_equal(got["episode_index"], np.full(n, e))
        np.testing.assert_allclose(got["timestamp"], np.arange(n) / FPS, rtol=0, atol=1e-6)


def test_round_trip_arrays_frames_and_meta(tiny):
    root, written = tiny
    ds = load(root)
    _assert_same_arrays(ds, written)
    assert ds.tasks == ["pick", "place"] and ds.num_frames == 18 and ds.fps == FPS
    np.testing.assert_array_equal(ds.column("index"), np.arange(18))
    np.testing.assert_array_equal(ds.column("task_index"), np.repeat([0, 1, 0], [5, 6, 7]))
    for e, ep in enumerate(written):
        frames = ds.frames(e, CAM)
        assert frames.shape == (len(ep["action"]), 32, 32, 3) and frames.dtype == np.uint8
        assert np.abs(frames.astype(int) - ep[CAM]).mean() < 6  # codec loss only
        np.testing.assert_array_equal(ds.frames(e, CAM, [3, 0, 3]), frames[[3, 0, 3]])
    assert validate(root) == []

    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == CODEBASE_VERSION == "v3.0"
    assert {k: info[k] for k in ("robot_type", "total_episodes", "total_frames", "total_tasks", "fps", "splits")} == {
        "robot_type": "peg_arm",
        "total_episodes": 3,
        "total_frames": 18,
        "total_tasks": 2,
        "fps": FPS,
        "splits": {"train": "0:3"},
    }
    assert info["chunks_size"] == 1000 and "data_files_size_in_mb" in info and "video_files_size_in_mb" in info
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["embody"]["schema_version"] == 1
    feats = info["features"]
    assert feats["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    for k in ("frame_index", "episode_index", "index", "task_index"):
        assert feats[k] == {"dtype": "int64", "shape": [1], "names": None}
    assert feats[CAM]["shape"] == [32, 32, 3] and feats[CAM]["names"] == ["height", "width", "channels"]
    vinfo = feats[CAM]["info"]
    assert vinfo["video.codec"] in ("h264", "mpeg4") and vinfo["video.pix_fmt"] == "yuv420p"
    assert vinfo["video.fps"] == FPS and vinfo["video.g"] <= 2 and vinfo["has_audio"] is False

    # the data parquet schema is the non-video features, in order, with the declared types
    schema = pq.read_schema(root / "data/chunk-000/file-001.parquet")
    assert schema.names == [k for k, ft in feats.items() if ft["dtype"] != "video"]
    assert schema.field("observation.state").type == pa.list_(pa.float32(), 4)
    assert schema.field("observation.privileged").type == pa.list_(pa.list_(pa.float32(), 2), 3)
    assert schema.field("embody.sim_state").type == pa.list_(pa.float64(), 6)
    assert schema.field("embody.supervisor_event").type == pa.int64()
    assert schema.field("timestamp").type == pa.float32()

    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [r["length"] for r in episodes] == [5, 6, 7] and episodes[1]["tasks"] == ["place"]
    assert [(r["dataset_from_index"], r["dataset_to_index"]) for r in episodes] == [(0, 5), (5, 11), (11, 18)]
    assert [r["data/file_index"] for r in episodes] == [0, 1, 2]  # every episode in its own file
    assert episodes[2][f"videos/{CAM}/to_timestamp"] == pytest.approx(0.7)
    assert episodes[0]["stats/observation.state/mean"] == pytest.approx(written[0]["observation.state"].mean(0))
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == ["pick", "place"] and tasks.column("task_index").to_pylist() == [0, 1]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]  # lerobot indexes by task

    stats = json.loads((root / "meta/stats.json").read_text())
    state = np.concatenate([ep["observation.state"] for ep in written])
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(0), rtol=1e-5, atol=1e-6)
    assert stats["observation.state"]["count"] == [18]
    assert np.asarray(stats[CAM]["mean"]).shape == (3, 1, 1) and 0 <= np.min(stats[CAM]["min"]) <= 1


def test_keyframe_interval_at_most_two(tiny):
    import av

    root, _ = tiny
    for path in sorted((root / "videos" / CAM).rglob("*.mp4")):
        with av.open(str(path)) as c:
            flags = [p.is_keyframe for p in sorted((p for p in c.demux(video=0) if p.size), key=lambda p: p.pts)]
        keys = [i for i, k in enumerate(flags) if k]
        assert keys[0] == 0 and max(np.diff(keys + [len(flags)])) <= 2, (path, flags)


def test_crash_before_save_keeps_earlier_episodes_and_resume_appends(tmp_path):
    root = tmp_path / "ds"
    written = write_dataset(root, lengths=(4,))
    w = DatasetWriter(root, fps=FPS, features=features(), robot_type="peg_arm")
    add_episode(w, episode_arrays(3, 7), "pick")  # frames and a half-written video in the stage ...
    del w  # ... and the process dies: no save_episode, no close
    assert validate(root) == []
    _assert_same_arrays(load(root), written)

    with DatasetWriter(root, fps=FPS, features=features(), robot_type="peg_arm") as w:  # resume recording
        assert not (root / _storage.STAGING_DIR).exists()  # the interrupted episode was swept away
        ep = episode_arrays(5, 1)
        add_episode(w, ep, "new task")
        assert w.save_episode() == 1
    ds = load(root)
    _assert_same_arrays(ds, written + [ep])
    assert ds.tasks == ["pick", "new task"] and validate(root) == []
    np.testing.assert_array_equal(ds.column("index"), np.arange(9))


def test_failure_at_every_replace_during_a_save_leaves_a_loadable_dataset(tmp_path, monkeypatch):
    template = tmp_path / "template"
    first = write_dataset(template, lengths=(4,))
    second = episode_arrays(3, 1)

    def save_second(root, fail_at):
        calls, real = [0], os.replace

        def replace(src, dst):
            calls[0] += 1
            if calls[0] == fail_at:
                raise OSError("simulated crash")
            return real(src, dst)

        with DatasetWriter(root, fps=FPS, features=features(), robot_type="peg_arm") as w:
            add_episode(w, second, "pick")
            monkeypatch.setattr(os, "replace", replace)
            try:
                w.save_episode()
            finally:
                monkeypatch.setattr(os, "replace", real)
        return calls[0]

    total = save_second(tmp_path / "dry", fail_at=0)  # count the renames of one save
    assert total >= 10
    outcomes = set()
    for k in range(1, total + 1):
        root = tmp_path / f"crash{k}"
        shutil.copytree(template, root)
        with pytest.raises(OSError, match="simulated crash"):
            save_second(root, fail_at=k)
        ds = load(root)  # rolls a committed save forward, ignores an uncommitted one
        assert ds.num_episodes in (1, 2), k
        _assert_same_arrays(ds, (first + [second])[: ds.num_episodes])
        assert validate(root) == [], k
        outcomes.add(ds.num_episodes)
    assert outcomes == {1, 2}  # crashes before and after the commit point were both exercised


def test_process_killed_while_moving_files_in_place(tmp_path):
    root = tmp_path / "ds"
    written = write_dataset(root, lengths=(4,))
    child = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from dataset_helpers import FPS, add_episode, episode_arrays, features
        from embody.datasets import DatasetWriter
        real, calls = os.replace, [0]
        def replace(src, dst):
            calls[0] += 1
            if "data/chunk-000" in str(dst) and not str(src).endswith(".tmp"):
                real(src, dst)
                os._exit(3)  # killed right after the first file of the committed save landed
            return real(src, dst)
        os.replace = replace
        w = DatasetWriter({str(root)!r}, fps=FPS, features=features(), robot_type="peg_arm")
        add_episode(w, episode_arrays(3, 1), "pick")
        w.save_episode()
    """)
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    ds = load(root)
    _assert_same_arrays(ds, written + [episode_arrays(3, 1)])
    assert validate(root) == []


def test_flipped_byte_is_reported_with_the_file(tiny):
    root, _ = tiny
    path = root / "data/chunk-000/file-001.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetFormatError, match="checksum mismatch") as err:
        load(root)
    assert err.value.path == str(path) and str(path) in str(err.value)
    assert any(str(path) in p for p in validate(root))


def test_missing_video_file_is_a_clear_error(tiny):
    root, _ = tiny
    path = root / f"videos/{CAM}/chunk-000/file-002.mp4"
    path.unlink()
    for verify in (True, False):
        with pytest.raises(DatasetFormatError, match="missing") as err:
            load(root, verify=verify)
        assert err.value.path == str(path)
    assert any(str(path) in p and "missing" in p for p in validate(root))


def test_add_frame_checks_features(tmp_path):
    with DatasetWriter(tmp_path / "ds", fps=FPS, features=features(), robot_type="peg_arm") as w:
        frame = {k: v[0] for k, v in episode_arrays(1, 0).items()}
        with pytest.raises(ValueError, match=r"'observation.state'.*\(5,\).*\(4,\)"):
            w.add_frame({**frame, "observation.state": np.zeros(5, np.float32)}, task="pick")
        with pytest.raises(ValueError, match="missing.*'action'"):
            w.add_frame({k: v for k, v in frame.items() if k != "action"}, task="pick")
        with pytest.raises(ValueError, match="unexpected.*'extra'"):
            w.add_frame({**frame, "extra": np.zeros(1)}, task="pick")
        with pytest.raises(ValueError, match="'embody.supervisor_event'.*float64"):
            w.add_frame({**frame, "embody.supervisor_event": np.float64(1.5)}, task="pick")
        with pytest.raises(ValueError, match=f"'{CAM}'.*uint8"):
            w.add_frame({**frame, CAM: np.zeros((32, 32, 3), np.float32)}, task="pick")
        with pytest.raises(ValueError, match="save"):
            w.save_episode()  # nothing buffered: every bad frame was refused
    with pytest.raises(ValueError, match="even"):
        DatasetWriter(
            tmp_path / "odd", fps=FPS, features={"observation.images.x": feature("video", (31, 32, 3))}, robot_type="r"
        )
    with pytest.raises(ValueError, match="'/'"):
        DatasetWriter(tmp_path / "slash", fps=FPS, features={"a/b": feature("float32", (2,))}, robot_type="r")


def test_unknown_codebase_version_and_newer_schema_are_refused(tiny):
    root, _ = tiny
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(DatasetFormatError, match=r"codebase_version 'v2.1'.*convert") as err:
        load(root)
    assert err.value.path == str(info_path)
    assert validate(root) and "v2.1" in validate(root)[0]
    info_path.write_text(json.dumps({**info, "embody": {**info["embody"], "schema_version": 99}}))
    with pytest.raises(DatasetFormatError, match="newer embody"):
        load(root)


def test_writer_refuses_a_different_dataset(tiny, tmp_path):
    root, _ = tiny
    for kwargs in ({"features": features(video=False)}, {"fps": FPS + 1}, {"robot_type": "h1_2"}):
        args = {"fps": FPS, "features": features(), "robot_type": "peg_arm", **kwargs}
        with pytest.raises(DatasetFormatError, match="different dataset"):
            DatasetWriter(root, **args)
    other = tmp_path / "not_a_dataset"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    with pytest.raises(DatasetFormatError, match="not empty"):
        DatasetWriter(other, fps=FPS, features=features(), robot_type="peg_arm")
    assert load(root).num_episodes == 3


def _to_schema_v0(root: Path) -> None:
    """Rewrite a v1 dataset as the synthetic schema v0: checksums inside info.json, no checksum file."""
    info_path, sums_path = root / "meta/info.json", root / "meta/embody_checksums.json"
    info = json.loads(info_path.read_text())
    files = json.loads(sums_path.read_text())["files"]
    files.pop("meta/info.json")
    info["embody"] = {"schema_version": 0, "checksums": files}
    info_path.write_text(json.dumps(info, indent=4))
    sums_path.unlink()


def test_older_schema_is_migrated(tiny):
    root, written = tiny
    _to_schema_v0(root)
    ds = load(root)
    assert ds.info["embody"]["schema_version"] == 1 and ds.info["embody"]["checksums"] == "meta/embody_checksums.json"
    _assert_same_arrays(ds, written)
    assert validate(root) == []
    # a v0 dataset still has its files verified
    path = root / "data/chunk-000/file-000.parquet"
    good = path.read_bytes()
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(DatasetFormatError, match="checksum mismatch"):
        load(root)
    path.write_bytes(good)
    # appending migrates it on disk
    with DatasetWriter(root, fps=FPS, features=features(), robot_type="peg_arm") as w:
        add_episode(w, episode_arrays(2, 5), "pick")
        w.save_episode()
    assert json.loads((root / "meta/info.json").read_text())["embody"]["schema_version"] == 1
    assert (root / "meta/embody_checksums.json").is_file() and validate(root) == []


def test_compact_keeps_every_array_and_frame(tiny):
    root, written = tiny
    before = load(root)
    frames = [before.frames(e, CAM) for e in range(3)]
    compact(root)
    assert sorted(p.name for p in (root / "data").rglob("*.parquet")) == ["file-000.parquet"]
    assert len(list((root / "videos").rglob("*.mp4"))) == 1
    ds = load(root)  # checksums were recomputed
    _assert_same_arrays(ds, written)
    for e in range(3):
        np.testing.assert_array_equal(ds.frames(e, CAM), frames[e])  # remuxed, not re-encoded
        np.testing.assert_array_equal(ds.frames(e, CAM, [4, 1]), frames[e][[4, 1]])
    assert [r[f"videos/{CAM}/from_timestamp"] for r in ds.episodes] == pytest.approx([0.0, 0.5, 1.1])
    assert validate(root) == []
    assert not any(p.name.startswith(".ds.embody-compact") for p in root.parent.iterdir())

    # recording resumes after compaction into fresh files, and compaction can run again
    with DatasetWriter(root, fps=FPS, features=features(), robot_type="peg_arm") as w:
        ep = episode_arrays(4, 3)
        add_episode(w, ep, "pick")
        w.save_episode()
    assert validate(root) == []
    compact(root, target_size_mb=1e-6)  # tiny target: one episode per file
    ds = load(root)
    _assert_same_arrays(ds, written + [ep])
    assert [r["data/file_index"] for r in ds.episodes] == [0, 1, 2, 3]
    for e in range(3):
        np.testing.assert_array_equal(ds.frames(e, CAM), frames[e])
    assert validate(root) == []


def test_interrupted_compaction_swap_is_recovered(tiny):
    root, written = tiny
    new, old = _storage.compact_siblings(root)
    shutil.copytree(root, new)
    (new / _storage.COMPACT_COMPLETE).write_bytes(b"")
    os.rename(root, old)  # crash between the two renames of the swap
    _assert_same_arrays(load(root), written)
    assert not new.exists() and not old.exists() and validate(root) == []


def test_validate_reports_stray_files_lerobot_would_read(tiny):
    root, _ = tiny
    shutil.copy(root / "data/chunk-000/file-000.parquet", root / "data/chunk-000/file-009.parquet")
    problems = validate(root)
    assert len(problems) == 1 and "file-009.parquet" in problems[0] and "not referenced" in problems[0]


def test_files_wrap_into_the_next_chunk(tmp_path):
    root = tmp_path / "ds"
    written = write_dataset(root, lengths=(2, 3, 2), chunk_size=2)
    assert sorted(p.relative_to(root).as_posix() for p in (root / "data").rglob("*.parquet")) == [
        "data/chunk-000/file-000.parquet",
        "data/chunk-000/file-001.parquet",
        "data/chunk-001/file-000.parquet",
    ]
    assert (root / f"videos/{CAM}/chunk-001/file-000.mp4").is_file()
    _assert_same_arrays(load(root), written)
    assert validate(root) == []
