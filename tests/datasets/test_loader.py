"""EpisodeDataset: lerobot's delta_timestamps stacking and padding, batched gathering, video items."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

pytest.importorskip("pyarrow")

from dataset_helpers import write_dataset  # noqa: E402

from embody.datasets import EpisodeDataset, load  # noqa: E402

CAM = "observation.images.front"


@pytest.fixture
def state_only(tmp_path):
    root = tmp_path / "ds"
    return root, write_dataset(root, lengths=(4, 6), video=False)


def test_delta_timestamps_stack_and_pad_at_episode_boundaries(state_only):
    root, written = state_only
    ds = EpisodeDataset(
        root, video=False, delta_timestamps={"observation.state": [-0.2, -0.1, 0.0], "action": [0.0, 0.1, 0.2, 0.3]}
    )
    assert len(ds) == 10
    state = np.concatenate([ep["observation.state"] for ep in written])
    action = np.concatenate([ep["action"] for ep in written])

    item = ds[4]  # first frame of episode 1 (frames 4..9)
    assert item["observation.state"].shape == (3, 4) and item["action"].shape == (4, 2)
    np.testing.assert_array_equal(item["observation.state"].numpy(), state[[4, 4, 4]])  # clamped to the start
    assert item["observation.state_is_pad"].tolist() == [True, True, False]
    np.testing.assert_array_equal(item["action"].numpy(), action[[4, 5, 6, 7]])
    assert item["action_is_pad"].tolist() == [False] * 4

    item = ds[2]  # episode 0 is frames 0..3: the action window runs past its end, not into episode 1
    np.testing.assert_array_equal(item["action"].numpy(), action[[2, 3, 3, 3]])
    assert item["action_is_pad"].tolist() == [False, False, True, True]
    np.testing.assert_array_equal(item["observation.state"].numpy(), state[[0, 1, 2]])
    assert item["observation.state_is_pad"].tolist() == [False] * 3

    # keys without deltas come back as single frames; scalar features as 0-d tensors
    assert item["embody.sim_state"].shape == (6,) and item["embody.sim_state"].dtype == torch.float64
    assert item["embody.supervisor_event"].shape == () and item["index"].item() == 2
    assert item["task"] == "pick" and ds[5]["task"] == "place"


def test_batched_gather_matches_items_and_default_collate(state_only):
    root, _ = state_only
    ds = EpisodeDataset(load(root), video=False, delta_timestamps={"action": [-0.1, 0.0, 0.1]})
    fast = next(iter(ds.loader(batch_size=10, shuffle=False)))
    plain = next(iter(DataLoader(ds, batch_size=10, shuffle=False)))  # DataLoader's own collate also works
    assert fast.keys() == plain.keys()
    for k, v in fast.items():
        if torch.is_tensor(v):
            assert torch.equal(v, plain[k]), k
            assert torch.equal(v[7], ds[7][k]), k
        else:
            assert v == plain[k] == [ds[i][k] for i in range(10)]
    assert fast["action"].shape == (10, 3, 2) and fast["action_is_pad"].shape == (10, 3)
    assert fast["action_is_pad"][:, 0].tolist() == [True, False, False, False, True] + [False] * 5


def test_delta_timestamps_must_be_frame_multiples(state_only):
    root, _ = state_only
    with pytest.raises(ValueError, match=r"not multiples of 1/10"):
        EpisodeDataset(root, video=False, delta_timestamps={"action": [0.0, 0.05]})
    with pytest.raises(KeyError, match="not a feature"):
        EpisodeDataset(root, video=False, delta_timestamps={"nope": [0.0]})
    EpisodeDataset(root, video=False, delta_timestamps={"action": [0.0, 0.1 + 5e-5]})  # within tolerance_s


def test_video_items_are_decoded_frames(tiny):
    root, written = tiny
    ds = EpisodeDataset(root, delta_timestamps={CAM: [-0.1, 0.0]})
    item = ds[5]  # episode 1, frame 0
    assert item[CAM].shape == (2, 3, 32, 32) and item[CAM].dtype == torch.float32
    assert item[f"{CAM}_is_pad"].tolist() == [True, False]
    want = torch.from_numpy(written[1][CAM][0]).permute(2, 0, 1).float() / 255
    assert (item[CAM][1] - want).abs().mean() < 6 / 255
    assert torch.equal(item[CAM][0], item[CAM][1])  # the padded step repeats the first frame
    batch = next(iter(ds.loader(batch_size=4, shuffle=False)))
    assert batch[CAM].shape == (4, 2, 3, 32, 32)
    state_only = EpisodeDataset(root, video=False)
    assert CAM not in state_only[0] and len(state_only) == 18
