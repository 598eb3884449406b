"""ALMI (papers/almi): the lower-body task's clip curricula."""

import numpy as np
import pytest

from embody.papers.almi.lower import TRAIN_FAMILIES, AlmiLowerConfig
from embody.robots.motion import FAMILIES
from embody.sims.vec_env import make_env


def lower_env(n=8, **clips):
    cfg = AlmiLowerConfig()
    cfg.randomization.enabled = False
    for k, v in clips.items():
        setattr(cfg.clips, k, v)
    env = make_env("almi-lower", n_envs=n, seed=0, config=cfg)
    env.reset()
    return env


def test_the_upper_body_plays_clips_at_the_curriculum_amplitude():
    env = lower_env()
    task = env.task
    up, q0 = task.upper, task.q0
    clip_frame = task.frames[task.clip, task.frame]
    np.testing.assert_allclose(task.upper_targets()[:, up], q0[up] + 0.1 * (clip_frame - q0[up]))
    task.training = False  # evaluation: the whole library at full amplitude
    np.testing.assert_allclose(task.upper_targets()[:, up], clip_frame)
    assert task.curriculum_levels()["amplitude"] == 1.0 and task.curriculum_levels()["slice"] == 1.0
    held_out = set(FAMILIES) - set(TRAIN_FAMILIES)
    assert held_out and {"boxing", "carry"} <= held_out  # whole families no stage trains on


def test_levels_rise_while_the_legs_survive_and_fall_when_they_do_not():
    env = lower_env(amplitude=0.3, slice=0.3)
    task = env.task
    task.steps[:] = 1000
    task.fell[:] = False
    task.on_reset(np.arange(8))  # eight episodes ended without a fall
    assert task.amplitude == pytest.approx(0.305) and task.slice == pytest.approx(0.305)
    task.steps[:] = 100
    task.fell[:] = True
    task.on_reset(np.arange(8))  # eight falls
    assert task.amplitude == pytest.approx(0.3) and task.slice == pytest.approx(0.3)  # floored at the start level
    assert task.curriculum_levels()["amplitude"] == pytest.approx(0.3)


def test_clips_that_make_the_legs_fall_are_sorted_last_and_drawn_late():
    env = lower_env(slice=0.25)
    task = env.task
    n_clips = len(task.lengths)
    hard = np.arange(0, n_clips, 2)
    task.steps[:] = 50
    for _ in range(20):
        task.clip[:] = task.rng.choice(hard, 8)
        task.fell[:] = True
        task.on_reset(np.arange(8))
    scored = np.flatnonzero(task.difficulty > 0)
    assert scored.size and set(scored) <= set(hard)
    assert set(task.order[-scored.size :]) == set(scored)  # the clips that made the legs fall come last
    drawn = task.draw_clips(2000)
    assert not np.isin(drawn, task.order[int(np.ceil(task.slice * n_clips)) :]).any()  # only the easy slice
    task.training = False
    assert len(np.unique(task.draw_clips(5000))) == n_clips


def test_a_short_run_moves_the_curricula():
    env = lower_env(n=16)
    rng = np.random.default_rng(0)
    for _ in range(60):
        env.step(rng.uniform(-1, 1, (16, 12)))  # random legs fall: the levels stay at the start
    assert env.task.amplitude == pytest.approx(0.1) and env.task.difficulty.max() > 0
