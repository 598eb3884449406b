"""``embody bench datasets`` runs end to end on a tiny dataset (structure only, no timing asserted)."""

import json
import math

import pytest

pytest.importorskip("h5py")
pytest.importorskip("pyarrow")

ROWS = {
    "write state",
    "write 84x84 video",
    "load state-only, .loader()",
    "load state-only, DataLoader default collate",
    "load + 84x84 video, .loader()",
}


def test_bench_datasets_measures_embody_and_the_hdf5_peer(tmp_path, capsys):
    from embody.benchmarks import BENCHMARKS, run_benchmark

    assert BENCHMARKS["datasets"] == "embody.benchmarks.datasets"
    args = ["--quick", "--episodes", "2", "--frames", "12", "--out", str(tmp_path)]
    assert run_benchmark("datasets", args) == 0
    r = json.loads((tmp_path / "results.json").read_text())
    assert (r["episodes"], r["frames_per_episode"], r["total_frames"], r["video_episodes"]) == (2, 12, 24, 1)
    assert r["lerobot_reference_fps"] == 2900.0 and set(r["rows"]) == ROWS
    for name, row in r["rows"].items():
        for key in ("embody_fps", "peer_fps", "ratio"):
            assert math.isfinite(row[key]) and row[key] > 0, (name, key)
        assert (row["vs_lerobot"] is not None) == name.startswith("load state-only"), name
    # the recorded h1_2-stand workloads (tiny with --quick); no lerobot here, so its rows say so
    assert list(r["video_vs_lerobot"]) == ["h1_2-stand × 2", "h1_2-stand × 3"]
    for name, w in r["video_vs_lerobot"].items():
        assert w["episodes"] == int(name[-1]) and w["frames"] > 0, name
        assert math.isfinite(w["embody_fps"]) and w["embody_fps"] > 0, name
        assert w["lerobot_fps"] is None and w["ratio"] is None and "not measured" in w["lerobot"]["why"]
    out = capsys.readouterr().out
    assert "| load state-only, .loader() |" in out and "× lerobot" in out
    assert "| h1_2-stand × 2 |" in out and "not measured: no --lerobot-python" in out
    assert "target, write 84x84 video ≥ 1,000 frames/s" in out


def test_bench_datasets_reads_the_peer_scripts_json_and_reports_its_failures(tmp_path, monkeypatch):
    import sys

    from embody.benchmarks import datasets

    script = tmp_path / "peer.py"
    monkeypatch.setattr(datasets, "PEER_SCRIPT", script)
    script.write_text("import json, sys\nprint('noise')\nprint(json.dumps({'fps': 123.0, 'root': sys.argv[1]}))\n")
    got = datasets.lerobot_video_rate(sys.executable, tmp_path / "ds", repeats=1)
    assert got == {"fps": 123.0, "root": str(tmp_path / "ds")}
    script.write_text("import sys\nsys.exit('lerobot is missing')\n")
    got = datasets.lerobot_video_rate(sys.executable, tmp_path / "ds", repeats=1)
    assert got["fps"] is None and got["why"] == "not measured: exit 1: lerobot is missing"
    assert datasets.lerobot_video_rate(None, tmp_path, 1)["fps"] is None


def test_bench_datasets_peer_items_match_embody_items(tmp_path):
    import numpy as np
    import torch

    from embody.benchmarks.datasets import CAMERA, HDF5Frames, synthetic_episode, write_embody, write_hdf5
    from embody.datasets.loader import EpisodeDataset

    eps = [synthetic_episode(np.random.default_rng(1), 6, video=True)]
    write_embody(tmp_path / "ds", eps, video=True)
    write_hdf5(tmp_path / "ds.h5", eps)
    ours, peer = EpisodeDataset(tmp_path / "ds")[3], HDF5Frames(tmp_path / "ds.h5")[3]
    assert set(peer) == set(ours) - {"task"}
    for k, v in peer.items():
        assert v.shape == ours[k].shape, k
        if k == CAMERA:  # MP4 (lossy) against raw frames
            assert (v - ours[k]).abs().mean() < 0.05
        else:
            assert torch.equal(v.to(ours[k].dtype), ours[k]), k
