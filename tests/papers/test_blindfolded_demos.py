"""papers/blindfolded/demos.py: the study's Demos as a view of the core Demonstrations; old .npz files load."""

from pathlib import Path

import numpy as np
import pytest

from embody.datasets.format import DatasetFormatError
from embody.papers.blindfolded import demos as demo_io
from embody.policies.datasets import Demonstrations

GOLDEN = Path(__file__).parent / "golden"
MAZE_SPEC = {"direction": (), "image": (3, 3, 3)}  # MazeDomain.obs_spec at the tiny scale


def test_a_maze_file_written_before_the_core_type_loads_and_saves_back_the_same(tmp_path):
    """golden/maze_demos_pre_issue17.npz: `embody blindfolded study --scale tiny`'s blind_seed0.npz,
    written by the pre-issue-17 code."""
    path = GOLDEN / "maze_demos_pre_issue17.npz"
    d = demo_io.load(path, MAZE_SPEC)
    with np.load(path, allow_pickle=False) as z:
        raw = {k: z[k] for k in z.files}
    assert d.obs["image"].dtype == np.uint8 and d.obs["direction"].dtype == np.int8 and d.actions.dtype == np.int8
    for k in ("image", "direction"):
        assert np.array_equal(d.obs[k], raw[f"obs/{k}"])
    assert np.array_equal(d.actions, raw["actions"]) and np.array_equal(d.episode_lengths, raw["episode_lengths"])
    assert isinstance(d.to_demonstrations(), Demonstrations) and len(d.to_demonstrations()) == len(d.actions)
    with np.load(demo_io.save(d, tmp_path / "again.npz"), allow_pickle=False) as z:
        again = {k: z[k] for k in z.files}
    assert sorted(again) == sorted(raw) and all(
        np.array_equal(again[k], raw[k]) and again[k].dtype == raw[k].dtype for k in raw
    )
    (obs0, act0), *_ = d.episodes()
    n0 = int(d.episode_lengths[0])
    assert np.array_equal(obs0["image"], raw["obs/image"][:n0]) and np.array_equal(act0, raw["actions"][:n0])


def test_first_cuts_meta_tasks_and_leaves_the_original():
    rng = np.random.default_rng(0)
    d = demo_io.from_episodes(
        [{"obs": rng.standard_normal((n, 3)).astype(np.float32)} for n in (2, 3, 4)],
        [np.zeros((n, 2), np.float32) for n in (2, 3, 4)],
        {"tasks": [7, 8, 9]},
    )
    assert d.meta["obs_spec"] == {"obs": [3]}
    two = d.first(2)
    assert two.meta["tasks"] == [7, 8] and d.meta["tasks"] == [7, 8, 9] and two.episode_lengths.tolist() == [2, 3]
    with pytest.raises(ValueError, match="asked for 4 episodes, the demonstrations hold 3"):
        d.first(4)


def test_a_core_demonstrations_file_loads_as_demos(tmp_path):
    rng = np.random.default_rng(1)
    data = Demonstrations.from_episodes(
        [rng.standard_normal((n, 33)).astype(np.float32) for n in (3, 5)],
        [rng.standard_normal((n, 3)).astype(np.float32) for n in (3, 5)],
        {"level": "informed", "tasks": [[0.0, 0.001]]},
    )
    path = data.save(tmp_path / "d.safetensors")
    d = demo_io.load(path, {"obs": (33,)})
    assert np.array_equal(d.obs["obs"], data.obs.numpy()) and d.episode_lengths.tolist() == [3, 5]
    assert d.meta["level"] == "informed" and d.obs_spec == {"obs": (33,)}
    with pytest.raises(DatasetFormatError, match=f"{path}: observation spec mismatch"):
        demo_io.load(path, {"obs": (5,)})
    (tmp_path / "junk.safetensors").write_bytes(b"junk")
    with pytest.raises(DatasetFormatError, match=f"{tmp_path / 'junk.safetensors'}: cannot read"):
        demo_io.load(tmp_path / "junk.safetensors")


def test_a_malformed_npz_is_one_error_naming_it(tmp_path):
    path = tmp_path / "text.npz"
    np.savez(
        path,
        **{
            "obs/obs": np.array(["a", "b"]),
            "actions": np.zeros((2, 1)),
            "episode_lengths": np.array([2]),
            "meta": np.array("{}"),
        },
    )
    with pytest.raises(DatasetFormatError, match=f"{path}: "):
        demo_io.load(path)
