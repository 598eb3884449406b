"""Reading a dataset: :func:`load` -> :class:`Dataset` (meta in memory, frames memory-mapped,
videos decoded on demand).

Shapes: N frames in the dataset, E episodes, T frames of one episode, k requested frames.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import _storage as st
from . import _video
from .checks import load_checks, raise_first
from .episodes import EpisodeRow
from .schema import INFO_PATH, DatasetFormatError, to_numpy, video_keys
from .snapshot import Snapshot

MAX_OPEN_VIDEOS = 64  # video files kept open per process (two descriptors each)


class Dataset:
    """A loaded dataset: meta in memory, the per-frame table memory-mapped, videos decoded on demand.

    ``info`` (info.json), ``fps``, ``features`` (name -> dtype/shape/names[/info]), ``tasks``
    (task_index -> string), ``episodes`` (:class:`EpisodeRow` per episode), ``stats``,
    ``num_episodes``, ``num_frames``, ``video_keys``.
    """

    def __init__(
        self,
        root: Path,
        info: dict,
        features: dict,
        tasks: list[str],
        rows: list[EpisodeRow],
        table,
        stats: dict | None,
    ):
        self.root, self.info, self.features, self.tasks, self.episodes, self.stats = (
            root,
            info,
            features,
            tasks,
            rows,
            stats,
        )
        self.fps = int(info["fps"])
        self.video_keys = video_keys(features)
        self.num_episodes = len(rows)
        self.num_frames = int(table.num_rows)
        self._table = table
        self._columns: dict[str, np.ndarray] = {}
        self._from = np.asarray([r.dataset_from_index for r in rows], dtype=np.int64)
        self._to = np.asarray([r.dataset_to_index for r in rows], dtype=np.int64)
        self._readers: dict = {}

    def __repr__(self) -> str:
        return (
            f"Dataset({str(self.root)!r}, episodes={self.num_episodes}, frames={self.num_frames}, "
            f"fps={self.fps}, features={list(self.features)})"
        )

    @property
    def table(self):
        """The per-frame arrow table, N rows in frame order, memory-mapped (video features are not columns)."""
        return self._table

    @property
    def episode_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(dataset_from_index, dataset_to_index) per episode, (E,) int64 each."""
        return self._from, self._to

    def column(self, key: str) -> np.ndarray:
        """A whole non-video column in frame order: (N, *shape), (N,) for shape-(1,) features. Read-only."""
        if key not in self._columns:
            ft = self.features.get(key)
            if ft is None:
                raise KeyError(f"no feature {key!r}; features: {list(self.features)}")
            if ft["dtype"] == "video":
                raise KeyError(f"{key!r} is a video: use frames()")
            arr = to_numpy(self._table.column(key), ft)
            arr.flags.writeable = False
            self._columns[key] = arr
        return self._columns[key]

    def row(self, i: int) -> EpisodeRow:
        """Episode ``i``'s row of the episodes table."""
        if not -self.num_episodes <= i < self.num_episodes:
            raise IndexError(f"episode {i} out of range (dataset has {self.num_episodes})")
        return self.episodes[i]

    def episode(self, i: int) -> dict[str, np.ndarray]:
        """All non-video columns of episode ``i`` (copies), arrays in frame order, (T, *shape)."""
        row = self.row(i)
        a, b = row.dataset_from_index, row.dataset_to_index
        return {k: self.column(k)[a:b].copy() for k, ft in self.features.items() if ft["dtype"] != "video"}

    def task(self, i: int) -> str:
        """The (first) task of episode ``i``."""
        return self.row(i).tasks[0]

    def video_file(self, i: int, video_key: str) -> tuple[Path, float, float]:
        """(path, from_timestamp, to_timestamp) of episode ``i``'s clip of ``video_key``."""
        if video_key not in self.video_keys:
            raise KeyError(f"no video {video_key!r}; videos: {self.video_keys}")
        row = self.row(i)
        clip = row.videos[video_key]
        return self.root / row.video_path(video_key), clip.from_timestamp, clip.to_timestamp

    def frames(self, i: int, video_key: str, frame_indices=None) -> np.ndarray:
        """Decoded frames of episode ``i``: (k, H, W, 3) uint8 (all frames when ``frame_indices`` is None)."""
        import av

        n = self.row(i).length
        idx = np.arange(n) if frame_indices is None else np.atleast_1d(np.asarray(frame_indices, dtype=np.int64))
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"frame indices must lie in [0, {n}) for episode {i}, got {idx.min()}..{idx.max()}")
        path, from_ts, _ = self.video_file(i, video_key)
        if not path.is_file():
            raise DatasetFormatError(path, f"missing (video {video_key!r} of episode {i})")
        try:
            return self._reader(path).frames(from_ts, self.fps, idx)
        except (av.FFmpegError, LookupError) as e:
            self._drop_reader(path)
            raise DatasetFormatError(path, f"cannot decode episode {i} ({e})") from None

    def _reader(self, path: Path) -> _video.VideoReader:
        """A :class:`_video.VideoReader` per (process, file), the least recently used closed beyond
        ``MAX_OPEN_VIDEOS`` (a shuffled epoch touches every file each batch: reopening one costs a
        demux of the whole file)."""
        key = (os.getpid(), str(path))
        reader = self._readers.pop(key, None)
        if reader is None:
            reader = _video.VideoReader(path)
            while len(self._readers) >= MAX_OPEN_VIDEOS:
                self._readers.pop(next(iter(self._readers))).close()
        self._readers[key] = reader  # dicts keep insertion order: the end is the most recent
        return reader

    def _drop_reader(self, path: Path) -> None:
        reader = self._readers.pop((os.getpid(), str(path)), None)
        if reader is not None:
            reader.close()

    def __getstate__(self):  # open files do not pickle (DataLoader workers)
        state = dict(self.__dict__)
        state["_readers"] = {}
        return state


def load(root: str | Path, verify: bool = True) -> Dataset:
    """Open a dataset. ``verify`` checks every file against meta/embody_checksums.json (sha256).

    Raises DatasetFormatError naming the file for a missing or corrupt file, an unknown
    codebase_version, or a newer embody schema; older embody schemas are migrated in memory.
    Plain LeRobot v3.0 datasets (no embody section) load without checksum verification.
    """
    root = Path(root)
    st.recover_compact(root)
    if not (root / INFO_PATH).is_file():
        raise DatasetFormatError(root / INFO_PATH, "missing: not a LeRobot v3.0 dataset")
    st.recover(root, discard_uncommitted=False)
    s = Snapshot(root)
    for check in load_checks(verify):
        raise_first(check(s))
    return Dataset(root, s.info, s.features, s.tasks, s.rows, s.table, s.stats)
