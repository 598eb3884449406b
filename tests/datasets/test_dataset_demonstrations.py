"""Demonstrations.from_dataset: our LeRobot-layout datasets (written or recorded) as BC rows, exactly."""

import numpy as np
import pytest
import torch

from embody.datasets.format import DatasetFormatError, load
from embody.policies.datasets import Demonstrations, Part


def test_rows_are_the_recorded_columns_episode_by_episode(tiny):
    root, written = tiny
    d = Demonstrations.from_dataset(root, ["observation.state", "observation.privileged"], "action")
    assert d.episode_lengths.tolist() == [5, 6, 7] and (d.obs_size, d.action_size) == (4 + 6, 2)
    assert d.obs_parts == {"observation.state": Part((4,)), "observation.privileged": Part((3, 2))}
    parts = d.obs_arrays()
    for name in ("observation.state", "observation.privileged"):
        assert np.array_equal(parts[name], np.concatenate([ep[name] for ep in written]))
    assert np.array_equal(d.action_array(), np.concatenate([ep["action"] for ep in written]))
    assert d.meta["dataset"] == str(root.resolve()) and d.meta["dataset_episodes"] == [0, 1, 2]
    assert d.meta["fps"] == 10 and d.meta["action_key"] == "action"


def test_chosen_episodes_in_order_renamed_parts_and_a_loaded_dataset(tiny):
    root, written = tiny
    d = Demonstrations.from_dataset(load(root), {"obs": "observation.state"}, episodes=[2, 0])
    assert d.episode_lengths.tolist() == [7, 5] and d.parts_spec() == {"obs": (4,)}
    first, second = d.episodes()
    assert np.array_equal(first.obs_arrays()["obs"], written[2]["observation.state"])
    assert np.array_equal(second.action_array(), written[0]["action"])
    ints = Demonstrations.from_dataset(root, ["embody.supervisor_event"], "action")
    assert ints.obs_parts == {"embody.supervisor_event": Part((), "int64")}
    assert np.array_equal(
        ints.obs_arrays()["embody.supervisor_event"], np.concatenate([ep["embody.supervisor_event"] for ep in written])
    )


def test_bad_requests_are_one_error_naming_the_dataset(tiny, tmp_path):
    root, _ = tiny
    with pytest.raises(DatasetFormatError, match=f"{root}: 'observation.nope' is not one of its features"):
        Demonstrations.from_dataset(root, ["observation.nope"])
    with pytest.raises(DatasetFormatError, match=f"{root}: 'observation.images.front' is a video"):
        Demonstrations.from_dataset(root, ["observation.images.front"])
    with pytest.raises(DatasetFormatError, match=f"{root}: 'act' is not one of its features"):
        Demonstrations.from_dataset(root, action_key="act")
    with pytest.raises(ValueError, match=f"{root}: episode 3 out of range \\(the dataset has 3\\)"):
        Demonstrations.from_dataset(root, episodes=[0, 3])
    with pytest.raises(ValueError, match=f"{root}: no episodes to read"):
        Demonstrations.from_dataset(root, episodes=[])
    with pytest.raises(DatasetFormatError, match="info.json: missing: not a LeRobot v3.0 dataset"):
        Demonstrations.from_dataset(tmp_path / "nowhere")


def test_a_recorded_dataset_trains_a_policy_and_saves(tmp_path):
    """`embody record` → from_dataset(embody.observation) → BC → a demonstrations file and back."""
    from embody.datasets.record import RecordConfig, record
    from embody.policies.actor_critic import ActorCritic
    from embody.policies.bc import BCConfig, train_bc

    out = tmp_path / "peg"
    record(RecordConfig(task="peg-insert", episodes=2, out=out, n_envs=2, video=False))
    ds = load(out)
    d = Demonstrations.from_dataset(ds, {"obs": "embody.observation"}, "action")
    assert d.episode_lengths.tolist() == [int(b - a) for a, b in zip(*ds.episode_bounds)]
    assert d.obs_size == ds.features["embody.observation"]["shape"][0]
    policy = ActorCritic(d.obs_size, d.action_size, 0)
    fit = train_bc(policy, d, BCConfig(epochs=1, batch_size=64))
    assert np.isfinite(fit["mse"])
    back = Demonstrations.load(d.save(tmp_path / "peg.safetensors"))
    assert torch.equal(back.obs, d.obs) and back.obs_parts == d.obs_parts and back.meta == d.meta
