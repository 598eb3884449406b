"""The BEV camera: grayscale frame stacks that slide with every step and branch with the sim's state."""

import numpy as np
import pytest

pytest.importorskip("highway_env", reason="needs the driving extra")

from embody.sims.driving import fast_settings, get_scenario, make_driving_sim  # noqa: E402
from embody.sims.driving.bev import BEVCamera, BEVSettings  # noqa: E402

SETTINGS = BEVSettings(frames=3, size=(64, 16), scale=1.0)


def _camera():
    return BEVCamera(make_driving_sim("highway", fast_settings(get_scenario("highway"))), SETTINGS)


def test_frames_stack_and_slide_with_each_step():
    cam = _camera()
    obs = cam.reset(3)
    assert obs.image.shape == (16, 64, 3) and obs.image.dtype == np.uint8 and SETTINGS.shape() == (3, 16, 64)
    assert (obs.image == obs.image[:, :, :1]).all()  # a fresh stack: the first frame repeated
    centre = obs.image[7:9, 28:36, -1].astype(int)  # the ego's rows: its outline and body against the road
    assert centre.max() - centre.min() >= 15
    frames = [obs.image]
    for _ in range(3):
        frames.append(cam.step(cam.expert_action()).obs.image)
    for prev, now in zip(frames, frames[1:]):
        np.testing.assert_array_equal(now[:, :, :-1], prev[:, :, 1:])
    assert any((a[:, :, -1] != b[:, :, -1]).any() for a, b in zip(frames, frames[1:]))  # the traffic moves
    assert cam.dt == cam.sim.dt  # everything else is the wrapped sim's


def test_restoring_a_state_restores_its_frames():
    cam = _camera()
    cam.reset(4)
    cam.step(cam.expert_action())
    state, before = cam.clone_state(), cam.observe().image
    branch = [cam.step(np.array([2.0, 0.1])).obs.image for _ in range(3)]
    cam.restore_state(state)
    np.testing.assert_array_equal(cam.observe().image, before)
    again = [cam.step(np.array([2.0, 0.1])).obs.image for _ in range(3)]
    for a, b in zip(branch, again):
        np.testing.assert_array_equal(a, b)
