import numpy as np
import pytest

from embody.video import VideoWriter, read_frames


def test_video_round_trip_with_short_gop(tmp_path):
    path = tmp_path / "out.mp4"
    frames = np.zeros((6, 48, 64, 3), dtype=np.uint8)
    for i in range(6):
        frames[i, :, i * 10 : i * 10 + 10] = 255
    with VideoWriter(path, fps=25, gop=2) as v:
        for f in frames:
            v.write(f)
    back = read_frames(path)
    assert back.shape == frames.shape
    assert np.abs(back.astype(int) - frames).mean() < 8
    import av

    with av.open(str(path)) as c:
        keys = [p.is_keyframe for p in c.demux(video=0) if p.size]
    assert sum(keys) >= 3  # a keyframe at least every 2 frames


def test_failed_write_leaves_no_file(tmp_path):
    path = tmp_path / "bad.mp4"
    with pytest.raises(ValueError):
        with VideoWriter(path, fps=10) as v:
            v.write(np.zeros((8, 8, 3), dtype=np.uint8))
            v.write(np.zeros((8, 8), dtype=np.uint8))
    assert list(tmp_path.iterdir()) == []
