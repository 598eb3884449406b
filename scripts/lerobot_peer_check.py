"""Peer check: load an embody dataset with the real lerobot (0.4.x, pyav video backend).

Run it in a scratch virtual environment outside the project (lerobot replaces CPU torch):

    python3 -m venv /tmp/lerobot_venv && /tmp/lerobot_venv/bin/pip install 'lerobot==0.4.4'
    /tmp/lerobot_venv/bin/python scripts/lerobot_peer_check.py tests/datasets/golden/arm-reach-v3 /tmp/out.json

It prints what lerobot sees and dumps every frame's state and action, one decoded frame and the
tasks to the JSON file, for comparison with embody's own reader. Last run (2026-11-30, lerobot
0.4.4): 2 episodes, 24 frames, all features listed, arrays equal to embody's, the decoded frame
identical, delta_timestamps stacking and padding as expected.
"""

import json
import sys

from lerobot.datasets.lerobot_dataset import LeRobotDataset

root = sys.argv[1]
ds = LeRobotDataset("embody/golden", root=root, video_backend="pyav")
print("episodes", ds.num_episodes, "frames", ds.num_frames, "fps", ds.fps)
print("features", sorted(ds.features))
item = ds[5]
print({k: (tuple(v.shape) if hasattr(v, "shape") else v) for k, v in item.items()})
out = {
    "num_episodes": ds.num_episodes,
    "num_frames": ds.num_frames,
    "state": [ds[i]["observation.state"].numpy().tolist() for i in range(ds.num_frames)],
    "action": [ds[i]["action"].numpy().tolist() for i in range(ds.num_frames)],
    "episode_index": [int(ds[i]["episode_index"]) for i in range(ds.num_frames)],
    "task": [ds[i]["task"] for i in range(ds.num_frames)],
    "frame5": (item["observation.images.main"].numpy() * 255).round().astype(int).tolist(),
}
json.dump(out, open(sys.argv[2], "w"))
# delta timestamps, as training code uses them
ds2 = LeRobotDataset(
    "embody/golden",
    root=root,
    video_backend="pyav",
    delta_timestamps={"action": [0.0, 0.04, 0.08], "observation.state": [-0.04, 0.0]},
)
it = ds2[0]
print(
    "delta",
    tuple(it["action"].shape),
    it["action_is_pad"].tolist(),
    tuple(it["observation.state"].shape),
    it["observation.state_is_pad"].tolist(),
)
