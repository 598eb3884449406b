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

(e) loading with video against the real lerobot, measured in the same run: recorded
    ``h1_2-stand`` episodes (``embody record``'s default controller and camera, seed 0), 4 of them
    and 20, each dataset loaded shuffled in batches of 32 by one process (no DataLoader
    workers): embody's ``EpisodeDataset`` (through ``.loader()`` and through a plain DataLoader
    with the default collate) and lerobot's ``LeRobotDataset`` (pyav video backend) on the same
    files, run by ``scripts/lerobot_peer_bench.py`` under ``--lerobot-python`` (the interpreter of
    a scratch environment holding lerobot 0.4.4; without it the peer is "not measured"). Each
    side: one untimed warm-up epoch, then the best of ``--repeats`` whole epochs. Target: ≥ 3×
    lerobot on both workloads; writing 84×84 video (b's workload) ≥ 1,000 frames/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from embody.commands import positive_int

LEROBOT_FPS = 2900.0  # lerobot 0.4.4 LeRobotDataset, state-only indexing (frames/s), not measured here
TARGET = 3.0  # state-only loading, × lerobot
STATE, ACTION, IMAGE = 19, 7, (84, 84, 3)
CAMERA = "observation.images.main"
BATCH = 256
STATE_ROW = "load state-only, .loader()"  # the row the target is about
VIDEO_TARGET = 3.0  # loading with video, × lerobot measured in the same run
WRITE_VIDEO_TARGET = 1000.0  # 84×84 video written, frames/s
VIDEO_ROW = "write 84x84 video"
STAND_TASK = "h1_2-stand"
STAND_EPISODES = (4, 20)  # the two video-loading workloads (episodes recorded)
VIDEO_BATCH = 32
# --quick: a few short, small episodes (structure, not speed)
QUICK_STAND = ["env.max_episode_steps=6", "env.sim.render_width=32", "env.sim.render_height=32"]
PEER_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "lerobot_peer_bench.py"


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


def record_stand(root: Path, episodes: int, overrides: list[str]) -> Path:
    """``episodes`` of h1_2-stand recorded into ``root`` as ``embody record`` does (default controller,
    camera video, seed 0, 4 envs)."""
    from embody.datasets.record import RecordConfig, record

    record(RecordConfig(task=STAND_TASK, episodes=episodes, out=root, n_envs=4, seed=0, overrides=overrides))
    return root


def timed_epochs(loader, repeats: int) -> dict:
    """One untimed warm-up epoch (files opened, indexes built), then ``repeats`` timed ones: frames/s."""
    rates = []
    for r in range(repeats + 1):
        frames, start = 0, time.perf_counter()
        for batch in loader:
            frames += len(batch["index"])
        if r:
            rates.append(frames / (time.perf_counter() - start))
    return {"fps": max(rates), "epoch_fps": rates}


def embody_video_rates(root: Path, repeats: int) -> dict:
    """embody's frames/s with video on ``root``: through ``.loader()`` and through a plain DataLoader."""
    import torch
    from torch.utils.data import DataLoader

    from embody.datasets.loader import EpisodeDataset

    torch.manual_seed(0)
    ds = EpisodeDataset(root)
    fast = timed_epochs(ds.loader(VIDEO_BATCH, shuffle=True), repeats)
    torch.manual_seed(0)
    plain = timed_epochs(DataLoader(EpisodeDataset(root), batch_size=VIDEO_BATCH, shuffle=True), repeats)
    return {"loader": fast, "default_collate": plain, "frames": len(ds), "episodes": ds.dataset.num_episodes}


def lerobot_video_rate(python: str | None, root: Path, repeats: int, timeout_s: float = 1800) -> dict:
    """lerobot's frames/s on ``root`` from ``scripts/lerobot_peer_bench.py`` run by ``python`` (a scratch
    environment's interpreter, started from a neutral directory with the project's paths cleared);
    {"fps": None, "why": ...} when not measured."""
    if not python:
        return {"fps": None, "why": "not measured: no --lerobot-python"}
    if not PEER_SCRIPT.is_file():
        return {"fps": None, "why": f"not measured: {PEER_SCRIPT} is missing"}
    cmd = [python, str(PEER_SCRIPT), str(root), "--batch", str(VIDEO_BATCH), "--repeats", str(repeats)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=tempfile.gettempdir(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"fps": None, "why": f"not measured: {e}"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"fps": None, "why": f"not measured: exit {done.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


def measure_video_peers(work: Path, lerobot_python: str | None, repeats: int, quick: bool) -> dict:
    """(e): per workload, embody and lerobot frames/s with video on the same recorded files, one after
    the other; the load average before and after (the machine is shared)."""
    out = {}
    for episodes in STAND_EPISODES if not quick else (2, 3):
        name = f"{STAND_TASK} × {episodes}"
        root = record_stand(work / f"stand-{episodes}", episodes, QUICK_STAND if quick else [])
        load_before = os.getloadavg()[0]
        ours = embody_video_rates(root, repeats)
        peer = lerobot_video_rate(lerobot_python, root, repeats)
        fps = peer.get("fps")
        out[name] = {
            "episodes": ours["episodes"],
            "frames": ours["frames"],
            "embody_fps": ours["loader"]["fps"],
            "embody_epoch_fps": ours["loader"]["epoch_fps"],
            "embody_default_collate_fps": ours["default_collate"]["fps"],
            "lerobot": peer,
            "lerobot_fps": fps,
            "ratio": ours["loader"]["fps"] / fps if fps else None,
            "ratio_default_collate": ours["default_collate"]["fps"] / fps if fps else None,
            "load_average_1min": [load_before, os.getloadavg()[0]],
        }
    return out


def main(argv: list[str]) -> int:
    """``embody bench datasets``: measure in a temporary directory, print the table; ``--out DIR``
    writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench datasets", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--episodes", type=positive_int, help="synthetic episodes (default 50)")
    p.add_argument("--frames", type=positive_int, help="frames per synthetic episode (default 400)")
    p.add_argument("--repeats", type=positive_int, help="epochs per loading measurement, the best kept (default 3)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="4 episodes × 64 frames, 1 repetition; 2 and 3 tiny h1_2-stand episodes: a smoke run "
        "(--episodes, --frames, --repeats still apply)",
    )
    p.add_argument(
        "--lerobot-python",
        help="python of a scratch environment with lerobot 0.4.4 (e.g. /tmp/lerobot_venv/bin/python): "
        "measures the real lerobot on the video workloads in this run",
    )
    p.add_argument("--no-video-peers", action="store_true", help="skip (e), the recorded h1_2-stand workloads")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    defaults = (4, 64, 1) if args.quick else (50, 400, 3)  # what is given explicitly wins
    args.episodes, args.frames, args.repeats = (
        given if given is not None else default
        for given, default in zip((args.episodes, args.frames, args.repeats), defaults)
    )
    with tempfile.TemporaryDirectory(prefix="embody-bench-datasets-") as tmp:
        load_before = os.getloadavg()[0]
        result = measure(args.episodes, args.frames, Path(tmp), args.repeats)
        result["write_video_target_fps"] = WRITE_VIDEO_TARGET
        if not args.no_video_peers:
            result["video_vs_lerobot"] = measure_video_peers(Path(tmp), args.lerobot_python, args.repeats, args.quick)
            result["video_target_x_lerobot"] = VIDEO_TARGET
        result["load_average_1min"] = [load_before, os.getloadavg()[0]]
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
    w = r["rows"][VIDEO_ROW]["embody_fps"]
    print(f"target, {VIDEO_ROW} ≥ {WRITE_VIDEO_TARGET:,.0f} frames/s: {w:,.0f} ({_verdict(w >= WRITE_VIDEO_TARGET)})")
    if "video_vs_lerobot" in r:
        _print_video_peers(r["video_vs_lerobot"])
    print(f"\nload average (1 min) at start and end: {r['load_average_1min'][0]:.2f}, {r['load_average_1min'][1]:.2f}")


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "BELOW-TARGET"


def _print_video_peers(workloads: dict) -> None:
    print(
        f"\nloading with video, shuffled, batch {VIDEO_BATCH}, one process, the same files; "
        "lerobot 0.4.4 (pyav video backend) measured in this run when --lerobot-python is given:\n"
    )
    print(
        "| workload | frames | embody .loader() | embody default collate | lerobot | embody / lerobot |"
        "\n|---|---|---|---|---|---|"
    )
    for name, w in workloads.items():
        peer = f"{w['lerobot_fps']:,.0f}" if w["lerobot_fps"] else w["lerobot"]["why"]
        ratio = f"{w['ratio']:.1f}× ({w['ratio_default_collate']:.1f}×)" if w["ratio"] else "—"
        print(
            f"| {name} | {w['frames']} | {w['embody_fps']:,.0f} | {w['embody_default_collate_fps']:,.0f} "
            f"| {peer} | {ratio} |"
        )
    for name, w in workloads.items():
        if w["ratio"]:
            print(
                f"target, {name} ≥ {VIDEO_TARGET:.0f}× lerobot: {w['ratio']:.1f}× ({_verdict(w['ratio'] >= VIDEO_TARGET)})"
            )
