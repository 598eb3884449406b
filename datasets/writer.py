"""Recording episodes: :class:`DatasetWriter` (one data file and one MP4 per camera per episode).

Shapes: T frames of the episode being recorded; a frame holds each feature at its declared shape.
"""

from __future__ import annotations

import shutil
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from embody.extras import require

from . import _storage as st
from . import _video
from .checks import checksum_problems, raise_first
from .episodes import EpisodeRow, Location, VideoClip
from .meta import Layout, episodes_bytes, info_json, tasks_table, write_meta
from .schema import (
    CHECKSUMS_PATH,
    DATA_PATH,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    EPISODES_FILE,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetFormatError,
    comparable,
    data_schema,
    normalize_features,
    to_arrow,
)
from .snapshot import Snapshot
from .stats import STATS, ImageStats, aggregate, array_stats
from .stats import to_json as stats_to_json


class DatasetWriter:
    """Record episodes into ``root`` (created, or appended to when it holds the same features).

    ``features``: name -> :func:`feature` for the per-frame arrays, e.g. ``observation.state``
    (float32, (J,)), ``action``, ``embody.sim_state`` (float64, exact simulator state), and video
    keys ``observation.images.<camera>`` (dtype "video", (H, W, 3)). The standard columns
    (timestamp, frame_index, episode_index, index, task_index) are added. ``chunk_size`` is the
    number of files per chunk folder; ``keyframe_interval`` the video GOP (frames). ``recording``:
    JSON-able facts about how the episodes were made (task, simulator, env config, controller),
    kept in info.json under embody.recording for replay; appending keeps the existing ones.

    Each :meth:`save_episode` stages the episode's parquet and MP4s and the rewritten meta files,
    commits them with one atomic rename, then moves them into place: a crash at any point leaves
    every previously saved episode loadable (see ``_storage``).
    """

    def __init__(
        self,
        root: str | Path,
        fps: int,
        features: dict,
        robot_type: str,
        video_keys: tuple = (),
        chunk_size: int = 1000,
        keyframe_interval: int = 2,
        recording: dict | None = None,
    ):
        if int(fps) != fps or fps <= 0:
            raise ValueError(f"fps must be a positive integer, got {fps}")
        if keyframe_interval < 1:
            raise ValueError(f"keyframe_interval must be >= 1, got {keyframe_interval}")
        if not 1 <= chunk_size <= 1000:  # file-{:03d}: beyond 999, sorted paths stop being file order
            raise ValueError(f"chunk_size must be in [1, 1000], got {chunk_size}")
        self.root = Path(root)
        self.fps, self.robot_type, self.gop = int(fps), robot_type, int(keyframe_interval)
        self.recording = dict(recording or {})
        self.features = normalize_features(features, tuple(video_keys))
        self.video_keys = [k for k, ft in self.features.items() if ft["dtype"] == "video"]
        self._frame_keys = [
            k for k, ft in self.features.items() if ft["dtype"] != "video" and k not in DEFAULT_FEATURES
        ]
        self._closed = False
        self._stage: Path | None = None
        self._reset_buffer()
        st.recover_compact(self.root)
        if (self.root / INFO_PATH).is_file():
            self._open_existing(chunk_size)
        else:
            if self.root.exists() and any(p for p in self.root.iterdir() if not p.name.startswith(".")):
                raise DatasetFormatError(
                    self.root, "exists, is not empty and has no meta/info.json: refusing to write a dataset into it"
                )
            self._create(chunk_size)

    # state ------------------------------------------------------------------------------------
    def _create(self, chunk_size: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        st.recover(self.root, discard_uncommitted=True)
        self._layout = Layout(self.fps, self.robot_type, chunk_size, self.gop, recording=self.recording)
        self._tasks: list[str] = []
        self._rows: list[EpisodeRow] = []
        self._stats: dict = {}
        self._checksums: dict[str, str] = {}
        self._video_info: dict[str, dict] = {}
        stage = st.new_stage(self.root)
        self._commit_meta(stage, moves=[])
        st.apply(self.root, stage)

    def _open_existing(self, chunk_size: int) -> None:
        st.recover(self.root, discard_uncommitted=True)
        s = Snapshot(self.root)
        info = s.meta.info
        if not s.meta.ours:
            raise DatasetFormatError(
                self.root / INFO_PATH,
                "a LeRobot dataset not written by embody: appending to it is not supported (no embody checksums)",
            )
        raise_first(
            checksum_problems(self.root, {rel: d for rel, d in s.meta.checksums.items() if rel.startswith("meta/")})
        )
        if (
            comparable(s.features) != comparable(self.features)
            or info.get("fps") != self.fps
            or info.get("robot_type") != self.robot_type
        ):
            raise DatasetFormatError(
                self.root,
                "holds a different dataset (features, fps or robot_type differ): refusing to overwrite "
                f"it; existing fps={info.get('fps')} robot_type={info.get('robot_type')!r} "
                f"features={sorted(s.features)}",
            )
        self.recording = self.recording or info["embody"].get("recording", {})
        self._layout = Layout(
            self.fps,
            self.robot_type,
            int(info.get("chunks_size", chunk_size)),
            max(self.gop, int(info["embody"].get("keyframe_interval", self.gop))),
            info.get("data_files_size_in_mb", DEFAULT_DATA_FILE_SIZE_IN_MB),
            info.get("video_files_size_in_mb", DEFAULT_VIDEO_FILE_SIZE_IN_MB),
            self.recording,
        )
        self._video_info = {k: s.features[k]["info"] for k in self.video_keys if s.features[k].get("info")}
        self._checksums = dict(s.meta.checksums)
        self._tasks, self._rows, self._stats = s.tasks, s.rows, s.stats or {}

    @property
    def num_episodes(self) -> int:
        return len(self._rows)

    @property
    def num_frames(self) -> int:
        return self._rows[-1].dataset_to_index if self._rows else 0

    def _next_location(self, video_key: str | None = None) -> Location:
        """The file after the last one used for data (or for ``video_key``'s clips)."""
        used = (
            [r.data for r in self._rows]
            if video_key is None
            else [r.videos[video_key].location for r in self._rows if video_key in r.videos]
        )
        return max(used).next(self._layout.chunks_size) if used else Location(0, 0)

    def _reset_buffer(self) -> None:
        self._buf: dict[str, list] = {k: [] for k in self._frame_keys}
        self._timestamps: list[float] = []
        self._frame_tasks: list[str] = []
        self._videos: dict[str, _video.EpisodeVideoWriter] = {}
        self._image_stats: dict[str, ImageStats] = {}

    @property
    def pending_frames(self) -> int:
        """Frames added since the last save (the episode being recorded)."""
        return len(self._timestamps)

    # recording --------------------------------------------------------------------------------
    def _checked(self, frame: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The frame's arrays at their declared shapes and dtypes; ValueError naming a mismatch."""
        expected = set(self._frame_keys) | set(self.video_keys)
        given = set(frame) - {"timestamp"}
        if given != expected:
            missing, extra = sorted(expected - given), sorted(given - expected)
            raise ValueError(f"frame does not match the features: missing {missing}, unexpected {extra}")
        checked = {}
        for key in self._frame_keys:
            ft, value = self.features[key], np.asarray(frame[key])
            want = tuple(ft["shape"])
            if value.shape != want and not (want == (1,) and value.shape == ()):
                raise ValueError(f"feature {key!r}: shape {value.shape} does not match the declared {want}")
            if not np.can_cast(value.dtype, ft["dtype"], casting="same_kind"):
                raise ValueError(f"feature {key!r}: dtype {value.dtype} cannot be stored as {ft['dtype']}")
            checked[key] = value.astype(ft["dtype"], copy=False).reshape(want)
        for key in self.video_keys:
            img, want = np.asarray(frame[key]), tuple(self.features[key]["shape"])
            if img.shape != want or img.dtype != np.uint8:
                raise ValueError(f"feature {key!r}: expected a {want} uint8 image, got {img.shape} {img.dtype}")
        return checked

    def add_frame(self, frame: dict[str, np.ndarray], task: str) -> None:
        """Buffer one frame: every declared feature (shape-checked), optional ``timestamp`` (s)."""
        if self._closed:
            raise RuntimeError("the writer is closed")
        if not isinstance(task, str) or not task:
            raise ValueError(f"task must be a non-empty string, got {task!r}")
        checked = self._checked(frame)
        ts = float(frame["timestamp"]) if "timestamp" in frame else len(self._timestamps) / self.fps
        if self._stage is None:
            self._stage = st.new_stage(self.root)
        for key in self.video_keys:
            if key not in self._videos:
                self._videos[key] = _video.EpisodeVideoWriter(
                    self._stage / "videos" / f"{key}.mp4", self.fps, gop=self.gop, crf=_video.CRF
                )
                self._image_stats[key] = ImageStats()
            self._videos[key].write(frame[key])
            self._image_stats[key].add(frame[key])
        for key, value in checked.items():
            self._buf[key].append(value)
        self._timestamps.append(ts)
        self._frame_tasks.append(task)

    def discard_episode(self) -> None:
        """Drop the frames buffered since the last save."""
        for w in self._videos.values():
            w.abort()
        if self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None
        self._reset_buffer()

    def save_episode(self) -> int:
        """Write the buffered frames as the next episode; returns its episode_index.

        If this raises before the commit, the episode is dropped and the dataset is unchanged.
        """
        n = len(self._timestamps)
        if n == 0:
            raise ValueError("no frames to save: call add_frame first")
        stage, ep = self._stage, self.num_episodes
        try:
            for w in self._videos.values():
                w.close()
            moves, row, new_tasks, file_sums = self._stage_episode(stage, ep, n)
            self._commit_meta(stage, moves, row, new_tasks, file_sums)
        except BaseException:
            self.discard_episode()  # not committed: the stage goes, the dataset stays as it was
            raise
        self._stage = None
        self._reset_buffer()
        st.apply(self.root, stage)  # committed: a crash from here on is rolled forward by recover()
        return ep

    def _episode_arrays(self, ep: int, n: int, task_ids: dict[str, int]) -> dict[str, np.ndarray]:
        """The buffered frames as (T, *shape) arrays, standard columns included."""
        start = self.num_frames
        arrays = {k: np.stack(v) for k, v in self._buf.items()}
        arrays["timestamp"] = np.asarray(self._timestamps, dtype=np.float32)
        arrays["frame_index"] = np.arange(n, dtype=np.int64)
        arrays["episode_index"] = np.full(n, ep, dtype=np.int64)
        arrays["index"] = np.arange(start, start + n, dtype=np.int64)
        arrays["task_index"] = np.asarray([task_ids[t] for t in self._frame_tasks], dtype=np.int64)
        return arrays

    def _stage_episode(self, stage: Path, ep: int, n: int) -> tuple[list, EpisodeRow, list, dict]:
        """Write the episode's parquet into the stage; return (moves, episode row, new tasks, file sha256s)."""
        pa = require("pyarrow", "datasets")

        new_tasks = [t for t in dict.fromkeys(self._frame_tasks) if t not in self._tasks]
        arrays = self._episode_arrays(ep, n, {t: i for i, t in enumerate(self._tasks + new_tasks)})
        schema = data_schema(self.features)
        table = pa.table([to_arrow(arrays[f.name], self.features[f.name]) for f in schema], schema=schema)
        st.write_atomic(stage / "data.parquet", st.parquet_bytes(table))
        data = self._next_location()
        moves = [("data.parquet", data.path(DATA_PATH))]
        videos = {}
        for key in self.video_keys:
            loc = self._next_location(key)
            moves.append((f"videos/{key}.mp4", loc.path(VIDEO_PATH, video_key=key)))
            if key not in self._video_info:
                self._video_info[key] = _video.video_info(stage / moves[-1][0], self.gop, _video.CRF)
            videos[key] = VideoClip(loc, 0.0, n / self.fps)
        file_sums = {rel: st.sha256_file(stage / staged) for staged, rel in moves}
        stats = {k: array_stats(arrays[k]) for k in schema.names}
        stats.update({k: self._image_stats[k].result() for k in self.video_keys})
        row = EpisodeRow(
            ep,
            list(dict.fromkeys(self._frame_tasks)),
            n,
            data,
            self.num_frames,
            self.num_frames + n,
            videos,
            stats_to_json({k: stats[k] for k in self.features}),
        )
        return moves, row, new_tasks, file_sums

    def _commit_meta(
        self,
        stage: Path,
        moves: list,
        row: EpisodeRow | None = None,
        new_tasks: list | None = None,
        file_sums: dict | None = None,
    ) -> None:
        """Stage the rewritten meta files, commit, and adopt the new state (the caller applies the stage)."""
        tasks, rows = self._tasks + list(new_tasks or []), list(self._rows)
        stats, checksums = dict(self._stats), dict(self._checksums)
        if row is not None:
            rows.append(replace(row, meta=Location(0, 0)))
            for key in self.features:
                new = {s: np.asarray(row.stats[key][s]) for s in STATS}
                stats[key] = aggregate(stats[key], new) if key in stats else new
            checksums.update(file_sums or {})
        features = {k: dict(ft) for k, ft in self.features.items()}
        for key, vinfo in self._video_info.items():
            features[key]["info"] = vinfo
        info = info_json(self._layout, features, len(rows), rows[-1].dataset_to_index if rows else 0, len(tasks))
        meta: list[tuple[str, bytes]] = []
        if rows:
            meta += [
                (TASKS_PATH, st.parquet_bytes(tasks_table(tasks))),
                (EPISODES_FILE, episodes_bytes(rows)),
                (STATS_PATH, st.json_bytes(stats_to_json(stats))),
            ]
        write_meta(stage, meta + [(INFO_PATH, st.json_bytes(info))], checksums)
        # meta last, info.json very last: a reader that ignores the journal sees old or new, rarely a mix
        st.commit(stage, list(moves) + [(rel, rel) for rel, _ in meta] + [(CHECKSUMS_PATH,) * 2, (INFO_PATH,) * 2])
        # committed: adopt the new state
        self._tasks, self._rows, self._stats, self._checksums = tasks, rows, stats, checksums

    def close(self) -> None:
        """Finish; frames added since the last save_episode are discarded (with a warning)."""
        if self._closed:
            return
        if self._timestamps:
            warnings.warn(
                f"DatasetWriter.close: discarding {len(self._timestamps)} unsaved frames "
                "(call save_episode to keep them)",
                stacklevel=2,
            )
        self.discard_episode()
        self._closed = True

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *_) -> None:
        self.close()
