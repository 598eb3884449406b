"""One row of the episodes table (``meta/episodes/…parquet``), typed.

lerobot's columns (``dataset_metadata.py`` ``_save_episode_metadata``), in the order we write them:
episode_index, tasks, length, data/chunk_index, data/file_index, dataset_from_index,
dataset_to_index, videos/<key>/{chunk_index, file_index, from_timestamp, to_timestamp} per camera,
stats/<feature>/<stat>, meta/episodes/chunk_index, meta/episodes/file_index. Feature names hold
no "/", so every column name splits unambiguously.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .schema import DATA_PATH, VIDEO_PATH, DatasetFormatError

CLIP_FIELDS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
_BASE = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)
_META = ("meta/episodes/chunk_index", "meta/episodes/file_index")


@dataclass(frozen=True, order=True)
class Location:
    """Where a file sits in the chunked layout: ``chunk-{chunk:03d}/file-{file:03d}``."""

    chunk: int = 0
    file: int = 0

    def path(self, template: str, **keys) -> str:
        """``template`` (DATA_PATH, VIDEO_PATH, ...) filled with this location and ``keys``."""
        return template.format(chunk_index=self.chunk, file_index=self.file, **keys)

    def next(self, chunks_size: int) -> Location:
        """lerobot's ``update_chunk_file_indices``: the file after this one."""
        return Location(self.chunk + 1, 0) if self.file >= chunks_size - 1 else Location(self.chunk, self.file + 1)


@dataclass(frozen=True)
class VideoClip:
    """An episode's frames inside one camera's MP4: [from_timestamp, to_timestamp) seconds."""

    location: Location
    from_timestamp: float
    to_timestamp: float


@dataclass(frozen=True)
class EpisodeRow:
    """An episode: its frames are rows [dataset_from_index, dataset_to_index) of the data table.

    ``videos``: camera key -> clip; ``stats``: feature -> stat -> value (JSON-able lists);
    ``extra``: columns another writer added, kept as read. ``row["data/file_index"]`` reads any
    stored column by name, as the plain dicts this type replaced did.
    """

    episode_index: int
    tasks: list[str]
    length: int
    data: Location
    dataset_from_index: int
    dataset_to_index: int
    videos: dict[str, VideoClip] = field(default_factory=dict)
    stats: dict[str, dict[str, list]] = field(default_factory=dict)
    meta: Location = Location()
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def data_path(self) -> str:
        """The data parquet holding this episode's frames, relative to the root."""
        return self.data.path(DATA_PATH)

    def video_path(self, key: str) -> str:
        """The MP4 holding this episode's ``key`` clip, relative to the root."""
        return self.videos[key].location.path(VIDEO_PATH, video_key=key)

    def paths(self) -> list[str]:
        """Every data and video file this episode lives in."""
        return [self.data_path, *(self.video_path(k) for k in self.videos)]

    def columns(self) -> dict:
        """The row as the episodes table stores it (column name -> value), in lerobot's order."""
        out = {
            "episode_index": self.episode_index,
            "tasks": list(self.tasks),
            "length": self.length,
            "data/chunk_index": self.data.chunk,
            "data/file_index": self.data.file,
            "dataset_from_index": self.dataset_from_index,
            "dataset_to_index": self.dataset_to_index,
        }
        for key, clip in self.videos.items():
            out.update(
                zip(
                    (f"videos/{key}/{c}" for c in CLIP_FIELDS),
                    (clip.location.chunk, clip.location.file, clip.from_timestamp, clip.to_timestamp),
                )
            )
        out.update({f"stats/{key}/{s}": v for key, d in self.stats.items() for s, v in d.items()})
        out.update({_META[0]: self.meta.chunk, _META[1]: self.meta.file, **self.extra})
        return out

    def __getitem__(self, column: str):
        return self.columns()[column]

    @classmethod
    def from_columns(cls, cols: Mapping, path: str | Path) -> EpisodeRow:
        """A row read from the episodes table ``path`` (named in the error when columns are missing)."""
        keys = list(dict.fromkeys(c.split("/")[1] for c in cols if c.startswith("videos/") and c.count("/") == 2))
        clip_columns = [f"videos/{k}/{c}" for k in keys for c in CLIP_FIELDS]
        missing = [c for c in (*_BASE, *_META, *clip_columns) if c not in cols]
        if missing:
            raise DatasetFormatError(path, f"missing columns {sorted(missing)}")
        stats: dict[str, dict[str, list]] = {}
        for c in cols:
            if c.startswith("stats/") and c.count("/") == 2:
                _, key, stat = c.split("/")
                stats.setdefault(key, {})[stat] = cols[c]
        known = {*_BASE, *_META, *clip_columns} | {f"stats/{k}/{s}" for k, d in stats.items() for s in d}
        videos = {
            k: VideoClip(
                Location(int(cols[f"videos/{k}/chunk_index"]), int(cols[f"videos/{k}/file_index"])),
                float(cols[f"videos/{k}/from_timestamp"]),
                float(cols[f"videos/{k}/to_timestamp"]),
            )
            for k in keys
        }
        return cls(
            int(cols["episode_index"]),
            list(cols["tasks"]),
            int(cols["length"]),
            Location(int(cols["data/chunk_index"]), int(cols["data/file_index"])),
            int(cols["dataset_from_index"]),
            int(cols["dataset_to_index"]),
            videos,
            stats,
            Location(int(cols[_META[0]]), int(cols[_META[1]])),
            {c: v for c, v in cols.items() if c not in known},
        )
