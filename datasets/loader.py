"""A torch Dataset over dataset frames, with lerobot's ``delta_timestamps`` stacking and padding.

State-only (``video=False``) keeps every non-video column in memory as one contiguous array
and gathers a whole batch with one vectorized ``np.take`` per key (numpy, single-threaded: torch's
threaded indexing is slower on busy CPUs), handing torch zero-copy views: ``__getitems__`` (which
``DataLoader`` calls with the batch's indices) returns the batch already stacked, and
:meth:`EpisodeDataset.collate` (or :meth:`EpisodeDataset.loader`) passes it through. With the
default collate it still works, item by item.

Item layout (lerobot's): every non-video feature as a tensor of its shape ((), for shape-(1,)
features); for a key in ``delta_timestamps`` a stack ``(len(deltas), *shape)`` of the frames at
t + delta, clamped to the episode's first/last frame, plus ``"<key>_is_pad"`` (bool,
``(len(deltas),)``) marking the clamped ones; videos as float32 (3, H, W) in [0, 1]; ``task``
(str).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, default_collate
from torch.utils.data import Dataset as TorchDataset

from .format import Dataset, load


class _Batch(Sequence):
    """A batch gathered at once; reads as a list of items for collate functions that want one."""

    def __init__(self, data: dict):
        self.data = data
        self._n = len(data["index"])
        self._items: list[dict] | None = None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, j):
        if self._items is None:  # split once (unbind is one C call per key), not once per access
            cols = [v.unbind(0) if torch.is_tensor(v) else v for v in self.data.values()]
            self._items = [dict(zip(self.data, row)) for row in zip(*cols)]
        return self._items[j]


class EpisodeDataset(TorchDataset):
    """Frames of a dataset (a root folder or a loaded :class:`Dataset`) as torch items.

    ``delta_timestamps``: {key: [seconds relative to the frame]}, each a multiple of 1/fps within
    ``tolerance_s`` (e.g. {"observation.state": [-0.1, -0.05, 0.0], "action": [0.0, 0.05, ...]}).
    ``video``: decode the video keys (False: state-only, fast).
    """

    def __init__(
        self,
        root_or_dataset: str | Path | Dataset,
        delta_timestamps: dict[str, list[float]] | None = None,
        video: bool = True,
        tolerance_s: float = 1e-4,
    ):
        ds = root_or_dataset if isinstance(root_or_dataset, Dataset) else load(root_or_dataset)
        self.dataset, self.fps = ds, ds.fps
        self.video_keys = list(ds.video_keys) if video else []
        self.keys = [k for k, ft in ds.features.items() if ft["dtype"] != "video"]
        self._cols = {k: np.ascontiguousarray(ds.column(k)) for k in self.keys}
        starts, ends = ds.episode_bounds
        ep = self._cols["episode_index"]
        self._from = starts[ep] if len(starts) else np.zeros(0, dtype=np.int64)  # per frame: its episode's range
        self._to = ends[ep] if len(ends) else np.zeros(0, dtype=np.int64)
        self._tasks = list(ds.tasks)
        self.delta_indices: dict[str, torch.Tensor] = {}
        for key, deltas in (delta_timestamps or {}).items():
            if key not in ds.features:
                raise KeyError(f"delta_timestamps key {key!r} is not a feature; features: {list(ds.features)}")
            if ds.features[key]["dtype"] == "video" and key not in self.video_keys:
                raise ValueError(f"delta_timestamps asks for video {key!r} but video=False")
            steps = np.asarray(deltas, dtype=np.float64) * self.fps
            off = np.abs(steps - np.round(steps)) / self.fps
            if np.any(off > tolerance_s):
                bad = [d for d, o in zip(deltas, off) if o > tolerance_s]
                raise ValueError(
                    f"delta_timestamps[{key!r}] values {bad} are not multiples of 1/{self.fps} s "
                    f"(tolerance {tolerance_s} s)"
                )
            self.delta_indices[key] = np.round(steps).astype(np.int64)

    def __len__(self) -> int:
        return self.dataset.num_frames

    def _window(self, key: str, idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Frame indices (B, D) for ``key``'s deltas clamped to each episode, and the (B, D) pad mask."""
        want = idx[:, None] + self.delta_indices[key][None, :]
        return np.clip(want, lo[:, None], hi[:, None] - 1), (want < lo[:, None]) | (want >= hi[:, None])

    def _gather(self, idx: np.ndarray) -> dict:
        """Batch of frames ``idx`` (B,) int64 -> dict of stacked tensors (and ``task``: list of B strings)."""
        out: dict = {}
        lo, hi = self._from[idx], self._to[idx]
        for key in self.keys:
            if key in self.delta_indices:
                rows, pad = self._window(key, idx, lo, hi)
                out[key] = torch.from_numpy(np.take(self._cols[key], rows, axis=0))
                out[f"{key}_is_pad"] = torch.from_numpy(pad)
            else:
                out[key] = torch.from_numpy(np.take(self._cols[key], idx, axis=0))
        for key in self.video_keys:
            out.update(self._video(key, idx, lo, hi))
        out["task"] = [self._tasks[t] for t in np.take(self._cols["task_index"], idx).tolist()]
        return out

    def _video(self, key: str, idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> dict:
        if key in self.delta_indices:
            rows, pad = self._window(key, idx, lo, hi)
        else:
            rows, pad = idx[:, None], None
        frames = self._frames(key, idx, rows - lo[:, None])  # (B, k, H, W, 3) uint8
        # numpy's float32 x / 255 gives torch's .float().div_(255.0) bit for bit (tested over all 256
        # values), single-threaded (torch's threaded one is ~3x slower on a busy 2-core machine), and
        # written channels-first in the same pass: contiguous (3, H, W) items, as lerobot's, which a
        # default collate stacks 2-4x faster than strided views
        b, k, h, w, c = frames.shape
        scaled = np.empty((b, k, c, h, w), dtype=np.float32)
        np.divide(frames.transpose(0, 1, 4, 2, 3), np.float32(255.0), out=scaled)
        stacked = torch.from_numpy(scaled)  # (B, k, 3, H, W)
        if pad is None:
            return {key: stacked[:, 0]}
        return {key: stacked, f"{key}_is_pad": torch.from_numpy(pad)}

    def _frames(self, key: str, idx: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """(B, k, H, W, 3) uint8: frames ``rel`` (B, k) of each item's episode, one decode call per
        episode in the batch (neighbouring frames then share their keyframe's decoding)."""
        episodes = self._cols["episode_index"][idx]
        out = None if len(idx) else np.empty((*rel.shape, *self.dataset.features[key]["shape"]), dtype=np.uint8)
        for ep in np.unique(episodes).tolist():
            mine = np.flatnonzero(episodes == ep)
            got = self.dataset.frames(ep, key, rel[mine].ravel())  # (len(mine) * k, H, W, 3)
            if out is None:
                out = np.empty((*rel.shape, *got.shape[1:]), dtype=np.uint8)
            out[mine] = got.reshape(len(mine), rel.shape[1], *got.shape[1:])
        return out

    def __getitem__(self, i: int) -> dict:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"frame {i} out of range ({n} frames)")
        batch = self._gather(np.array([i % n], dtype=np.int64))
        return {k: v[0] for k, v in batch.items()}

    def __getitems__(self, indices: list[int]) -> _Batch:
        """A whole batch in one vectorized gather (DataLoader calls this when it exists)."""
        return _Batch(self._gather(np.asarray(indices, dtype=np.int64)))

    @staticmethod
    def collate(batch) -> dict:
        """Collate for DataLoader: a pre-gathered batch passes through; anything else goes to default_collate."""
        return batch.data if isinstance(batch, _Batch) else default_collate(batch)

    def loader(self, batch_size: int = 256, shuffle: bool = True, **kwargs) -> DataLoader:
        """A DataLoader with :meth:`collate` (keyword arguments go to DataLoader)."""
        return DataLoader(self, batch_size=batch_size, shuffle=shuffle, collate_fn=self.collate, **kwargs)
