"""The fast read path gives exactly what the plain one gave: VideoReader against seek-and-decode
(single files, remuxed multi-episode files, longer GOPs, the demuxer fallback), the loader's float
conversion against torch's, the histogram image stats against float sums, the reader cache."""

import numpy as np
import pytest
import torch

pytest.importorskip("pyarrow")

from dataset_helpers import write_dataset  # noqa: E402

from embody.datasets import EpisodeDataset, _video, compact, load  # noqa: E402
from embody.datasets import reader as reader_module  # noqa: E402
from embody.datasets.stats import ImageStats  # noqa: E402
from embody.hardware.realtime import scheduling_kept  # noqa: E402

CAM = "observation.images.front"


def index_sets(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Every frame, each frame alone, reversed, and random subsets with repeats."""
    sets = [np.arange(n), np.arange(n)[::-1]] + [np.array([i]) for i in range(n)]
    return sets + [rng.integers(0, n, rng.integers(1, 6)) for _ in range(8)]


def assert_reader_matches_decode(root, direct: bool = True) -> None:
    ds, rng = load(root), np.random.default_rng(0)
    for e in range(ds.num_episodes):
        path, from_ts, _ = ds.video_file(e, CAM)
        reader = _video.VideoReader(path)
        assert reader.direct
        reader.direct = direct
        for idx in index_sets(ds.row(e).length, rng):
            want = _video.decode(path, from_ts, ds.fps, idx)
            np.testing.assert_array_equal(reader.frames(from_ts, ds.fps, idx), want)
        with pytest.raises(LookupError, match="not found"):
            reader.frames(from_ts, ds.fps, [10_000])  # past the file's end
        reader.close()


@pytest.mark.parametrize("gop", [2, 5])
def test_reader_frames_equal_seek_and_decode(tmp_path, gop):
    write_dataset(tmp_path / "ds", lengths=(5, 6, 13), keyframe_interval=gop)
    assert_reader_matches_decode(tmp_path / "ds")


def test_reader_frames_equal_seek_and_decode_in_a_remuxed_file(tiny):
    root, _ = tiny
    compact(root)  # one file, clips starting at 0.0, 0.5, 1.1 s
    assert_reader_matches_decode(root)


def test_reader_falls_back_to_the_demuxer(tiny):
    root, _ = tiny
    assert_reader_matches_decode(root, direct=False)


def test_reader_cache_closes_the_least_recently_used(tiny, monkeypatch):
    root, _ = tiny
    monkeypatch.setattr(reader_module, "MAX_OPEN_VIDEOS", 2)
    ds = load(root)
    first = [ds.frames(e, CAM) for e in range(3)]
    assert len(ds._readers) == 2
    for e in [2, 0, 1, 0]:
        np.testing.assert_array_equal(ds.frames(e, CAM), first[e])
    assert len(ds._readers) == 2


def test_numpy_scaling_is_torchs_bit_for_bit():
    values = np.arange(256, dtype=np.uint8)
    ours = torch.from_numpy(np.divide(values, np.float32(255.0), dtype=np.float32))
    assert torch.equal(ours, torch.from_numpy(values).float().div_(255.0))


def test_video_items_are_the_decoded_frames_scaled(tiny):
    root, _ = tiny
    ds = EpisodeDataset(root, delta_timestamps={CAM: [-0.1, 0.0, 0.1]})  # one frame apart at 10 fps
    frames = np.concatenate([ds.dataset.frames(e, CAM) for e in range(3)])
    starts = np.array([0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 11, 11, 11, 11, 11, 11, 11])
    ends = np.array([5] * 5 + [11] * 6 + [18] * 7)
    batch = next(iter(ds.loader(batch_size=18, shuffle=False)))
    for i in range(18):
        rows = np.clip(i + np.array([-1, 0, 1]), starts[i], ends[i] - 1)
        want = torch.from_numpy(frames[rows]).permute(0, 3, 1, 2).float().div_(255.0)
        assert torch.equal(batch[CAM][i], want) and torch.equal(ds[i][CAM], want), i


def float_image_stats(frames: list[np.ndarray]) -> dict:
    """The float64 running sums ImageStats used before (the reference)."""
    s, sq, lo, hi, pixels = np.zeros(3), np.zeros(3), np.full(3, 255.0), np.zeros(3), 0
    for f in frames:
        h, w = f.shape[:2]
        if max(h, w) >= 300:
            step = int((w if w > h else h) / 150)
            f = f[::step, ::step]
        px = f.reshape(-1, 3).astype(np.float64)
        pixels += len(px)
        s, sq = s + px.sum(0), sq + (px * px).sum(0)
        lo, hi = np.minimum(lo, px.min(0)), np.maximum(hi, px.max(0))
    mean = s / pixels
    std = np.sqrt(np.maximum(sq / pixels - mean**2, 0.0))
    c = lambda v: (v / 255.0).reshape(3, 1, 1)  # noqa: E731
    return {"min": c(lo), "max": c(hi), "mean": c(mean), "std": c(std), "count": np.array([len(frames)])}


@pytest.mark.parametrize("shape", [(32, 32, 3), (48, 64, 3), (320, 480, 3)])
def test_image_stats_equal_float_sums(shape):
    rng = np.random.default_rng(3)
    frames = [rng.integers(rng.integers(0, 90), rng.integers(160, 256), shape, dtype=np.uint8) for _ in range(7)]
    stats = ImageStats()
    for f in frames:
        stats.add(f)
    got, want = stats.result(), float_image_stats(frames)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def write_clip(path, codec: str, options: dict, n: int = 30, size: int = 64) -> np.ndarray:
    """An MP4 of ``n`` moving gradients; returns its frames decoded in one pass (the reference)."""
    import av

    # SVT-AV1 leaves its caller under SCHED_FIFO 99 when run as root
    with scheduling_kept(), av.open(str(path), "w", format="mp4") as c:
        s = c.add_stream(codec, rate=10)
        s.width = s.height = size
        s.pix_fmt, s.options = "yuv420p", options
        yy, xx = np.mgrid[0:size, 0:size]
        for i in range(n):
            img = np.stack([(xx * 4 + 3 * i) % 256, (yy * 4 + i) % 256, np.full((size, size), i * 37 % 256)], -1)
            c.mux(s.encode(av.VideoFrame.from_ndarray(img.astype(np.uint8), format="rgb24")))
        c.mux(s.encode())
    return _video.decode(path, 0.0, 10, np.arange(n))


@pytest.mark.parametrize(
    "codec, options",
    [
        ("libsvtav1", {"g": "2", "crf": "30", "preset": "12"}),  # lerobot's default codec
        ("libx264", {"g": "12", "bf": "3"}),  # B-frames: decode order differs from presentation
        ("libx265", {"x265-params": "keyint=5:bframes=2:log-level=none"}),  # open GOP: leading frames
    ],
)
def test_reader_frames_in_other_codecs_and_gop_structures(tmp_path, codec, options):
    import av

    if codec not in av.codecs_available:
        pytest.skip(f"no {codec} encoder in this PyAV")
    path = tmp_path / "clip.mp4"
    frames = write_clip(path, codec, options)
    reader = _video.VideoReader(path)
    assert reader.direct
    for idx in index_sets(len(frames), np.random.default_rng(1)):
        np.testing.assert_array_equal(reader.frames(0.0, 10, idx), frames[idx], err_msg=str(idx))
