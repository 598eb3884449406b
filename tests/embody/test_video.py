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


def test_overlay_writes_the_command_and_reward_terms_on_the_frame():
    from embody.video import draw_overlay, overlay_lines

    info = {"command": [0.5, 0.0, -0.2], "reward": 0.02, "terms": {"alive": 0.003, "torques": -0.004, "contact": 0.001}}
    lines = overlay_lines(info, most_terms=2)
    assert lines == ["command +0.50  +0.00  -0.20", "reward +0.0200", "  torques -0.0040", "  alive +0.0030"]
    frame = np.full((120, 200, 3), 200, dtype=np.uint8)
    out = draw_overlay(frame, lines)
    assert out.shape == frame.shape and (out[:40, :100] != 200).any() and (out[80:, 150:] == 200).all()
    assert draw_overlay(frame, []) is frame  # nothing to say (a task without command or terms, the first frame)


def test_free_standing_robots_stand_on_a_checkerboard_under_two_lights():
    import mujoco

    from embody.robots import get_robot
    from embody.sims.base import SimConfig
    from embody.sims.mujoco.model import build_model

    model, _ = build_model(get_robot("h1_2"), SimConfig())
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert model.geom_matid[floor] >= 0 and model.ntex == 2 and model.nlight >= 2
    fixed, _ = build_model(get_robot("peg_arm"), SimConfig())  # a fixed base keeps its own scene
    assert mujoco.mj_name2id(fixed, mujoco.mjtObj.mjOBJ_TEXTURE, "embody_floor") == -1
