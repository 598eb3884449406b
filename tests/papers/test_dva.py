"""D.VA (papers/dva): the cart-pole's rasterizer is differentiable and draws what the env observes; the gradient
reaches the actor through the dynamics only with the detach, and through the images too without it; the study runs
end to end at tiny scale and refuses a simulator without gradients by name."""

import json
import math

import numpy as np
import pytest
import torch

from embody.papers.dva.raster import CartPoleRaster, rasterize
from embody.policies.shac import SHAC, SHACConfig
from embody.sims.diff_env import DiffEnv
from embody.sims.pixels import DifferentiableFrames
from embody.sims.vec_env import make_env


def test_the_rasterizer_is_differentiable_and_draws_the_pole_where_it_points():
    q = torch.tensor([[0.3, 0.4], [-1.0, 2.5]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q: rasterize(q, 12), (q,))
    # 0.1 m per pixel; the cart at x = 0.05 m, the centre of column 24; row r's centre at z = 3.35 − 0.1 r
    img = rasterize(torch.tensor([[0.05, 0.0], [0.05, math.pi]], dtype=torch.float64), 48)
    pole, background = torch.tensor([128.0, 128.0, 179.0]), torch.tensor([64.0, 77.0, 89.0])
    share = lambda px: float(((px.float() - background) / (pole - background)).mean())  # noqa: E731  0 bg, 1 pole
    assert share(img[0, 18, 24]) > 0.8 and share(img[1, 29, 24]) > 0.8  # z = 1.55 upright, z = 0.45 hanging
    assert abs(share(img[0, 29, 24])) < 0.01  # nothing below an upright pole


def test_the_raster_source_refuses_another_robot():
    with pytest.raises(ValueError, match="cart-pole, not task 'hopper'"):
        CartPoleRaster(make_env("hopper", n_envs=1), 16)


def raster_env(n=3, size=16):
    env = make_env("cartpole-swingup", n_envs=n, seed=0)
    env.task.config.max_episode_steps = 4
    return DiffEnv(CartPoleRaster(env, size, frames=3))


def test_differentiable_frames_are_the_envs_frames_with_gradients():
    denv = raster_env()
    frames = DifferentiableFrames(denv.env)
    x, fresh = denv.reset(), torch.ones(3, dtype=torch.bool)
    action = torch.full((3, 1), 0.7, dtype=torch.float64, requires_grad=True)
    for t in range(6):  # through one reset (episodes of 4 steps)
        f = frames(x, fresh)
        np.testing.assert_array_equal(f.detach().numpy(), denv.obs.astype(np.float64))
        step = denv.step(x, action * (1 if t % 2 else -1))
        x, fresh = step.x, torch.from_numpy(step.terminated | step.truncated)
    (grad,) = torch.autograd.grad(frames(x, fresh).sum(), action)
    assert grad.abs().sum() > 0  # the last frames see where the pushes took the cart


@pytest.mark.parametrize("through", [False, True])
def test_the_detach_decides_whether_the_gradient_passes_through_the_images(through):
    torch.manual_seed(0)
    denv = raster_env()
    cfg = SHACConfig(horizon=3, augment=False)  # SHAC reads the frames it is given (train_shac builds them)
    policy = cfg.policy(denv.observation_size, denv.action_size, list(denv.env.pixel_shape), 5)
    shac = SHAC(denv, policy, cfg, actor_input=DifferentiableFrames(denv.env) if through else None)
    seen = []
    frames = shac.actor_input
    shac.actor_input = lambda x, fresh: seen.append(frames(x, fresh)) or seen[-1]
    loss, _ = shac.rollout()
    loss.backward()
    assert policy.actor[0].weight.grad.abs().sum() > 0  # the analytic gradient reaches the actor either way
    assert all(f.requires_grad == (through and t > 0) for t, f in enumerate(seen))


@pytest.mark.slow
def test_the_tiny_study_runs_end_to_end(tmp_path):
    from embody.papers.dva.study import for_scale, run_study

    cfg = for_scale("tiny")
    cfg.budget_s = 3.0
    result = run_study(cfg, tmp_path, "test", log=lambda m: None)
    arms = {r["arm"]: r for r in result["rows"]}
    assert set(arms) == set(cfg.arms)
    for arm, r in arms.items():
        assert np.isfinite(r["return"]) and r["env_steps"] > 0 and r["peak_rss_mb"] > 0, arm
        assert (tmp_path / "runs" / f"seed0-cartpole-swingup-{arm}" / "eval.json").is_file()
    assert arms["dva"]["grad_norm_mean"] > 0 and arms["sac-pixels"]["grad_norm_mean"] is None
    assert json.loads((tmp_path / "results.json").read_text())["claims"]
    assert (tmp_path / "report.md").is_file() and (tmp_path / "return_curves.png").stat().st_size > 0


def test_the_study_refuses_a_simulator_without_gradients_by_name(tmp_path):
    from embody.papers.dva.study import for_scale, run_study
    from embody.sims.base import UnsupportedTask

    cfg = for_scale("tiny")
    cfg.sim = "pybullet"
    with pytest.raises(UnsupportedTask, match="pybullet.*differentiable"):
        run_study(cfg, tmp_path, "test")
    assert not (tmp_path / "jobs").exists()


def test_a_source_without_differentiable_images_is_refused():
    from embody.sims.base import UnsupportedTask
    from embody.sims.pixels import PixelEnv

    for env in (make_env("cartpole-swingup", n_envs=1), PixelEnv(make_env("cartpole-swingup", n_envs=1), 8)):
        with pytest.raises(UnsupportedTask, match="cannot draw differentiable images"):
            DifferentiableFrames(env)
