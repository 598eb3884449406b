"""The conditional diffusion model: a bimodal distribution learned per condition, DDIM
determinism and shapes, the residual adapter over a BC base plan (scored by the Q model), exact
checkpoint round trips."""

import numpy as np
import pytest
import torch

from embody.policies.checkpoint import CheckpointError
from embody.policies.diffusion import (
    DiffusionConfig,
    DiffusionModel,
    alpha_bars,
    load_diffusion,
    plan_condition,
    sample_plans,
    save_diffusion,
    train_diffusion,
)
from embody.policies.trajectory import TrajectoryBCConfig, train_trajectory_bc
from embody.policies.value import QConfig, train_q

SMALL = dict(hidden=[128, 128, 128], timesteps=50, batch_size=128, progress=False)


def modes(c: np.ndarray) -> np.ndarray:
    """c (B, 1) → the two modes (B, 2, 2): (c, 1) and (-c, -1)."""
    return np.stack([np.concatenate([c, np.ones_like(c)], -1), np.concatenate([-c, -np.ones_like(c)], -1)], 1)


@pytest.fixture(scope="module")
def bimodal():
    """x ∈ R² half at each mode (± 0.1 noise), the modes moving with the scalar condition c ∈ [-1, 1]."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    c = rng.uniform(-1, 1, size=(2000, 1)).astype(np.float32)
    pick = rng.integers(0, 2, size=2000)
    x = modes(c)[np.arange(2000), pick] + rng.normal(size=(2000, 2)) * 0.1
    return train_diffusion(c, x.astype(np.float32), DiffusionConfig(**SMALL, epochs=100))


@pytest.mark.parametrize("c", [-0.8, 0.0, 0.5])
def test_samples_land_on_both_modes_of_the_condition(bimodal, c):
    samples = bimodal.sample(np.array([[c]], np.float32), 400, ddim_steps=10, eta=0.0, generator=0)[0]
    dist = np.linalg.norm(samples[:, None] - modes(np.array([[c]], np.float32))[0][None], axis=-1)  # (400, 2)
    near, which = dist.min(1), dist.argmin(1)
    assert (near < 0.3).mean() > 0.75  # a perfect model: 0.99 (noise 0.1 per axis)
    assert 0.3 < (which == 0).mean() < 0.7  # both modes, neither dropped
    close = near < 0.3
    assert abs(samples[close & (which == 0), 0].mean() - c) < 0.1  # the modes follow the condition
    assert abs(samples[close & (which == 1), 0].mean() + c) < 0.1


def test_ddim_is_deterministic_for_a_seed_and_batched(bimodal):
    cond = np.array([[-0.5], [0.2], [0.9]], np.float32)
    a = bimodal.sample(cond, 5, generator=123)
    assert a.shape == (3, 5, 2) and a.dtype == np.float32
    np.testing.assert_array_equal(a, bimodal.sample(cond, 5, generator=torch.Generator().manual_seed(123)))
    assert not np.allclose(a, bimodal.sample(cond, 5, generator=124))
    stochastic = bimodal.sample(cond, 5, eta=1.0, generator=123)
    np.testing.assert_array_equal(stochastic, bimodal.sample(cond, 5, eta=1.0, generator=123))
    assert not np.allclose(stochastic, a)
    t = bimodal.sample(torch.as_tensor(cond), 2, ddim_steps=3, generator=0)
    assert isinstance(t, torch.Tensor) and t.shape == (3, 2, 2)
    assert bimodal.sample(cond, 4, ddim_steps=1, generator=0).shape == (3, 4, 2)
    with pytest.raises(ValueError, match="ddim_steps"):
        bimodal.sample(cond, 2, ddim_steps=51)
    with pytest.raises(ValueError, match="cond"):
        bimodal.sample(np.zeros((3, 2), np.float32), 2)


def test_trajectory_shaped_samples_and_schedules():
    rng = np.random.default_rng(0)
    cond, x = rng.normal(size=(64, 3)).astype(np.float32), rng.normal(size=(64, 4, 2)).astype(np.float32)
    model = train_diffusion(
        cond, x, DiffusionConfig(hidden=[16], timesteps=20, ddim_steps=5, epochs=2, schedule="linear", progress=False)
    )
    assert model.sample(cond[:2], 3, generator=0).shape == (2, 3, 4, 2)
    assert len(model.history) == 2 and model.summary["epochs"] == 2
    for schedule in ("cosine", "linear"):
        ab = alpha_bars(100, schedule)
        assert (ab[1:] < ab[:-1]).all() and 0.99 < ab[0] < 1 and ab[-1] < 1e-3
    with pytest.raises(ValueError, match="unknown beta schedule"):
        alpha_bars(10, "quadratic")


def test_round_trip_is_exact_and_damage_names_the_file(tmp_path, bimodal):
    path = save_diffusion(tmp_path / "diffusion", bimodal, {"note": "bimodal"})
    loaded = load_diffusion(path)
    assert isinstance(loaded, DiffusionModel) and loaded.config == bimodal.config
    for k, v in bimodal.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v, rtol=0, atol=0, msg=k)
    cond = np.array([[0.3], [-0.7]], np.float32)
    np.testing.assert_array_equal(loaded.sample(cond, 8, generator=5), bimodal.sample(cond, 8, generator=5))
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-7])
    with pytest.raises(CheckpointError, match=str(weights)):
        load_diffusion(path)


# -- the residual adapter over a BC base plan, with the Q model picking a candidate -----------------
H, D = 4, 2
LANE = np.stack([np.zeros(H), 0.4 * np.arange(1, H + 1)], -1).astype(np.float32)  # a lateral shift (H, D)


def driving(n: int, seed: int):
    """obs (n, 2) → f(obs) (n, H, D), and expert plans that shift one lane left or right of it."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, size=(n, 2)).astype(np.float32)
    k = np.arange(1, H + 1)[None]
    center = np.stack([k * (1 + 0.5 * obs[:, :1]), k * 0.3 * obs[:, 1:2]], -1).astype(np.float32)
    side = rng.choice([-1.0, 1.0], size=(n, 1, 1)).astype(np.float32)
    expert = center + side * LANE + rng.normal(size=center.shape).astype(np.float32) * 0.03
    return obs, center, expert


def test_residual_adapter_recovers_the_modes_bc_averages_and_q_picks_one():
    torch.set_num_threads(1)
    obs, center, expert = driving(1500, seed=0)
    base = train_trajectory_bc(
        obs, expert, TrajectoryBCConfig(hidden=[64, 64], epochs=40, batch_size=64, progress=False)
    )
    base_plan = base.predict(obs)
    adapter = train_diffusion(plan_condition(obs, base_plan), expert - base_plan, DiffusionConfig(**SMALL, epochs=100))

    test_obs, test_center, _ = driving(100, seed=1)
    test_base = base.predict(test_obs)
    left, right = test_center + LANE, test_center - LANE
    final = lambda plans, target: np.linalg.norm(plans[..., -1, :] - target[:, None, -1, :], axis=-1)
    # BC regresses to the mean of the two lanes: far from both
    assert final(test_base[:, None], left).min() > 1.0 and final(test_base[:, None], right).min() > 1.0
    cands = sample_plans(adapter, test_obs, test_base, 16, generator=0)  # (100, 16, H, D)
    assert cands.shape == (100, 16, H, D)
    d_left, d_right = final(cands, left), final(cands, right)
    assert (np.minimum(d_left, d_right) < 0.3).mean() > 0.8
    on_left = (d_left < d_right).mean(1)  # per observation: the share of candidates in the left lane
    assert ((on_left > 0) & (on_left < 1)).mean() > 0.8  # both lanes proposed for most observations

    # the Q model, trained on recorded plans with return = -(squared distance to the left lane)
    rng = np.random.default_rng(2)
    q_traj = expert + rng.normal(size=expert.shape).astype(np.float32) * rng.uniform(0, 0.3, (len(expert), 1, 1))
    q_ret = -((q_traj - (center + LANE)) ** 2).sum((1, 2))
    q = train_q(obs, q_traj, q_ret, QConfig(hidden=[64, 64], epochs=40, batch_size=128, progress=False))
    chosen = q.best(test_obs, cands)  # (100, H, D)
    d_left, d_right = final(chosen[:, None], left)[:, 0], final(chosen[:, None], right)[:, 0]
    assert (d_left < d_right).mean() > 0.95 and np.median(d_left) < 0.3
