"""``embody dataset info|validate|stats|plot DIR``: what a dataset holds, whether it is sound, and plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def info(ds) -> dict:
    """A short description: episodes, frames, fps, robot, tasks, features, embody's recording metadata."""
    meta = ds.info.get("embody", {}).get("recording", {})
    return {
        "root": str(ds.root),
        "codebase_version": ds.info.get("codebase_version"),
        "robot_type": ds.info.get("robot_type"),
        "episodes": ds.num_episodes,
        "frames": ds.num_frames,
        "fps": ds.fps,
        "tasks": list(ds.tasks),
        "features": {k: f"{v['dtype']} {tuple(v['shape'])}" for k, v in ds.features.items()},
        "recorded": {k: meta[k] for k in ("task", "sim", "controller", "seed") if k in meta},
    }


def stats(ds) -> dict:
    """Per numeric feature: min, max, mean, std over all frames (vectors per component)."""
    out = {}
    for key, f in ds.features.items():
        if f["dtype"] in ("video", "image", "string"):
            continue
        x = np.asarray(ds.column(key), dtype=np.float64).reshape(ds.num_frames, -1)
        out[key] = {
            "min": x.min(0).tolist(),
            "max": x.max(0).tolist(),
            "mean": x.mean(0).tolist(),
            "std": x.std(0).tolist(),
        }
    return out


def plot(ds, out: Path, episode: int = 0, keys: tuple[str, ...] = ("observation.state", "action")) -> list[Path]:
    """One PNG per joint (per component of ``keys``) of ``episode`` against time; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    ep = ds.episode(episode)
    t = np.arange(len(ep["frame_index"])) / ds.fps
    paths = []
    for key in keys:
        if key not in ep:
            continue
        names = ds.features[key].get("names") or [f"{key}[{i}]" for i in range(ep[key].shape[1])]
        for i, name in enumerate(names):
            fig, ax = plt.subplots(figsize=(6, 2.5))
            ax.plot(t, ep[key][:, i])
            ax.set_xlabel("time [s]")
            ax.set_title(f"episode {episode}: {key} {name}")
            fig.tight_layout()
            paths.append(out / f"ep{episode:03d}_{key}_{i:02d}_{name}.png".replace("/", "_"))
            fig.savefig(paths[-1], dpi=80)
            plt.close(fig)
    return paths
