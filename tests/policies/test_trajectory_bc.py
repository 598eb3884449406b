"""Trajectory behavior cloning and the multi-step Q regressor: fit known mappings, rank known
returns, exact checkpoint round trips and clear refusals."""

import json

import numpy as np
import pytest
import torch
from policy_helpers import small_mlp

from embody.policies.checkpoint import CheckpointError, save_checkpoint
from embody.policies.trajectory import (
    TrajectoryBCConfig,
    TrajectoryMLP,
    evaluate_loss,
    load_trajectory_bc,
    save_model,
    split_indices,
    train_trajectory_bc,
)
from embody.policies.value import QConfig, QModel, load_q, save_q, spearman, train_q

O, H, D = 5, 8, 4  # observation size; 8 waypoints of (x, y, heading, speed)
FAST = dict(hidden=[64, 64], epochs=60, batch_size=64, progress=False)


def linear_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = np.random.default_rng(99).normal(size=(O, H * D))
    obs = rng.normal(size=(n, O)) * 2.0 + 1.0
    return obs.astype(np.float32), (obs @ W + 5.0).reshape(n, H, D).astype(np.float32)


def nonlinear_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A curving path: speed and heading depend on the observation through sin/tanh; waypoint
    positions integrate them, so errors compound along the horizon."""
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-1, 1, size=(n, O)).astype(np.float32)
    speed = 10.0 + 3.0 * np.tanh(2 * obs[:, :1]) + obs[:, 1:2] ** 2  # (n, 1)
    yaw_rate = 0.3 * np.sin(3 * obs[:, 2:3]) + 0.1 * obs[:, 3:4] * obs[:, 4:5]
    k = np.arange(1, H + 1)[None] * 0.5  # (1, H) seconds ahead
    heading = yaw_rate * k
    x, y = np.cumsum(speed * 0.5 * np.cos(heading), 1), np.cumsum(speed * 0.5 * np.sin(heading), 1)
    traj = np.stack([x, y, heading, np.broadcast_to(speed, x.shape)], -1)
    return obs, traj.astype(np.float32)


def mse(a: np.ndarray, b: np.ndarray) -> float:
    return float(((a - b) ** 2).mean())


@pytest.fixture(scope="module")
def nonlinear_model():
    torch.set_num_threads(1)
    obs, traj = nonlinear_data(1500, seed=0)
    return train_trajectory_bc(obs, traj, TrajectoryBCConfig(**{**FAST, "epochs": 100}, patience=15)), (obs, traj)


def test_bc_fits_a_linear_map():
    obs, traj = linear_data(800, seed=0)
    model = train_trajectory_bc(obs, traj, TrajectoryBCConfig(**FAST))
    test_obs, test_traj = linear_data(200, seed=1)
    pred = model.predict(test_obs)
    assert pred.shape == (200, H, D) and pred.dtype == np.float32
    baseline = mse(traj.mean(0), test_traj)  # predicting the training mean
    assert mse(pred, test_traj) < 0.01 * baseline
    assert model.summary["val_r2"] > 0.99


def test_bc_fits_a_nonlinear_map_and_beats_the_mean(nonlinear_model):
    model, (obs, traj) = nonlinear_model
    test_obs, test_traj = nonlinear_data(300, seed=1)
    pred = model.predict(test_obs)
    per_dim = ((pred - test_traj) ** 2).mean((0, 1))
    baseline = ((traj.mean(0) - test_traj) ** 2).mean((0, 1))
    assert (per_dim < 0.05 * baseline).all(), (per_dim, baseline)  # each of x, y, heading, speed
    final_error = np.linalg.norm(pred[:, -1, :2] - test_traj[:, -1, :2], axis=-1).mean()
    assert final_error < 0.15 * np.linalg.norm(traj[:, -1, :2].mean(0) - test_traj[:, -1, :2], axis=-1).mean()


def test_bc_history_early_stop_and_best_weights(nonlinear_model):
    model, (obs, traj) = nonlinear_model
    hist, summary = model.history, model.summary
    assert 1 <= len(hist) <= 100 and [h["epoch"] for h in hist] == list(range(1, len(hist) + 1))
    assert hist[-1]["val_loss"] < 0.2 * hist[0]["val_loss"]
    assert {"train_loss", "val_loss", "time_s"} <= hist[0].keys()
    assert summary["val_loss"] == min(h["val_loss"] for h in hist) and len(summary["val_rmse"]) == D
    # the restored weights are those of the best validation epoch
    _, val_idx = split_indices(len(obs), 0.1, 0)
    data = (torch.as_tensor(obs), torch.as_tensor(traj))
    assert evaluate_loss(model, data, val_idx) == pytest.approx(summary["val_loss"], rel=1e-4)
    # targets that do not depend on the observation: nothing generalizes, so it stops early
    noise = np.random.default_rng(3).normal(size=traj[:100].shape).astype(np.float32)
    stopped = train_trajectory_bc(obs[:100], noise, TrajectoryBCConfig(**{**FAST, "epochs": 200}, patience=5))
    assert len(stopped.history) == stopped.summary["best_epoch"] + 5 < 200
    # with no validation split and no patience every epoch runs
    short = train_trajectory_bc(obs[:200], traj[:200], TrajectoryBCConfig(**{**FAST, "epochs": 3}, val_fraction=0.0))
    assert len(short.history) == 3


def test_bc_tensor_io_policy_and_bad_input(nonlinear_model):
    model, (obs, _) = nonlinear_model
    out = model.predict(torch.as_tensor(obs[:3]))
    assert isinstance(out, torch.Tensor) and out.shape == (3, H, D)
    torch.testing.assert_close(model.act(torch.as_tensor(obs[:3])), out.reshape(3, H * D))
    with pytest.raises(ValueError, match="traj"):
        train_trajectory_bc(obs[:10], np.zeros((9, H, D)))
    with pytest.raises(ValueError, match="NaN"):
        train_trajectory_bc(obs[:10], np.full((10, H, D), np.nan))


def test_bc_round_trip_is_exact(tmp_path, nonlinear_model):
    model, (obs, _) = nonlinear_model
    save_model(tmp_path / "bc", model, {"dataset": "toy"})
    assert sorted(p.name for p in (tmp_path / "bc").iterdir()) == ["checkpoint.json", "model.safetensors"]
    loaded = load_trajectory_bc(tmp_path / "bc")
    assert isinstance(loaded, TrajectoryMLP) and loaded.config == model.config
    want, got = model.state_dict(), loaded.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0, msg=k)
    np.testing.assert_array_equal(loaded.predict(obs[:50]), model.predict(obs[:50]))
    assert loaded.history == model.history and loaded.summary == model.summary


def test_damaged_or_foreign_checkpoints_name_the_file(tmp_path, nonlinear_model):
    model, _ = nonlinear_model
    path = save_model(tmp_path / "bc", model)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    with pytest.raises(CheckpointError, match=str(weights)):
        load_trajectory_bc(path)
    (path / "checkpoint.json").write_text('{"format": "embody.pol')  # truncated JSON
    with pytest.raises(CheckpointError, match=str(path / "checkpoint.json")):
        load_trajectory_bc(path)
    (path / "checkpoint.json").write_text(json.dumps({"format": "someone.else"}))
    with pytest.raises(CheckpointError, match="not an embody"):
        load_trajectory_bc(path)
    with pytest.raises(CheckpointError, match=str(tmp_path / "missing")):
        load_trajectory_bc(tmp_path / "missing")
    (tmp_path / "weights.pt").write_bytes(b"\x80\x04not a checkpoint")  # a foreign file, not a directory
    with pytest.raises(CheckpointError, match=str(tmp_path / "weights.pt")):
        load_trajectory_bc(tmp_path / "weights.pt")
    # a valid checkpoint of another kind: a PPO policy, a BC model read as a Q model
    save_checkpoint(tmp_path / "ppo", small_mlp(3, 2), {"task": "toy"})
    foreign = f"{tmp_path / 'ppo'} is a checkpoint of ActorCritic, not of TrajectoryMLP"
    with pytest.raises(CheckpointError, match=foreign):
        load_trajectory_bc(tmp_path / "ppo")
    save_model(tmp_path / "bc2", model)
    with pytest.raises(CheckpointError, match="not of QModel"):
        load_q(tmp_path / "bc2")


# -- the multi-step Q regressor ---------------------------------------------------------------------
QH, QD = 4, 2
G = np.random.default_rng(7).normal(size=(3, QH * QD)).astype(np.float32) * 0.7


def q_data(n: int, k: int | None, seed: int):
    """Trajectories scattered around a preferred one g(obs); return = -squared distance to it."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    target = (obs @ G).reshape(n, *([1] if k else []), QH, QD)
    shape = (n, k, QH, QD) if k else (n, QH, QD)
    scale = rng.uniform(0.1, 1.0, size=shape[:-2] + (1, 1))
    traj = (target + rng.normal(size=shape) * scale).astype(np.float32)
    return obs, traj, -((traj - target) ** 2).sum((-1, -2)).astype(np.float32)


@pytest.fixture(scope="module")
def q_model():
    torch.set_num_threads(1)
    obs, traj, ret = q_data(1500, None, seed=0)
    return train_q(obs, traj, ret, QConfig(hidden=[64, 64], epochs=80, batch_size=128, progress=False))


def test_q_ranks_candidates_by_return(q_model):
    obs, cands, ret = q_data(50, 8, seed=1)
    scores = q_model.score(obs, cands)
    assert scores.shape == (50, 8)
    rho = spearman(torch.as_tensor(scores), torch.as_tensor(ret))
    assert rho.mean() > 0.9 and (rho > 0.5).all()
    assert (scores.argmax(1) == ret.argmax(1)).mean() > 0.8
    np.testing.assert_array_equal(q_model.best(obs, cands), cands[np.arange(50), scores.argmax(1)])
    assert q_model.summary["val_spearman"] > 0.95


def test_spearman():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]])
    b = torch.tensor([10.0, 20.0, 30.0, 400.0]).expand(2, 4)
    torch.testing.assert_close(spearman(a, b), torch.tensor([1.0, -1.0]))


def test_q_round_trip_is_exact(tmp_path, q_model):
    obs, cands, _ = q_data(5, 3, seed=2)
    loaded = load_q(save_q(tmp_path / "q", q_model))
    assert isinstance(loaded, QModel)
    for k, v in q_model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v, rtol=0, atol=0, msg=k)
    np.testing.assert_array_equal(loaded.score(obs, cands), q_model.score(obs, cands))
    with pytest.raises(ValueError, match="expected obs"):
        q_model.score(obs, cands[:, :, :2])


def test_q_ensemble_is_pessimistic_where_its_members_disagree(tmp_path):
    obs, traj, ret = q_data(1500, None, seed=0)
    cfg = QConfig(hidden=[64, 64], members=4, pessimism=1.0, epochs=60, batch_size=128, progress=False)
    q = train_q(obs, traj, ret, cfg)
    test_obs, cands, test_ret = q_data(50, 8, seed=1)
    mean, pess = q.score(test_obs, cands, pessimism=0.0), q.score(test_obs, cands)
    with torch.no_grad():
        spread = q.members(
            torch.as_tensor(test_obs).repeat_interleave(8, 0), torch.as_tensor(cands).reshape(-1, QH, QD)
        )
    assert spread.shape == (4, 400) and (spread.std(0) > 0).all()  # independently initialized members
    np.testing.assert_allclose(mean - pess, spread.std(0).reshape(50, 8).numpy(), rtol=1e-4, atol=1e-5)
    assert spearman(torch.as_tensor(mean), torch.as_tensor(test_ret)).mean() > 0.9
    far = cands * 20.0  # far outside the training trajectories: the members extrapolate differently
    gap = q.score(test_obs, far, pessimism=0.0) - q.score(test_obs, far)
    assert gap.mean() > (mean - pess).mean()
    loaded = load_q(save_q(tmp_path / "q", q))
    np.testing.assert_array_equal(loaded.score(test_obs, cands), pess)


def test_bc_with_an_image_learns_from_the_pixels(tmp_path):
    """The target depends only on where a bright blob sits in the image: the CNN has to read it."""
    rng = np.random.default_rng(0)
    n, shape = 600, (2, 8, 32)
    col = rng.integers(0, 32, size=n)
    img = np.zeros((n, *shape), dtype=np.float32)
    img[np.arange(n), :, 3:5, col] = 255.0
    vec = rng.normal(size=(n, 2)).astype(np.float32)
    obs = np.concatenate([vec, img.reshape(n, -1)], 1)
    traj = np.stack([col / 32.0, vec[:, 0]], 1)[:, None, :].repeat(3, 1).astype(np.float32)
    cfg = TrajectoryBCConfig(hidden=[64, 64], epochs=60, batch_size=64, image=shape, image_features=16, progress=False)
    model = train_trajectory_bc(obs, traj, cfg)
    assert model.summary["val_r2"] > 0.8
    feats = model.features(obs[:5])
    assert feats.shape == (5, 2 + 16)
    np.testing.assert_array_equal(feats[:, :2], obs[:5, :2])
    loaded = load_trajectory_bc(save_model(tmp_path / "bc", model))
    np.testing.assert_array_equal(loaded.predict(obs[:5]), model.predict(obs[:5]))
    with pytest.raises(ValueError, match="needs more than"):
        TrajectoryMLP(100, 3, 2, TrajectoryBCConfig(image=shape))
