"""Tiny synthetic datasets for the dataset tests (a few frames, 32x32 video); the fixture is in conftest.py."""

from pathlib import Path

import numpy as np

FPS = 10


def features(video: bool = True) -> dict:
    from embody.datasets import feature

    f = {
        "observation.state": feature("float32", (4,)),
        "action": feature("float32", (2,)),
        "observation.privileged": feature("float32", (3, 2)),
        "embody.sim_state": feature("float64", (6,)),
        "embody.command": feature("float32", (3,)),
        "embody.supervisor_event": feature("int64", (1,)),
    }
    if video:
        f["observation.images.front"] = feature("video", (32, 32, 3))
    return f


def smooth_frames(n: int, seed: int) -> np.ndarray:
    """(n, 32, 32, 3) uint8 moving gradients: easy on the codec, so decoded frames stay close."""
    yy, xx = np.mgrid[0:32, 0:32]
    return np.stack(
        [
            np.stack([(xx * 4 + 3 * i + seed * 20) % 256, (yy * 4 + i) % 256, np.full((32, 32), 60 + 30 * seed)], -1)
            for i in range(n)
        ]
    ).astype(np.uint8)


def episode_arrays(n: int, seed: int, video: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ep = {
        "observation.state": rng.standard_normal((n, 4)).astype(np.float32),
        "action": rng.standard_normal((n, 2)).astype(np.float32),
        "observation.privileged": rng.standard_normal((n, 3, 2)).astype(np.float32),
        "embody.sim_state": rng.standard_normal((n, 6)),
        "embody.command": rng.standard_normal((n, 3)).astype(np.float32),
        "embody.supervisor_event": rng.integers(0, 4, n),
    }
    if video:
        ep["observation.images.front"] = smooth_frames(n, seed)
    return ep


def add_episode(writer, ep: dict[str, np.ndarray], task: str) -> None:
    n = len(ep["action"])
    for i in range(n):
        writer.add_frame({k: v[i] for k, v in ep.items()}, task=task)


def write_dataset(root: Path, lengths=(5, 6, 7), video: bool = True, **kwargs) -> list[dict]:
    """Write one episode per length; returns the arrays written (tasks alternate 'pick'/'place')."""
    from embody.datasets import DatasetWriter

    written = []
    with DatasetWriter(root, fps=FPS, features=features(video), robot_type="peg_arm", **kwargs) as w:
        for e, n in enumerate(lengths):
            ep = episode_arrays(n, e, video)
            add_episode(w, ep, "pick" if e % 2 == 0 else "place")
            assert w.save_episode() == e
            written.append(ep)
    return written
