"""The five offline agents (BC, TD3+BC, IQL, CQL, Decision Transformer) behind one interface: trained from a
LeRobot-layout dataset of the point-mass goal task (test_offline_rl), driven by the same act / reward / reset
loop, saved and loaded by one pair of functions; clear errors for unknown agents, settings and checkpoints."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_decision_transformer import STEPS, episodes  # noqa: E402
from test_offline_rl import step  # noqa: E402

from embody.datasets.format import DatasetFormatError, DatasetWriter, feature  # noqa: E402
from embody.policies.checkpoint import CheckpointError  # noqa: E402
from embody.policies.offline_agents import (  # noqa: E402
    AGENTS,
    Transitions,
    agent_config,
    algo_of,
    load_agent,
    save_agent,
    train_agent,
)
from embody.policies.trajectory import TrajectoryMLP, save_model  # noqa: E402

TINY = {
    "dt": dict(context=4, embed=16, layers=1, steps=60, warmup_steps=10, batch_size=32, progress=False),
    **{a: dict(hidden=[32, 32], steps=60, batch_size=64, log_every=30, progress=False) for a in AGENTS if a != "dt"},
}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """Twenty point-mass episodes written as a LeRobot-layout dataset."""
    root = tmp_path_factory.mktemp("offline") / "pointmass"
    features = {
        "observation.state": feature("float32", (2,)),
        "action": feature("float32", (2,)),
        "next.reward": feature("float32", (1,)),
        "next.done": feature("bool", (1,)),
    }
    with DatasetWriter(root, fps=4, features=features, robot_type="point") as writer:
        for obs, actions, rewards in episodes(20, seed=0):
            for t in range(len(obs)):
                frame = {
                    "observation.state": obs[t],
                    "action": actions[t],
                    "next.reward": np.array([rewards[t]], np.float32),
                    "next.done": np.array([t == len(obs) - 1]),
                }
                writer.add_frame(frame, task="reach the origin")
            writer.save_episode()
    return root


def test_transitions_from_a_dataset_follow_its_episodes(dataset):
    data = Transitions.from_dataset(dataset)
    expected = episodes(20, seed=0)
    assert len(data) == 20 * STEPS and data.obs.shape == (160, 2) and data.dones.sum() == 20
    np.testing.assert_array_equal(data.obs[:STEPS], expected[0][0])
    np.testing.assert_array_equal(data.next_obs[: STEPS - 1], expected[0][0][1:])  # the next frame, in-episode
    np.testing.assert_array_equal(data.next_obs[STEPS - 1], data.obs[STEPS - 1])  # the last: never bootstrapped
    assert [len(e[0]) for e in data.episodes()] == [STEPS] * 20
    np.testing.assert_allclose(data.episodes()[3][2], expected[3][2])
    assert len(data.select(data.dones)) == 20
    with pytest.raises(DatasetFormatError, match="'observation.image' is not a state feature"):
        Transitions.from_dataset(dataset, obs_key="observation.image")


@pytest.mark.parametrize("algo", AGENTS)
def test_every_agent_trains_acts_and_round_trips_the_same_way(algo, dataset, tmp_path):
    torch.set_num_threads(1)
    agent = train_agent(algo, Transitions.from_dataset(dataset), TINY[algo])
    assert algo_of(agent) == algo
    x = np.random.default_rng(1).uniform(-1, 1, (5, 2)).astype(np.float32)
    agent.reset()
    first = []
    for _ in range(3):  # the one driving loop: act, step, feed the rewards back
        a = agent.act(x)
        assert a.shape == (5, 2) and np.isfinite(a).all()
        first.append(a)
        x, r, _ = step(x, a)
        agent.reward(r)
    agent.reset(np.array([0]))
    save_agent(tmp_path / algo, agent, {"dataset": str(dataset)})
    loaded = load_agent(tmp_path / algo)
    assert type(loaded) is type(agent) and algo_of(loaded) == algo
    x0 = np.random.default_rng(1).uniform(-1, 1, (5, 2)).astype(np.float32)
    loaded.reset()
    np.testing.assert_array_equal(loaded.act(x0), first[0])


def test_the_decision_transformer_asks_for_the_best_return_in_its_data(dataset):
    data = Transitions.from_dataset(dataset)
    dt = train_agent("dt", data, TINY["dt"])
    best = max(e[2].sum() for e in data.episodes())
    assert dt.config.target_return == pytest.approx(best)
    assert train_agent("dt", data, {**TINY["dt"], "steps": 1, "target_return": -3.0}).config.target_return == -3.0


def test_bad_names_and_checkpoints_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown offline agent 'sac'; valid: bc, td3bc, iql, cql, dt"):
        agent_config("sac")
    with pytest.raises(ValueError, match="iql: unknown config key 'context'"):
        agent_config("iql", {"context": 4})
    assert agent_config("cql", {"steps": 7}).steps == 7 and agent_config("cql").algo == "cql"
    save_model(tmp_path / "traj", TrajectoryMLP(2, 4, 2))
    with pytest.raises(CheckpointError, match="TrajectoryMLP, not of an offline agent"):
        load_agent(tmp_path / "traj")
