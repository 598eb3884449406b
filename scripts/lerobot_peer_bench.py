"""Peer for ``embody bench datasets``: the real lerobot's frames/s loading a dataset with its videos.

Run by the benchmark with the interpreter of a scratch virtual environment that holds lerobot
(never the project's own; see scripts/lerobot_peer_check.py for the setup):

    /tmp/lerobot_venv/bin/python scripts/lerobot_peer_bench.py ROOT --batch 32 --repeats 3

It loads ROOT with ``LeRobotDataset`` (``--backend``: lerobot's video backend, pyav by default),
iterates a torch ``DataLoader`` (shuffled, ``--batch``, ``--workers`` processes, seed 0): one
untimed warm-up epoch, then ``--repeats`` timed epochs, and prints one JSON line: frames, each
epoch's frames/s, the best, and the versions. Only the standard library and what lerobot brings
are imported, so that it runs in that environment.
"""

import argparse
import json
import time
from importlib.metadata import version


def epoch(loader) -> tuple[int, float]:
    """(frames, seconds) of one pass over ``loader``."""
    frames, start = 0, time.perf_counter()
    for batch in loader:
        frames += len(batch["index"])
    return frames, time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--backend", default="pyav")
    args = p.parse_args()

    import torch
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    torch.manual_seed(0)
    start = time.perf_counter()
    ds = LeRobotDataset("embody/bench", root=args.root, video_backend=args.backend)
    open_s = time.perf_counter() - start
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    first = epoch(loader)
    timed = [epoch(loader) for _ in range(args.repeats)]
    rates = [n / s for n, s in timed]
    print(
        json.dumps(
            {
                "frames": ds.num_frames,
                "episodes": ds.num_episodes,
                "open_s": open_s,
                "first_epoch_fps": first[0] / first[1],
                "epoch_fps": rates,
                "fps": max(rates),
                "backend": args.backend,
                "lerobot": version("lerobot"),
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
