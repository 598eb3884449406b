"""Demonstrations as the one demonstrations type: episodes, named parts, files old and new, bad files."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from embody.policies.datasets import DatasetError, Demonstrations, Part

GOLDEN = Path(__file__).parent / "golden"


def maze_like() -> Demonstrations:
    """Three episodes (2, 3, 1 steps) of a uint8 image, an int8 heading and int8 discrete actions."""
    rng = np.random.default_rng(0)
    obs = {
        "image": rng.integers(0, 256, (6, 3, 3, 3)).astype(np.uint8),
        "direction": rng.integers(0, 4, 6).astype(np.int8),
    }
    return Demonstrations.from_arrays(obs, rng.integers(0, 7, 6).astype(np.int8), [2, 3, 1], {"tasks": [4, 5, 6]})


def test_named_parts_come_back_exactly_in_their_dtypes():
    d = maze_like()
    assert (d.obs_size, d.action_size, len(d)) == (28, 1, 6)
    assert d.obs_parts == {"image": Part((3, 3, 3), "uint8"), "direction": Part((), "int8")}
    assert d.parts_spec() == {"image": (3, 3, 3), "direction": ()} and d.action_part == Part((), "int8")
    rng = np.random.default_rng(0)
    image, direction, actions = (
        rng.integers(0, 256, (6, 3, 3, 3)).astype(np.uint8),
        rng.integers(0, 4, 6).astype(np.int8),
        rng.integers(0, 7, 6).astype(np.int8),
    )
    back = d.obs_arrays()
    assert back["image"].dtype == np.uint8 and np.array_equal(back["image"], image)
    assert back["direction"].dtype == np.int8 and np.array_equal(back["direction"], direction)
    assert d.action_array().dtype == np.int8 and np.array_equal(d.action_array(), actions)


def test_episodes_and_first():
    d = maze_like()
    assert d.episode_lengths.tolist() == [2, 3, 1] and d.episode_starts.tolist() == [1, 0, 1, 0, 0, 1]
    eps = list(d.episodes())
    assert [len(e) for e in eps] == [2, 3, 1] and all(e.obs_parts == d.obs_parts for e in eps)
    assert torch.equal(eps[1].obs, d.obs[2:5]) and eps[1].episode_starts.tolist() == [1, 0, 0]
    two = d.first(2)
    assert len(two) == 5 and two.episode_lengths.tolist() == [2, 3] and two.meta == d.meta
    two.meta["tasks"] = [4, 5]
    assert d.meta["tasks"] == [4, 5, 6]  # first() copies meta
    for m in (0, 4):
        with pytest.raises(ValueError, match=f"asked for {m} episodes, the demonstrations hold 3"):
            d.first(m)
    with pytest.raises(ValueError, match="must be positive and add up to 6"):
        Demonstrations.from_arrays(np.zeros((6, 2)), np.zeros((6, 1)), [2, 3])
    f32 = np.float32
    plain = Demonstrations.from_episodes(
        [np.zeros((2, 3), f32), np.ones((4, 3), f32)], [np.zeros((2, 1), f32), np.ones((4, 1), f32)]
    )
    assert plain.obs_parts == {} and plain.action_part is None and plain.episode_lengths.tolist() == [2, 4]
    assert plain.parts_spec() == {"obs": (3,)} and list(plain.obs_arrays()) == ["obs"]


def test_concat_keeps_parts_only_where_all_agree():
    d = maze_like()
    assert Demonstrations.concat([d, d.first(1)]).obs_parts == d.obs_parts
    unnamed = Demonstrations(d.obs[:2], d.actions[:2], torch.ones(2, dtype=torch.bool))
    both = Demonstrations.concat([d, unnamed])
    assert both.obs_parts == {} and both.action_part is None and both.episode_lengths.tolist() == [2, 3, 1, 1, 1]


def test_save_and_load_keep_parts(tmp_path):
    d = maze_like()
    back = Demonstrations.load(d.save(tmp_path / "d.safetensors"))
    assert (back.obs_parts, back.action_part, back.meta) == (d.obs_parts, d.action_part, d.meta)
    assert torch.equal(back.obs, d.obs) and torch.equal(back.episode_starts, d.episode_starts)
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically


def test_a_file_written_before_named_parts_still_loads():
    """tests/policies/golden/demonstrations_v1_pre_issue17.safetensors: the pre-issue-17 code's save of
    7 rows (obs (7, 3), actions (7, 2), episodes of 3 and 4 steps)."""
    d = Demonstrations.load(GOLDEN / "demonstrations_v1_pre_issue17.safetensors")
    assert (len(d), d.obs_size, d.action_size) == (7, 3, 2) and d.episode_lengths.tolist() == [3, 4]
    assert d.obs_parts == {} and d.action_part is None and d.meta["episode_returns"] == [1.5, 2.0]
    assert list(d.obs_arrays()) == ["obs"] and d.obs_arrays()["obs"].shape == (7, 3)


def test_malformed_files_are_one_error_naming_the_file(tmp_path):
    from safetensors.torch import save_file

    def write(name: str, header: dict, obs=torch.zeros(4, 3)) -> Path:
        path = tmp_path / name
        save_file(
            {"obs": obs, "actions": torch.zeros(4, 1), "episode_starts": torch.ones(4, dtype=torch.bool)},
            str(path),
            metadata={"embody": json.dumps(header)},
        )
        return path

    base = {"format": "embody.demonstrations", "format_version": 1, "meta": {}}
    bad = write("parts.safetensors", {**base, "obs_parts": {"a": {"shape": [2], "dtype": "float32"}}})
    with pytest.raises(DatasetError, match=f"{bad}: observation parts .* do not add up to the obs size 3"):
        Demonstrations.load(bad)
    bad = write("dtype.safetensors", {**base, "action_part": {"shape": [], "dtype": "no-such-type"}})
    with pytest.raises(DatasetError, match=str(bad)):
        Demonstrations.load(bad)
    bad = write("newer.safetensors", {**base, "format_version": 2})
    with pytest.raises(DatasetError, match=f"{bad}: format version 2 is not supported"):
        Demonstrations.load(bad)
    with pytest.raises(DatasetError, match=f"{tmp_path} is a folder.*from_dataset"):
        Demonstrations.load(tmp_path)
