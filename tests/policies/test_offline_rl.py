"""Offline RL (TD3+BC, IQL, CQL) on a 2-D point-mass goal task whose dataset mixes a good and a bad
behavior policy: both recover the good one where behavior cloning averages the two into
standing still; exact checkpoint round trips, clear refusals of bad input, seeded runs.

The task: position x in [-1.5, 1.5]², a velocity command a in [-2, 2]², x' = x + 0.25·a,
reward -|x'|, done when |x'| < 0.1. The good policy a = clip(-4x) reaches the goal in one or
two steps; the bad one a = clip(+4x) flees it. Mixed 50/50 per transition, the mean action is
0 in every state, so BC learns to stay put.
"""

import numpy as np
import pytest
import torch

from embody.policies.checkpoint import CheckpointError
from embody.policies.offline import OfflineAgent, OfflineRLConfig, load_offline, save_offline, train_offline
from embody.policies.trajectory import TrajectoryMLP, load_trajectory_bc, save_model

LIMIT, DT = 2.0, 0.25
FAST = dict(hidden=[64, 64], steps=1000, batch_size=128, gamma=0.9, lr=1e-3, log_every=250, progress=False)


def step(x: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true dynamics: x (B, 2), a (B, 2) → x' (B, 2), reward (B,), done (B,)."""
    x2 = np.clip(x + DT * np.clip(a, -LIMIT, LIMIT), -1.5, 1.5).astype(np.float32)
    dist = np.linalg.norm(x2, axis=-1)
    return x2, (-dist).astype(np.float32), dist < 0.1


def good(x: np.ndarray) -> np.ndarray:
    return np.clip(-4 * x, -LIMIT, LIMIT)


def mixed_dataset(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """(obs, actions, rewards, next_obs, dones): states spread over the arena, each action from
    the good or the bad policy by a coin flip, plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.2, 1.2, (n, 2)).astype(np.float32)
    sign = np.where(rng.random((n, 1)) < 0.5, 1.0, -1.0)
    a = np.clip(sign * good(x) + rng.normal(0, 0.2, (n, 2)), -LIMIT, LIMIT).astype(np.float32)
    x2, r, done = step(x, a)
    return x, a, r, x2, done


def rollout_return(policy, steps: int = 8, n: int = 256) -> float:
    """Mean undiscounted return of ``policy`` (B, 2) → (B, 2) from fixed random starts."""
    x = np.random.default_rng(123).uniform(-1, 1, (n, 2)).astype(np.float32)
    total = np.zeros(n)
    for _ in range(steps):
        x, r, _ = step(x, policy(x))
        total += r
    return float(total.mean())


TEST_STATES = np.random.default_rng(5).uniform(-1, 1, (200, 2)).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    return mixed_dataset(4000, seed=0)


@pytest.fixture(scope="module")
def agents(data):
    """td3bc (α 2.5), iql, cql and bc (the actor's MSE to the data, no critics)."""
    torch.set_num_threads(1)
    runs = {
        "td3bc": dict(algo="td3bc"),
        "iql": dict(algo="iql"),
        "cql": dict(algo="cql", cql_samples=4),
        "bc": dict(algo="bc"),
    }
    return {k: train_offline(*data, OfflineRLConfig(**FAST, **kw)) for k, kw in runs.items()}


def test_td3bc_iql_and_cql_recover_the_good_policy_bc_averages_away(agents):
    zero = rollout_return(lambda x: np.zeros_like(x))  # the data's mean action in every state
    best = rollout_return(good)  # the good behavior policy alone
    returns = {k: rollout_return(agent.act) for k, agent in agents.items()}
    # observed (seeds 0-2): zero -6.17, good -0.22; bc -5.9..-6.5, td3bc -0.32..-0.44, iql -0.34..-0.39;
    # cql (10 samples, seeds 0-1) -0.52..-0.56
    assert best > -0.3 and zero < -6.0
    assert abs(returns["bc"] - zero) < 0.6, returns
    for algo in ("td3bc", "iql", "cql"):
        closed = (returns[algo] - returns["bc"]) / (best - returns["bc"])  # fraction of the gap closed
        assert closed > 0.8, (algo, returns, closed)
        dist = np.linalg.norm(agents[algo].act(TEST_STATES) - good(TEST_STATES), axis=-1).mean()
        assert dist < 0.4, (algo, dist)  # observed 0.10-0.15; BC's is 2.2


def test_q_ranks_the_good_action_above_the_bad_one(agents):
    for algo in ("td3bc", "iql"):
        agent = agents[algo]
        q_good = agent.q_value(TEST_STATES, good(TEST_STATES))
        q_bad = agent.q_value(TEST_STATES, -good(TEST_STATES))
        assert q_good.shape == (200,) and (q_good > q_bad).mean() > 0.95, algo
        # γ 0.9, rewards in [-2.1, 0]: Q of the good action lies near -|x'| ≈ 0, of the bad one well below
        assert -1.0 < q_good.mean() < 0.0 and q_bad.mean() < q_good.mean() - 1.0, (algo, q_good.mean(), q_bad.mean())


def test_cql_ranks_actions_and_is_conservative(agents):
    """CQL's penalty pushes Q down, most on actions the data lacks: it still ranks the good action above the
    bad one, and its Q of the good action lies below TD3+BC's (observed: −3.1 vs −0.3; ranking 0.89–0.93)."""
    cql, td3bc = agents["cql"], agents["td3bc"]
    q_good, q_bad = cql.q_value(TEST_STATES, good(TEST_STATES)), cql.q_value(TEST_STATES, -good(TEST_STATES))
    assert (q_good > q_bad).mean() > 0.8 and q_good.mean() < td3bc.q_value(TEST_STATES, good(TEST_STATES)).mean()
    assert cql.history[-1]["cql_penalty"] > 0  # log-sum-exp over actions above the data's Q


@pytest.mark.parametrize("algo", ["td3bc", "iql", "cql"])
def test_dones_stop_bootstrapping(algo):
    """Reward 1 everywhere: Q → 1 when every transition ends the episode, 1/(1-γ) = 2 when none does."""
    rng = np.random.default_rng(0)
    obs, next_obs = rng.normal(size=(2, 500, 3)).astype(np.float32)
    actions, rewards = rng.uniform(-1, 1, (500, 2)).astype(np.float32), np.ones(500, np.float32)
    cfg = OfflineRLConfig(**{**FAST, "hidden": [32, 32], "steps": 500, "gamma": 0.5, "tau": 0.05}, algo=algo)
    for dones, expected in ((np.ones(500, bool), 1.0), (np.zeros(500, bool), 2.0)):
        q = train_offline(obs, actions, rewards, next_obs, dones, cfg).q_value(obs[:100], actions[:100])
        assert abs(q.mean() - expected) < 0.15 * expected, (algo, expected, q.mean())  # observed 0.96, 1.86-1.96


def test_alpha_trades_bc_against_q_and_iql_needs_its_advantage_weights(data, agents):
    # BC, and TD3+BC with α → 0, give the mean of the two modes, i.e. standing still
    assert np.abs(agents["bc"].act(TEST_STATES)).mean() < 0.2
    zero_alpha = train_offline(*data, OfflineRLConfig(**FAST, alpha=0.0))
    assert np.abs(zero_alpha.act(TEST_STATES)).mean() < 0.2
    mid = train_offline(*data, OfflineRLConfig(**FAST, alpha=0.5))
    ret = {
        "bc": rollout_return(agents["bc"].act),
        "mid": rollout_return(mid.act),
        "td3bc": rollout_return(agents["td3bc"].act),
    }
    # observed (seeds 0-2): α 0 → -5.9..-6.5, α 0.5 → -2.0..-2.5, α 2.5 → -0.32..-0.44
    # (the policy's distance to the good action: 2.2, 1.6-1.7, 0.14-0.16)
    assert ret["bc"] + 1.5 < ret["mid"] < ret["td3bc"] - 0.8, ret
    assert agents["bc"].summary["bc_mse"] < mid.summary["bc_mse"] < agents["td3bc"].summary["bc_mse"]
    # IQL with β 0 weighs every sample alike: BC again
    flat = train_offline(*data, OfflineRLConfig(**FAST, algo="iql", beta=0.0))
    assert rollout_return(flat.act) < ret["bc"] + 0.6 and np.abs(flat.act(TEST_STATES)).mean() < 0.2


def test_history_summary_and_state(agents):
    for algo, agent in agents.items():
        steps = [h["step"] for h in agent.history]
        assert steps == [250, 500, 750, 1000], algo
        assert agent.summary["algo"] == agent.config.algo and agent.summary["steps"] == 1000
        if algo == "bc":
            assert agent.history[-1]["actor_loss"] < agent.history[0]["actor_loss"]
            assert agent.critic1 is None and "q_data_mean" not in agent.summary
            continue
        assert {"critic_loss", "actor_loss", "q_mean", "time_s"} <= agent.history[0].keys()
        assert agent.history[-1]["critic_loss"] < agent.history[0]["critic_loss"]
    keys = agents["iql"].state_dict().keys()
    assert {"obs_norm.mean", "obs_norm.var", "action_low", "action_high"} <= keys
    assert any(k.startswith("value.") for k in keys)
    assert not any(k.startswith("value.") for k in agents["td3bc"].state_dict())  # TD3+BC has no V
    assert all(any(k.startswith(f"{net}.") for k in keys) for net in ("actor", "critic1", "critic2"))


def test_act_shapes_units_and_bounds(data, agents):
    agent = agents["td3bc"]
    single = agent.act(TEST_STATES[0])
    assert single.shape == (2,) and np.allclose(single, agent.act(TEST_STATES[:1])[0])
    out = agent.act(torch.as_tensor(TEST_STATES[:3]))
    assert isinstance(out, torch.Tensor) and out.shape == (3, 2)
    far = agent.act(np.full((4, 2), 50.0, np.float32))  # far outside the data: still within the bounds
    low, high = data[1].min(0), data[1].max(0)
    assert (far >= low - 1e-5).all() and (far <= high + 1e-5).all()
    # explicit bounds wider than the data: the agent keeps them, and acts in the same units
    wide = train_offline(*data, OfflineRLConfig(**{**FAST, "steps": 5}), action_low=-4.0, action_high=[4.0, 4.0])
    assert wide.action_low.tolist() == [-4.0, -4.0] and wide.action_high.tolist() == [4.0, 4.0]
    torch.testing.assert_close(wide.unscale(wide.scale(torch.as_tensor(data[1][:5]))), torch.as_tensor(data[1][:5]))
    # a constant action dimension (e.g. a steering never used) is acted as that constant
    const = data[1].copy()
    const[:, 1] = 0.5
    flat = train_offline(data[0], const, *data[2:], OfflineRLConfig(**{**FAST, "steps": 5}))
    assert (flat.act(TEST_STATES)[:, 1] == 0.5).all()
    with pytest.raises(ValueError, match="actions fall outside"):
        train_offline(*data, OfflineRLConfig(**FAST), action_low=-1.0, action_high=1.0)


def test_round_trip_is_exact_and_foreign_checkpoints_are_refused(tmp_path, agents):
    for algo in ("td3bc", "iql", "cql", "bc"):
        agent = agents[algo]
        save_offline(tmp_path / algo, agent, {"dataset": "point-mass"})
        loaded = load_offline(tmp_path / algo)
        assert isinstance(loaded, OfflineAgent) and loaded.config == agent.config
        assert np.array_equal(loaded.act(TEST_STATES), agent.act(TEST_STATES))
        acts = good(TEST_STATES)
        if algo == "bc":
            with pytest.raises(ValueError, match="no critics"):
                loaded.q_value(TEST_STATES, acts)
            continue
        assert np.array_equal(loaded.q_value(TEST_STATES, acts), agent.q_value(TEST_STATES, acts))
        assert loaded.history == agent.history and loaded.summary == agent.summary
    save_model(tmp_path / "traj", TrajectoryMLP(2, 4, 2))
    with pytest.raises(CheckpointError, match="TrajectoryMLP, not of OfflineAgent"):
        load_offline(tmp_path / "traj")
    with pytest.raises(CheckpointError, match="OfflineAgent"):
        load_trajectory_bc(tmp_path / "td3bc")


def test_bad_input_names_the_array(data):
    obs, actions, rewards, next_obs, dones = data
    cfg = OfflineRLConfig(**{**FAST, "steps": 2})
    cases = [
        ((obs, actions, rewards[:-1], next_obs, dones), "rewards has 3999 rows, expected 4000"),
        ((obs, actions[:10], rewards, next_obs, dones), "actions has 10 rows"),
        ((obs, actions, np.where(np.arange(4000) == 7, np.nan, rewards), next_obs, dones), "rewards holds NaN"),
        ((obs, actions, rewards, np.full_like(next_obs, np.inf), dones), "next_obs holds NaN or infinite"),
        ((obs[:0], actions[:0], rewards[:0], next_obs[:0], dones[:0]), "obs is empty"),
        ((obs, actions, rewards, next_obs[:, :1], dones), "next_obs has shape"),
        ((obs, actions, rewards, next_obs, dones * 2.0), "dones holds values other than 0 and 1"),
        ((obs, actions[:, 0], rewards, next_obs, dones), "actions has shape"),
    ]
    for arrays, message in cases:
        with pytest.raises(ValueError, match=message):
            train_offline(*arrays, cfg)
    with pytest.raises(ValueError, match="unknown offline RL algo 'sac'"):
        train_offline(*data, OfflineRLConfig(**{**FAST, "algo": "sac"}))
    with pytest.raises(ValueError, match="action_low"):
        train_offline(*data, cfg, action_low=[np.nan, 0.0])


@pytest.mark.parametrize("algo", ["td3bc", "iql", "cql"])
def test_same_seed_same_agent_and_the_global_rng_untouched(data, algo, capsys):
    cfg = OfflineRLConfig(**{**FAST, "steps": 60, "log_every": 20}, algo=algo)
    rng_state = torch.get_rng_state()
    a, b = train_offline(*data, cfg), train_offline(*data, cfg)
    assert torch.equal(rng_state, torch.get_rng_state())
    assert np.array_equal(a.act(TEST_STATES), b.act(TEST_STATES))
    assert [h | {"time_s": 0} for h in a.history] == [h | {"time_s": 0} for h in b.history]
    other = train_offline(*data, OfflineRLConfig(**{**FAST, "steps": 60, "log_every": 20}, algo=algo, seed=1))
    assert not np.allclose(other.act(TEST_STATES), a.act(TEST_STATES))
    train_offline(*data, OfflineRLConfig(**{**FAST, "steps": 20, "log_every": 10, "progress": True}, algo=algo))
    assert f"offline {algo}" in capsys.readouterr().err
