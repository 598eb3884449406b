"""Decision Transformer on the point-mass goal task of test_offline_rl: episodes from a good or a bad behavior
policy; conditioned on a high return it acts like the good one, on a low return like the bad one."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_offline_rl import good, step  # noqa: E402

from embody.policies.checkpoint import CheckpointError  # noqa: E402
from embody.policies.decision_transformer import (  # noqa: E402
    DecisionTransformerConfig,
    episodes_from_transitions,
    load_decision_transformer,
    save_decision_transformer,
    train_decision_transformer,
)

STEPS = 8


def episodes(n: int, seed: int) -> list:
    """``n`` episodes of STEPS steps, each from the good or the bad policy (a coin flip per episode), noisy."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x, sign, rows = rng.uniform(-1, 1, 2).astype(np.float32), rng.choice([-1.0, 1.0]), []
        for _ in range(STEPS):
            a = np.clip(sign * good(x[None])[0] + rng.normal(0, 0.1, 2), -2, 2).astype(np.float32)
            x2, r, _ = step(x[None], a[None])
            rows.append((x, a, r[0]))
            x = x2[0]
        out.append(tuple(np.array(c) for c in zip(*rows)))
    return out


def rollout(model, target: float, n: int = 64) -> float:
    """Mean return of the DT asked for ``target``, from fixed starts, rewards fed back."""
    model.config.target_return = target
    model.reset()
    x = np.random.default_rng(7).uniform(-1, 1, (n, 2)).astype(np.float32)
    total = np.zeros(n)
    for _ in range(STEPS):
        x, r, _ = step(x, model.act(x))
        model.reward(r)
        total += r
    return float(total.mean())


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    cfg = DecisionTransformerConfig(
        context=4,
        embed=32,
        layers=1,
        steps=1500,
        batch_size=64,
        lr=1e-3,
        warmup_steps=100,
        dropout=0.0,
        max_episode_steps=STEPS,
        progress=False,
    )
    return train_decision_transformer(episodes(400, seed=0), cfg)


def test_the_return_asked_for_selects_the_behavior(model):
    data = episodes(400, seed=0)
    returns = np.array([e[2].sum() for e in data])
    high, low = np.percentile(returns, 95), np.percentile(returns, 5)
    good_return, bad_return = rollout(model, high), rollout(model, low)  # observed −0.73 and −15.4
    assert good_return > bad_return + 3.0, (good_return, bad_return)
    assert good_return > np.mean(returns[returns > np.median(returns)]) - 1.0  # about as good as the good episodes


def test_checkpoints_round_trip_and_foreign_ones_are_refused(model, tmp_path):
    save_decision_transformer(tmp_path / "dt", model, {"data": "point-mass"})
    loaded = load_decision_transformer(tmp_path / "dt")
    x = np.random.default_rng(1).uniform(-1, 1, (5, 2)).astype(np.float32)
    model.reset(), loaded.reset()
    loaded.config.target_return = model.config.target_return
    assert np.array_equal(loaded.act(x), model.act(x))
    from embody.policies.offline import OfflineRLConfig, save_offline, train_offline

    agent = train_offline(x, x, np.zeros(5), x, np.zeros(5), OfflineRLConfig(steps=2, batch_size=2, progress=False))
    save_offline(tmp_path / "offline", agent)
    with pytest.raises(CheckpointError, match="DecisionTransformer"):
        load_decision_transformer(tmp_path / "offline")


def test_transitions_split_into_episodes_and_bad_input_is_refused():
    obs, acts, rews = np.arange(10.0)[:, None], np.zeros((10, 1)), np.ones(10)
    dones = np.zeros(10, bool)
    dones[[3, 9]] = True
    parts = episodes_from_transitions(obs, acts, rews, dones)
    assert [len(p[0]) for p in parts] == [4, 6]
    with pytest.raises(ValueError, match="no episodes"):
        train_decision_transformer([])
    with pytest.raises(ValueError, match="NaN"):
        train_decision_transformer([(np.full((3, 2), np.nan), np.zeros((3, 1)), np.zeros(3))])
