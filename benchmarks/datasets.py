"""``embody bench datasets``: writing and loading embody datasets against a plain HDF5 file.

One synthetic dataset, ``--episodes`` × ``--frames`` of a 19-dim float32 state, a 7-dim float32
action, reward and done (plus the standard timestamp/index columns), and a smaller one (a tenth
of the episodes) that adds an 84×84 camera, measured in the same run:

(a) write frames/s: embody's ``DatasetWriter`` (add_frame per frame, save_episode: parquet, MP4,
    checksums, atomic commit) against h5py appending each episode to one resizable dataset per
    feature (raw uint8 images for the camera).
(b) DataLoader frames/s, state-only: ``EpisodeDataset(video=False)``, batch 256, shuffled,
    num_workers 0, best of ``--repeats`` epochs; once through its batch-gathering ``.loader()``
    and once through a plain ``DataLoader`` (default collate, item by item). Item-by-item
    loaders (this one, the peer, video) time the first 4096 frames (2048 with video) of each
    epoch: their cost per frame does not depend on the epoch's length.
(c) the same through ``.loader()`` with the 84×84 frames decoded from MP4 (float (3, 84, 84)
    in [0, 1] per item).
(d) the peer: the same columns in one HDF5 file, read by a minimal torch Dataset whose
    ``__getitem__`` indexes every h5py dataset at the item (the straightforward way), under the
    same DataLoader settings.

The lerobot column divides by 2.9k frames/s, what lerobot 0.4.4's LeRobotDataset indexes
state-only on this kind of machine (measured once, not in this run); the target is state-only
loading ≥ 3× that.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

LEROBOT_FPS = 2900.0  # lerobot 0.4.4 LeRobotDataset, state-only indexing (frames/s), not measured here
TARGET = 3.0  # state-only loading, × lerobot
STATE, ACTION, IMAGE = 19, 7, (84, 84, 3)
CAMERA = "observation.images.main"
BATCH = 256
STATE_ROW = "load state-only, .loader()"  # the row the target is about


def features(video: bool) -> dict:
    """The synthetic dataset's features (state, action, reward, done; plus the camera with ``video``)."""
    from embody.datasets.format import feature

    out = {
        "observation.state": feature("float32", (STATE,)),
        "action": feature("float32", (ACTION,)),
        "next.reward": feature("float32", (1,)),
        "next.done": feature("bool", (1,)),
    }
    if video:
        out[CAMERA] = feature("video", IMAGE)
    return out


def synthetic_episode(rng: np.random.Generator, frames: int, video: bool) -> dict[str, np.ndarray]:
    """One episode's arrays, (frames, *shape): random-walk state, random actions, done at the end;
    images are a drifting gradient with a moving square (compressible, like a camera; noise is not)."""
    ep = {
        "observation.state": np.cumsum(rng.normal(0, 0.05, (frames, STATE)), axis=0).astype(np.float32),
        "action": rng.uniform(-1, 1, (frames, ACTION)).astype(np.float32),
        "next.reward": rng.normal(size=(frames, 1)).astype(np.float32),
        "next.done": (np.arange(frames) == frames - 1)[:, None],
    }
    if video:
        h, w, _ = IMAGE
        y, x = np.mgrid[0:h, 0:w]
        t = np.arange(frames)[:, None, None]
        img = np.empty((frames, *IMAGE), np.uint8)
        img[..., 0] = (x[None] * 3 + t * 2) % 256
        img[..., 1] = (y[None] * 3 + t) % 256
        img[..., 2] = 64
        for i in range(frames):
            r, c = (i * 2) % (h - 16), (i * 3) % (w - 16)
            img[i, r : r + 16, c : c + 16] = 255
        ep[CAMERA] = img
    return ep


def write_embody(root: Path, episodes: list[dict], video: bool) -> float:
    """Seconds to write ``episodes`` with DatasetWriter (frame by frame, as a recorder does)."""
    from embody.datasets.format import DatasetWriter

    start = time.perf_counter()
    with DatasetWriter(
        root, fps=50, features=features(video), robot_type="bench", video_keys=(CAMERA,) if video else ()
    ) as w:
        for ep in episodes:
            n = len(ep["action"])
            for t in range(n):
                w.add_frame({k: v[t] for k, v in ep.items()}, task="bench")
            w.save_episode()
    return time.perf_counter() - start


def write_hdf5(path: Path, episodes: list[dict]) -> float:
    """Seconds to append each episode to one resizable h5py dataset per feature (same columns as embody's)."""
    import h5py

    start = time.perf_counter()
    with h5py.File(path, "w") as f:
        index = 0
        for e, ep in enumerate(episodes):
            n = len(ep["action"])
            cols = {
                **ep,
                "timestamp": np.arange(n, dtype=np.float32) / 50,
                "frame_index": np.arange(n),
                "episode_index": np.full(n, e),
                "index": np.arange(index, index + n),
                "task_index": np.zeros(n, int),
            }
            for k, v in cols.items():
                if k not in f:
                    f.create_dataset(k, data=v, maxshape=(None, *v.shape[1:]), chunks=True)
                else:
                    d = f[k]
                    d.resize(d.shape[0] + n, axis=0)
                    d[-n:] = v
            index += n
    return time.perf_counter() - start


class HDF5Frames:
    """The straightforward peer: a torch-style Dataset indexing every h5py dataset per item.

    Items match embody's: shape-(1,) columns as scalars, the camera as float (3, H, W) in [0, 1].
    The file is opened on first use (per DataLoader worker, as h5py requires) and its dataset
    handles kept (looking each one up by name per item would be several times slower).
    """

    def __init__(self, path: Path):
        import h5py

        self.path, self._cols = path, None
        with h5py.File(path, "r") as f:
            self.keys, self._n = list(f.keys()), len(f["index"])

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> dict:
        import h5py
        import torch

        if self._cols is None:
            f = h5py.File(self.path, "r")
            self._cols = {k: f[k] for k in self.keys}
        item = {}
        for k, col in self._cols.items():
            v = torch.from_numpy(np.asarray(col[i]))
            if k == CAMERA:
                v = v.permute(2, 0, 1).float().div_(255.0)
            elif v.ndim == 1 and v.numel() == 1:
                v = v[0]
            item[k] = v
        return item


def epoch_rate(loader, repeats: int, max_frames: int | None = None) -> float:
    """Frames/s of iterating ``loader`` (best of ``repeats``), stopping after ``max_frames``."""
    best = np.inf
    frames = 0
    for _ in range(repeats):
        frames = 0
        start = time.perf_counter()
        for batch in loader:
            frames += len(batch["index"])
            if max_frames is not None and frames >= max_frames:
                break
        best = min(best, time.perf_counter() - start)
    return frames / best


def _row(embody: float, peer: float | None, lerobot: bool = False) -> dict:
    return {
        "embody_fps": embody,
        "peer_fps": peer,
        "ratio": embody / peer if peer else None,
        "vs_lerobot": embody / LEROBOT_FPS if lerobot else None,
    }


def measure(
    n_episodes: int, n_frames: int, work: Path, repeats: int = 3, item_cap: int = 4096, video_cap: int = 2048
) -> dict:
    """Every measurement on datasets written under ``work``; see the module doc.

    Item-by-item loaders time at most ``item_cap`` (``video_cap``) frames per repetition (a full
    epoch of 20k frames at ~1k frames/s would take minutes).
    """
    import torch
    from torch.utils.data import DataLoader

    from embody.datasets.loader import EpisodeDataset

    rng = np.random.default_rng(0)
    n_video = max(1, n_episodes // 10)
    state_eps = [synthetic_episode(rng, n_frames, video=False) for _ in range(n_episodes)]
    video_eps = [synthetic_episode(rng, n_frames, video=True) for _ in range(n_video)]
    total, total_video = n_episodes * n_frames, n_video * n_frames

    rows = {
        "write state": _row(
            total / write_embody(work / "state", state_eps, False), total / write_hdf5(work / "state.h5", state_eps)
        ),
        "write 84x84 video": _row(
            total_video / write_embody(work / "video", video_eps, True),
            total_video / write_hdf5(work / "video.h5", video_eps),
        ),
    }
    torch.manual_seed(0)
    start = time.perf_counter()
    state = EpisodeDataset(work / "state", video=False)
    open_s = time.perf_counter() - start
    plain = dict(batch_size=BATCH, shuffle=True, num_workers=0)
    peer_state = epoch_rate(DataLoader(HDF5Frames(work / "state.h5"), **plain), repeats, item_cap)
    rows[STATE_ROW] = _row(epoch_rate(state.loader(BATCH, shuffle=True), repeats), peer_state, lerobot=True)
    rows["load state-only, DataLoader default collate"] = _row(
        epoch_rate(DataLoader(state, **plain), repeats, item_cap), peer_state, lerobot=True
    )
    video = EpisodeDataset(work / "video", video=True)
    cap = min(total_video, video_cap)
    rows["load + 84x84 video, .loader()"] = _row(
        epoch_rate(video.loader(BATCH, shuffle=True), repeats, cap),
        epoch_rate(DataLoader(HDF5Frames(work / "video.h5"), **plain), repeats, cap),
    )
    return {
        "cores": os.cpu_count(),
        "episodes": n_episodes,
        "frames_per_episode": n_frames,
        "total_frames": total,
        "video_episodes": n_video,
        "video_frames": total_video,
        "item_frames_timed": min(total, item_cap),
        "video_frames_timed": cap,
        "batch_size": BATCH,
        "repeats": repeats,
        "open_state_dataset_s": open_s,
        "lerobot_reference_fps": LEROBOT_FPS,
        "target_state_x_lerobot": TARGET,
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    """``embody bench datasets``: measure in a temporary directory, print the table; ``--out DIR``
    writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench datasets", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--episodes", type=int, default=50)
    p.add_argument("--frames", type=int, default=400, help="frames per episode")
    p.add_argument("--repeats", type=int, default=3, help="epochs per loading measurement (best is kept)")
    p.add_argument("--quick", action="store_true", help="4 episodes × 64 frames, 1 repetition: a smoke run")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    if args.quick:
        args.episodes, args.frames, args.repeats = 4, 64, 1
    with tempfile.TemporaryDirectory(prefix="embody-bench-datasets-") as tmp:
        result = measure(args.episodes, args.frames, Path(tmp), args.repeats)
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    print(
        f"\nembody bench datasets: {r['episodes']} episodes × {r['frames_per_episode']} frames "
        f"(state {STATE}, action {ACTION}); video: {r['video_episodes']} × {r['frames_per_episode']} at 84×84; "
        f"batch {r['batch_size']}, shuffled, 0 workers, {r['cores']} cores\n"
    )
    print("| frames/s | embody | HDF5 peer | embody / peer | embody / lerobot 0.4.4 (2.9k) |\n|---|---|---|---|---|")
    for name, row in r["rows"].items():
        peer = f"{row['peer_fps']:,.0f}" if row["peer_fps"] else "—"
        ratio = f"{row['ratio']:.2f}" if row["ratio"] else "—"
        vs = f"{row['vs_lerobot']:.1f}×" if row["vs_lerobot"] else "—"
        print(f"| {name} | {row['embody_fps']:,.0f} | {peer} | {ratio} | {vs} |")
    x = r["rows"][STATE_ROW]["vs_lerobot"]
    print(
        f"\ntarget, {STATE_ROW} ≥ {r['target_state_x_lerobot']:.0f}× lerobot: {x:.1f}× "
        f"({'PASS' if x >= r['target_state_x_lerobot'] else 'BELOW-TARGET'})"
    )
