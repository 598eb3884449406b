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


def plot(ds, out: Path, episode: int = 0) -> list[Path]:
    """One PNG per feature of ``episode``: each joint-named feature as a grid (a row per limb, a subplot per joint,
    named from the robot spec), the other signals as one subplot per feature; a shared time axis. Returns the
    files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .content import episode_content

    c = episode_content(ds, episode, video=False)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for series in c.joints:
        limbs = list(dict.fromkeys(series.limbs))
        cols = max(series.limbs.count(limb) for limb in limbs)
        fig, axes = plt.subplots(len(limbs), cols, figsize=(2.6 * cols, 1.9 * len(limbs)), sharex=True, squeeze=False)
        for ax in axes.flat:
            ax.set_visible(False)
        for row, limb in enumerate(limbs):
            for col, j in enumerate(i for i, lb in enumerate(series.limbs) if lb == limb):
                ax = axes[row, col]
                ax.set_visible(True)
                ax.plot(c.time, series.values[:, j], lw=1)
                ax.set_title(series.joints[j].removesuffix("_joint"), fontsize=8)
                ax.tick_params(labelsize=7)
            axes[row, 0].set_ylabel(limb, fontsize=8)
        paths.append(
            _save(
                fig,
                out / f"ep{episode:03d}_{series.quantity}.png",
                f"episode {episode}: {series.key} ({series.quantity})",
            )
        )
    groups: dict[str, dict[str, np.ndarray]] = {}
    for name, values in c.signals.items():
        feature, _, component = name.partition("/")
        groups.setdefault(feature, {})[component or feature] = values
    if groups:
        fig, axes = plt.subplots(len(groups), 1, figsize=(8, 1.6 * len(groups)), sharex=True, squeeze=False)
        for ax, (feature, components) in zip(axes[:, 0], groups.items()):
            for name, values in components.items():
                ax.plot(c.time, values, lw=1, label=name)
            ax.set_title(feature, fontsize=8)
            ax.tick_params(labelsize=7)
            if 1 < len(components) <= 10:
                ax.legend(fontsize=6, loc="upper right")
        paths.append(_save(fig, out / f"ep{episode:03d}_signals.png", f"episode {episode}: signals"))
    return paths


def _save(fig, path: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    fig.supxlabel("time [s]", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
