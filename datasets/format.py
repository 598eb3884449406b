"""Robot-episode datasets in the LeRobot v3.0 on-disk layout, written with pyarrow and PyAV only.

Layout (``root/``)::

    meta/info.json                                   codebase_version "v3.0", counts, fps, features, path templates
    meta/stats.json                                  per feature: min, max, mean, std, count
    meta/tasks.parquet                               task (the pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet         one row per episode (locations, ranges, per-episode stats)
    meta/embody_checksums.json                       ours: sha256 of every other file
    data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet           per-frame columns
    videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4  one stream per camera

The writer gives every episode its own data file and video files (crash safety: a save never
rewrites a file an earlier episode lives in); :func:`compact` packs them into the larger files
the format prefers. Both are valid v3.0: an episodes-table row says which file holds the
episode and, for videos, its [from_timestamp, to_timestamp) inside that file.

What this follows (read from lerobot's source, huggingface/lerobot ``src/lerobot/datasets``):

* ``utils.py``: ``DEFAULT_DATA_PATH``, ``DEFAULT_VIDEO_PATH``, ``DEFAULT_EPISODES_PATH``
  (``chunk-{chunk_index:03d}/file-{file_index:03d}``), ``meta/tasks.parquet``, ``meta/stats.json``,
  ``DEFAULT_FEATURES`` (timestamp float32, frame_index/episode_index/index/task_index int64,
  shape (1,)), ``create_empty_dataset_info`` (the info.json fields: codebase_version, robot_type,
  total_episodes, total_frames, total_tasks, chunks_size, data_files_size_in_mb,
  video_files_size_in_mb, fps, splits, data_path, video_path, features),
  ``update_chunk_file_indices`` (file index wraps at chunks_size into the next chunk),
  ``get_hf_features_from_features`` (video features are not parquet columns; shape (1,) is a
  scalar column, (n,) a fixed-length list), feature names must not contain "/".
* ``dataset_metadata.py``: ``save_episode`` / ``_save_episode_metadata`` (episode row = episode_index,
  tasks, length, data/chunk_index, data/file_index, dataset_from_index, dataset_to_index,
  videos/<key>/{chunk_index,file_index,from_timestamp,to_timestamp}, ``stats/<feature>/<stat>``,
  meta/episodes/{chunk_index,file_index}; splits = {"train": "0:<total_episodes>"}), tasks as a
  pandas frame indexed by ``task`` with a ``task_index`` column.
* ``lerobot_dataset.py`` ``_save_episode_video``: an episode's from_timestamp is where the
  previous one in the same file ended, to_timestamp = from + its duration.
* ``video_utils.py`` ``get_video_info`` (feature "info": video.height, video.width, video.codec,
  video.pix_fmt, video.is_depth_map, video.fps, video.channels, has_audio) and
  ``encode_video_frames`` (pix_fmt yuv420p, ``g`` = 2 keyframe interval).
* ``compute_stats.py``: min/max/mean/std/count over frames; images per channel, shape (3, 1, 1),
  scaled to [0, 1], count = number of frames; episode stats merged with the parallel-variance
  formula (``aggregate_feature_stats``).

Not confirmed / deliberately different:

* lerobot encodes AV1 (libsvtav1) by default; we write H.264 (libx264, crf 23), which lerobot
  also writes and decodes, falling back to mpeg4 where x264 is missing.
* Arrays of rank >= 2 are stored as nested fixed-size lists, not the HF ``datasets`` Array2D..5D
  extension types (not checked that lerobot's ``Dataset.from_parquet(features=...)`` casts them).
* Image stats are computed over every frame (downsampled as lerobot's ``auto_downsample_height_width``
  does), not over lerobot's sampled subset. We write min/max/mean/std/count only; third-party notes
  mention quantiles in newer lerobot stats, which the source read here did not show.
* The pandas metadata in tasks.parquet is written by hand (pandas is not a dependency); it was
  checked once with pandas 3.1 (``pd.read_parquet`` gives the ``task``-indexed frame lerobot's
  ``load_tasks`` expects), not by a test here. lerobot itself was not installed or run against
  these files.
* Newer lerobot records its ``VideoEncoderConfig`` fields in the feature info as ``video.<field>``
  (``update_video_info``'s docstring); the field names were not read, so ``video.g`` / ``video.crf``
  here are our guess at them.
* The writer's one-file-per-episode layout relies on lerobot locating episodes through the
  episodes table (and on sorted file paths being episode order, which ``chunk_size <= 1000``
  keeps); lerobot's own writer appends episodes to the latest file instead.
* ``meta/embody_checksums.json`` and ``info.json["embody"]`` are ours; lerobot ignores both.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from embody import exits
from embody.extras import require

from . import _storage as st
from . import _video

CODEBASE_VERSION = "v3.0"
EMBODY_SCHEMA_VERSION = 1

CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
CHECKSUMS_PATH = "meta/embody_checksums.json"
DEFAULT_DATA_FILE_SIZE_IN_MB = 100  # lerobot's defaults
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200

DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": (1,), "names": None},
    "frame_index": {"dtype": "int64", "shape": (1,), "names": None},
    "episode_index": {"dtype": "int64", "shape": (1,), "names": None},
    "index": {"dtype": "int64", "shape": (1,), "names": None},
    "task_index": {"dtype": "int64", "shape": (1,), "names": None},
}
_NUMERIC = ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
            "uint8", "uint16", "uint32", "uint64")
_STATS = ("min", "max", "mean", "std", "count")


class DatasetFormatError(ValueError):
    """A dataset file is missing, corrupt or not what the format says; the message names the file."""
    exit_code = exits.INPUT

    def __init__(self, path: str | Path, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


def feature(dtype: str, shape: tuple, names: list | None = None) -> dict:
    """A feature declaration: ``dtype`` a numpy dtype name or ``"video"``; ``shape`` per frame.

    Scalars are shape (1,) (lerobot's convention; ``()`` is taken as (1,)); they are stored as
    plain parquet columns and read back as (T,) arrays. Videos are (H, W, 3) uint8 frames.
    """
    shape = tuple(int(d) for d in shape) or (1,)
    if dtype != "video" and dtype not in _NUMERIC:
        raise ValueError(f"unsupported feature dtype {dtype!r}: use one of {', '.join(_NUMERIC)} or 'video'")
    if any(d <= 0 for d in shape):
        raise ValueError(f"feature shape {shape} must be positive")
    if dtype == "video":
        names = names or ["height", "width", "channels"]
    return {"dtype": dtype, "shape": shape, "names": names}


def _next_file(chunk: int, file: int, chunks_size: int) -> tuple[int, int]:
    """lerobot's ``update_chunk_file_indices``: the file after (chunk, file)."""
    return (chunk + 1, 0) if file >= chunks_size - 1 else (chunk, file + 1)


# -- arrow conversion ---------------------------------------------------------------------------

def _arrow_type(ft: dict):
    pa = require("pyarrow", "datasets")

    t = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
    if tuple(ft["shape"]) == (1,):
        return t
    for d in reversed(ft["shape"]):
        t = pa.list_(t, d)
    return t


def _to_arrow(values: np.ndarray, ft: dict):
    """(T, *shape) numpy -> arrow column of the feature's type (scalar or nested fixed-size list)."""
    pa = require("pyarrow", "datasets")

    values = np.ascontiguousarray(values, dtype=np.dtype(ft["dtype"]))
    shape = tuple(ft["shape"])
    if shape == (1,):
        return pa.array(values.reshape(-1))
    arr = pa.array(values.reshape(-1))
    for d in reversed(shape):
        arr = pa.FixedSizeListArray.from_arrays(arr, d)
    return arr


def _to_numpy(column, ft: dict) -> np.ndarray:
    """Arrow column -> (N, *shape) numpy ((N,) for shape (1,) features)."""
    pa = require("pyarrow", "datasets")

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(arr)
    shape = tuple(ft["shape"])
    if shape != (1,):
        for _ in shape:
            arr = arr.flatten()
    out = arr.to_numpy(zero_copy_only=False)
    out = out.astype(np.dtype(ft["dtype"]), copy=False)
    return out.reshape(n) if shape == (1,) else out.reshape(n, *shape)


def _data_schema(features: dict):
    pa = require("pyarrow", "datasets")

    return pa.schema([(k, _arrow_type(ft)) for k, ft in features.items() if ft["dtype"] != "video"])


# -- stats --------------------------------------------------------------------------------------

def _array_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """Stats over the frame axis of (T, ...) data; scalars keep a (1,) shape as lerobot does."""
    if x.dtype == bool:
        x = x.astype(np.int64)
    keep = x.ndim == 1
    xf = x.astype(np.float64)
    return {"min": np.min(x, axis=0, keepdims=keep), "max": np.max(x, axis=0, keepdims=keep),
            "mean": np.mean(xf, axis=0, keepdims=keep), "std": np.std(xf, axis=0, keepdims=keep),
            "count": np.array([len(x)])}


class _ImageStats:
    """Per-channel running min/max/mean/std of (H, W, 3) uint8 frames -> lerobot's (3, 1, 1) in [0, 1]."""

    def __init__(self):
        self.n = 0
        self.pixels = 0
        self.sum = np.zeros(3)
        self.sumsq = np.zeros(3)
        self.min = np.full(3, 255.0)
        self.max = np.zeros(3)

    def add(self, frame: np.ndarray) -> None:
        h, w = frame.shape[:2]
        if max(h, w) >= 300:  # lerobot's auto_downsample_height_width
            step = int((w if w > h else h) / 150)
            frame = frame[::step, ::step]
        px = frame.reshape(-1, 3).astype(np.float64)
        self.n += 1
        self.pixels += len(px)
        self.sum += px.sum(0)
        self.sumsq += (px * px).sum(0)
        self.min = np.minimum(self.min, px.min(0))
        self.max = np.maximum(self.max, px.max(0))

    def result(self) -> dict[str, np.ndarray]:
        mean = self.sum / self.pixels
        std = np.sqrt(np.maximum(self.sumsq / self.pixels - mean**2, 0.0))
        c = lambda v: (v / 255.0).reshape(3, 1, 1)  # noqa: E731
        return {"min": c(self.min), "max": c(self.max), "mean": c(mean), "std": c(std),
                "count": np.array([self.n])}


def _aggregate(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """lerobot's ``aggregate_feature_stats`` for two stat sets (count-weighted mean, pooled variance)."""
    na, nb = float(a["count"][0]), float(b["count"][0])
    n = na + nb
    mean = (a["mean"] * na + b["mean"] * nb) / n
    var = ((a["std"] ** 2 + (a["mean"] - mean) ** 2) * na + (b["std"] ** 2 + (b["mean"] - mean) ** 2) * nb) / n
    return {"min": np.minimum(a["min"], b["min"]), "max": np.maximum(a["max"], b["max"]), "mean": mean,
            "std": np.sqrt(var), "count": np.array([int(n)])}


def _stats_to_json(stats: dict) -> dict:
    return {k: {s: np.asarray(v).tolist() for s, v in d.items()} for k, d in stats.items()}


def _stats_from_json(obj: dict) -> dict:
    return {k: {s: np.asarray(v) for s, v in d.items()} for k, d in obj.items()}


# -- meta files ---------------------------------------------------------------------------------

def _tasks_table(tasks: list[str]):
    """meta/tasks.parquet as pandas would write ``DataFrame({"task_index"}, index=Index(tasks, name="task"))``."""
    pa = require("pyarrow", "datasets")

    table = pa.table({"task_index": pa.array(np.arange(len(tasks), dtype=np.int64)),
                      "task": pa.array(tasks, type=pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
             "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def _episodes_table(rows: list[dict]):
    pa = require("pyarrow", "datasets")

    return pa.Table.from_pylist(rows)


def _info(fps: int, features: dict, robot_type: str | None, chunks_size: int, total_episodes: int,
          total_frames: int, total_tasks: int, keyframe_interval: int,
          data_mb: float = DEFAULT_DATA_FILE_SIZE_IN_MB, video_mb: float = DEFAULT_VIDEO_FILE_SIZE_IN_MB,
          recording: dict | None = None) -> dict:
    has_video = any(ft["dtype"] == "video" for ft in features.values())
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": total_episodes,
        "total_frames": total_frames,
        "total_tasks": total_tasks,
        "chunks_size": chunks_size,
        "data_files_size_in_mb": data_mb,
        "video_files_size_in_mb": video_mb,
        "fps": fps,
        "splits": {"train": f"0:{total_episodes}"} if total_episodes else {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if has_video else None,
        "features": {k: {**ft, "shape": list(ft["shape"])} for k, ft in features.items()},
        "embody": {"schema_version": EMBODY_SCHEMA_VERSION, "checksums": CHECKSUMS_PATH,
                   "keyframe_interval": keyframe_interval, "recording": recording or {}},
    }


def _features_from_info(info: dict, path) -> dict:
    try:
        return {k: {**ft, "shape": tuple(ft["shape"])} for k, ft in info["features"].items()}
    except (KeyError, TypeError, AttributeError) as e:
        raise DatasetFormatError(path, f"malformed 'features' ({e!r})") from None


def _comparable(features: dict) -> dict:
    return {k: (ft["dtype"], tuple(ft["shape"]), ft.get("names")) for k, ft in features.items()}


def _read_json(path: Path):
    if not path.is_file():
        raise DatasetFormatError(path, "missing")
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as e:
        raise DatasetFormatError(path, f"not valid JSON ({e})") from None


def _read_parquet(path: Path, memory_map: bool = False):
    pa = require("pyarrow", "datasets")
    pq = require("pyarrow.parquet", "datasets")

    if not path.is_file():
        raise DatasetFormatError(path, "missing")
    try:
        return pq.read_table(path, memory_map=memory_map)
    except (pa.ArrowException, OSError) as e:
        raise DatasetFormatError(path, f"unreadable parquet ({e})") from None


# -- schema versions and migrations -------------------------------------------------------------

def _migrate_v0_to_v1(root: Path, info: dict, checksums: dict | None) -> tuple[dict, dict]:
    """v0 kept the file checksums inside info.json (``embody.checksums`` was a dict); v1 keeps them in
    meta/embody_checksums.json and names that file in ``embody.checksums``."""
    info = json.loads(json.dumps(info))
    files = info["embody"].get("checksums")
    if not isinstance(files, dict):
        raise DatasetFormatError(root / INFO_PATH, "embody schema v0 without its checksum table")
    info["embody"]["checksums"] = CHECKSUMS_PATH
    info["embody"].setdefault("keyframe_interval", 2)
    info["embody"]["schema_version"] = 1
    return info, {"algorithm": "sha256", "files": files}


#: schema_version -> function upgrading (root, info, checksums) to schema_version + 1 (in memory)
MIGRATIONS: dict[int, Callable[[Path, dict, dict | None], tuple[dict, dict | None]]] = {0: _migrate_v0_to_v1}


def _check_versions(root: Path, info: dict) -> int | None:
    """Refuse unknown layouts; return the embody schema version (None: a plain LeRobot dataset)."""
    version = info.get("codebase_version")
    if version != CODEBASE_VERSION:
        hint = (" (LeRobot v2.x: convert it with lerobot's convert_dataset_v21_to_v30 first)"
                if isinstance(version, str) and version.startswith("v2") else "")
        raise DatasetFormatError(root / INFO_PATH, f"codebase_version {version!r} is not supported; "
                                                   f"this reader handles {CODEBASE_VERSION!r}{hint}")
    if "embody" not in info:
        return None
    schema = info["embody"].get("schema_version") if isinstance(info["embody"], dict) else None
    if not isinstance(schema, int):
        raise DatasetFormatError(root / INFO_PATH, f"embody.schema_version {schema!r} is not an integer")
    if schema > EMBODY_SCHEMA_VERSION:
        raise DatasetFormatError(root / INFO_PATH, f"written by a newer embody (schema {schema}; this embody reads "
                                                   f"up to {EMBODY_SCHEMA_VERSION}): upgrade embody to read it")
    return schema


def _read_meta_head(root: Path) -> tuple[dict, dict | None, bool]:
    """info.json and the checksum table, migrated to the current schema; (info, checksums, ours)."""
    info = _read_json(root / INFO_PATH)
    if not isinstance(info, dict):
        raise DatasetFormatError(root / INFO_PATH, "not a JSON object")
    schema = _check_versions(root, info)
    if schema is None:
        return info, None, False
    checksums = _read_json(root / CHECKSUMS_PATH) if schema >= 1 else None
    while schema < EMBODY_SCHEMA_VERSION:
        info, checksums = MIGRATIONS[schema](root, info, checksums)
        schema = info["embody"]["schema_version"]
    if not isinstance(checksums, dict) or not isinstance(checksums.get("files"), dict):
        raise DatasetFormatError(root / CHECKSUMS_PATH, "no 'files' table")
    return info, checksums, True


def _verify(root: Path, checksums: dict, only: Callable[[str], bool] = lambda _: True) -> None:
    for rel, digest in checksums["files"].items():
        if not only(rel):
            continue
        path = root / rel
        if not path.is_file():
            raise DatasetFormatError(path, "missing (listed in meta/embody_checksums.json)")
        if st.sha256_file(path) != digest:
            raise DatasetFormatError(path, "checksum mismatch: the file changed or is corrupt "
                                           "(sha256 differs from meta/embody_checksums.json)")


# -- writer -------------------------------------------------------------------------------------

def _normalize_features(features: dict, video_keys: tuple) -> dict:
    out = {}
    for key, ft in features.items():
        if "/" in key:
            raise ValueError(f"feature name {key!r} must not contain '/' (lerobot uses it in column names)")
        if key in DEFAULT_FEATURES:
            if ft["dtype"] != DEFAULT_FEATURES[key]["dtype"] or tuple(ft["shape"]) != (1,):
                raise ValueError(f"feature {key!r} is a standard column ({DEFAULT_FEATURES[key]}); do not redeclare it")
            continue
        dtype = ft["dtype"]
        if key in video_keys and dtype == "uint8":
            dtype = "video"
        f = feature(dtype, ft["shape"], ft.get("names"))
        if dtype == "video":
            if len(f["shape"]) != 3 or f["shape"][2] != 3:
                raise ValueError(f"video feature {key!r} must have shape (H, W, 3), got {f['shape']}")
            if f["shape"][0] % 2 or f["shape"][1] % 2:
                raise ValueError(f"video feature {key!r}: height and width must be even for yuv420p, got {f['shape']}")
        out[key] = f
    for key in video_keys:
        if key not in out:
            raise ValueError(f"video key {key!r} is not among the features")
        if out[key]["dtype"] != "video":
            raise ValueError(f"video key {key!r} must be declared with dtype 'video' (or uint8), "
                             f"got {out[key]['dtype']}")
    return {**out, **{k: dict(v) for k, v in DEFAULT_FEATURES.items()}}


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

    def __init__(self, root: str | Path, fps: int, features: dict, robot_type: str,
                 video_keys: tuple = (), chunk_size: int = 1000, keyframe_interval: int = 2,
                 recording: dict | None = None):
        if int(fps) != fps or fps <= 0:
            raise ValueError(f"fps must be a positive integer, got {fps}")
        if keyframe_interval < 1:
            raise ValueError(f"keyframe_interval must be >= 1, got {keyframe_interval}")
        if not 1 <= chunk_size <= 1000:  # file-{:03d}: beyond 999, sorted paths stop being file order
            raise ValueError(f"chunk_size must be in [1, 1000], got {chunk_size}")
        self.root = Path(root)
        self.fps, self.robot_type, self.gop = int(fps), robot_type, int(keyframe_interval)
        self.recording = dict(recording or {})
        self.features = _normalize_features(features, tuple(video_keys))
        self.video_keys = [k for k, ft in self.features.items() if ft["dtype"] == "video"]
        self._frame_keys = [k for k, ft in self.features.items()
                            if ft["dtype"] != "video" and k not in DEFAULT_FEATURES]
        self._closed = False
        self._stage: Path | None = None
        self._reset_buffer()
        st.recover_compact(self.root)
        if (self.root / INFO_PATH).is_file():
            self._open_existing(chunk_size)
        else:
            if self.root.exists() and any(p for p in self.root.iterdir() if not p.name.startswith(".")):
                raise DatasetFormatError(self.root, "exists, is not empty and has no meta/info.json: "
                                                    "refusing to write a dataset into it")
            self._create(chunk_size)

    # state ------------------------------------------------------------------------------------
    def _create(self, chunk_size: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        st.recover(self.root, discard_uncommitted=True)
        self.chunks_size = chunk_size
        self._tasks: list[str] = []
        self._rows: list[dict] = []
        self._stats: dict = {}
        self._checksums: dict[str, str] = {}
        self._video_info: dict[str, dict] = {}
        self._data_mb, self._video_mb = DEFAULT_DATA_FILE_SIZE_IN_MB, DEFAULT_VIDEO_FILE_SIZE_IN_MB
        self._recorded_gop = self.gop
        stage = st.new_stage(self.root)
        self._commit_meta(stage, moves=[])
        st.apply(self.root, stage)

    def _open_existing(self, chunk_size: int) -> None:
        st.recover(self.root, discard_uncommitted=True)
        info, checksums, ours = _read_meta_head(self.root)
        if not ours:
            raise DatasetFormatError(self.root / INFO_PATH, "a LeRobot dataset not written by embody: appending "
                                                            "to it is not supported (no embody checksums)")
        _verify(self.root, checksums, only=lambda rel: rel.startswith("meta/"))
        existing = _features_from_info(info, self.root / INFO_PATH)
        if (_comparable(existing) != _comparable(self.features) or info.get("fps") != self.fps
                or info.get("robot_type") != self.robot_type):
            raise DatasetFormatError(
                self.root, "holds a different dataset (features, fps or robot_type differ): refusing to overwrite "
                f"it; existing fps={info.get('fps')} robot_type={info.get('robot_type')!r} "
                f"features={sorted(existing)}")
        self.chunks_size = int(info.get("chunks_size", chunk_size))
        self._data_mb = info.get("data_files_size_in_mb", DEFAULT_DATA_FILE_SIZE_IN_MB)
        self._video_mb = info.get("video_files_size_in_mb", DEFAULT_VIDEO_FILE_SIZE_IN_MB)
        self._video_info = {k: existing[k].get("info", {}) for k in self.video_keys if existing[k].get("info")}
        self._recorded_gop = max(self.gop, int(info["embody"].get("keyframe_interval", self.gop)))
        self.recording = self.recording or info["embody"].get("recording", {})
        self._checksums = dict(checksums["files"])
        self._tasks = _read_tasks(self.root)
        self._rows = _read_episode_rows(self.root) if info.get("total_episodes", 0) else []
        stats_path = self.root / STATS_PATH
        self._stats = _stats_from_json(_read_json(stats_path)) if stats_path.is_file() else {}

    @property
    def num_episodes(self) -> int:
        return len(self._rows)

    @property
    def num_frames(self) -> int:
        return int(self._rows[-1]["dataset_to_index"]) if self._rows else 0

    def _next_location(self, prefix: str) -> tuple[int, int]:
        used = [(int(r[f"{prefix}/chunk_index"]), int(r[f"{prefix}/file_index"])) for r in self._rows
                if f"{prefix}/chunk_index" in r]
        return _next_file(*max(used), self.chunks_size) if used else (0, 0)

    def _reset_buffer(self) -> None:
        self._buf: dict[str, list] = {k: [] for k in self._frame_keys}
        self._timestamps: list[float] = []
        self._frame_tasks: list[str] = []
        self._videos: dict[str, _video.EpisodeVideoWriter] = {}
        self._image_stats: dict[str, _ImageStats] = {}

    @property
    def pending_frames(self) -> int:
        """Frames added since the last save (the episode being recorded)."""
        return len(self._timestamps)

    # recording --------------------------------------------------------------------------------
    def add_frame(self, frame: dict[str, np.ndarray], task: str) -> None:
        """Buffer one frame: every declared feature (shape-checked), optional ``timestamp`` (s)."""
        if self._closed:
            raise RuntimeError("the writer is closed")
        if not isinstance(task, str) or not task:
            raise ValueError(f"task must be a non-empty string, got {task!r}")
        expected = set(self._frame_keys) | set(self.video_keys)
        given = set(frame) - {"timestamp"}
        if given != expected:
            missing, extra = sorted(expected - given), sorted(given - expected)
            raise ValueError(f"frame does not match the features: missing {missing}, unexpected {extra}")
        checked = {}
        for key in self._frame_keys:
            ft = self.features[key]
            value = np.asarray(frame[key])
            want = tuple(ft["shape"])
            if value.shape != want and not (want == (1,) and value.shape == ()):
                raise ValueError(f"feature {key!r}: shape {value.shape} does not match the declared {want}")
            if not np.can_cast(value.dtype, ft["dtype"], casting="same_kind"):
                raise ValueError(f"feature {key!r}: dtype {value.dtype} cannot be stored as {ft['dtype']}")
            checked[key] = value.astype(ft["dtype"], copy=False).reshape(want)
        for key in self.video_keys:
            img = np.asarray(frame[key])
            want = tuple(self.features[key]["shape"])
            if img.shape != want or img.dtype != np.uint8:
                raise ValueError(f"feature {key!r}: expected a {want} uint8 image, got {img.shape} {img.dtype}")
        index = len(self._timestamps)
        ts = float(frame["timestamp"]) if "timestamp" in frame else index / self.fps
        if self._stage is None:
            self._stage = st.new_stage(self.root)
        for key in self.video_keys:
            if key not in self._videos:
                self._videos[key] = _video.EpisodeVideoWriter(self._stage / "videos" / f"{key}.mp4", self.fps,
                                                              gop=self.gop, crf=_video.CRF)
                self._image_stats[key] = _ImageStats()
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

    def _stage_episode(self, stage: Path, ep: int, n: int) -> tuple[list, dict, list, dict]:
        """Write the episode's parquet into the stage; return (moves, episode row, new tasks, file sha256s)."""
        pa = require("pyarrow", "datasets")

        start = self.num_frames
        new_tasks = [t for t in dict.fromkeys(self._frame_tasks) if t not in self._tasks]
        task_ids = {t: i for i, t in enumerate(self._tasks + new_tasks)}
        arrays = {k: np.stack(v) for k, v in self._buf.items()}
        arrays["timestamp"] = np.asarray(self._timestamps, dtype=np.float32)
        arrays["frame_index"] = np.arange(n, dtype=np.int64)
        arrays["episode_index"] = np.full(n, ep, dtype=np.int64)
        arrays["index"] = np.arange(start, start + n, dtype=np.int64)
        arrays["task_index"] = np.asarray([task_ids[t] for t in self._frame_tasks], dtype=np.int64)
        schema = _data_schema(self.features)
        table = pa.table([_to_arrow(arrays[f.name], self.features[f.name]) for f in schema], schema=schema)
        st.write_atomic(stage / "data.parquet", st.parquet_bytes(table))

        chunk, file = self._next_location("data")
        data_rel = DATA_PATH.format(chunk_index=chunk, file_index=file)
        moves = [("data.parquet", data_rel)]
        file_sums = {data_rel: st.sha256_file(stage / "data.parquet")}
        row = {"episode_index": ep, "tasks": list(dict.fromkeys(self._frame_tasks)), "length": n,
               "data/chunk_index": chunk, "data/file_index": file,
               "dataset_from_index": start, "dataset_to_index": start + n}
        for key in self.video_keys:
            vchunk, vfile = self._next_location(f"videos/{key}")
            rel = VIDEO_PATH.format(video_key=key, chunk_index=vchunk, file_index=vfile)
            staged = f"videos/{key}.mp4"
            moves.append((staged, rel))
            file_sums[rel] = st.sha256_file(stage / staged)
            if key not in self._video_info:
                self._video_info[key] = _video.video_info(stage / staged, self.gop, _video.CRF)
            row.update({f"videos/{key}/chunk_index": vchunk, f"videos/{key}/file_index": vfile,
                        f"videos/{key}/from_timestamp": 0.0, f"videos/{key}/to_timestamp": n / self.fps})
        stats = {k: _array_stats(arrays[k]) for k in schema.names}
        stats.update({k: self._image_stats[k].result() for k in self.video_keys})
        for key in self.features:
            for s in _STATS:
                row[f"stats/{key}/{s}"] = np.asarray(stats[key][s]).tolist()
        return moves, row, new_tasks, file_sums

    def _commit_meta(self, stage: Path, moves: list, row: dict | None = None, new_tasks: list | None = None,
                     file_sums: dict | None = None) -> None:
        """Stage the rewritten meta files, commit, and adopt the new state (the caller applies the stage)."""
        tasks = self._tasks + list(new_tasks or [])
        rows = list(self._rows)
        stats = dict(self._stats)
        checksums = dict(self._checksums)
        if row is not None:
            row = {**row, "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
            rows.append(row)
            for key in self.features:
                new = {s: np.asarray(row[f"stats/{key}/{s}"]) for s in _STATS}
                stats[key] = _aggregate(stats[key], new) if key in stats else new
            checksums.update(file_sums or {})
        features = {k: dict(ft) for k, ft in self.features.items()}
        for key, vinfo in self._video_info.items():
            features[key]["info"] = vinfo
        info = _info(self.fps, features, self.robot_type, self.chunks_size, len(rows),
                     int(rows[-1]["dataset_to_index"]) if rows else 0, len(tasks), self._recorded_gop,
                     self._data_mb, self._video_mb, self.recording)
        meta: list[tuple[str, bytes]] = []
        if rows:
            meta += [(TASKS_PATH, st.parquet_bytes(_tasks_table(tasks))),
                     (EPISODES_PATH.format(chunk_index=0, file_index=0), st.parquet_bytes(_episodes_table(rows))),
                     (STATS_PATH, st.json_bytes(_stats_to_json(stats)))]
        meta.append((INFO_PATH, st.json_bytes(info)))
        for rel, data in meta:
            st.write_atomic(stage / "meta" / Path(rel).name, data)
            checksums[rel] = st.sha256_file(stage / "meta" / Path(rel).name)
        st.write_atomic(stage / "meta" / "checksums.json",
                        st.json_bytes({"algorithm": "sha256", "files": dict(sorted(checksums.items()))}))
        # meta last, info.json very last: a reader that ignores the journal sees old or new, rarely a mix
        all_moves = list(moves) + [(f"meta/{Path(rel).name}", rel) for rel, _ in meta[:-1]]
        all_moves += [("meta/checksums.json", CHECKSUMS_PATH), (f"meta/{Path(INFO_PATH).name}", INFO_PATH)]
        st.commit(stage, all_moves)
        # committed: adopt the new state
        self._tasks, self._rows, self._stats, self._checksums = tasks, rows, stats, checksums

    def close(self) -> None:
        """Finish; frames added since the last save_episode are discarded (with a warning)."""
        if self._closed:
            return
        if self._timestamps:
            warnings.warn(f"DatasetWriter.close: discarding {len(self._timestamps)} unsaved frames "
                          "(call save_episode to keep them)", stacklevel=2)
        self.discard_episode()
        self._closed = True

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, *_) -> None:
        self.close()


def _read_tasks(root: Path) -> list[str]:
    path = root / TASKS_PATH
    if not path.is_file():
        return []
    t = _read_parquet(path)
    if "task" not in t.column_names or "task_index" not in t.column_names:
        raise DatasetFormatError(path, f"expected columns 'task' and 'task_index', found {t.column_names}")
    order = np.argsort(t.column("task_index").to_numpy())
    tasks = t.column("task").to_pylist()
    return [tasks[i] for i in order]


def _read_episode_rows(root: Path) -> list[dict]:
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        raise DatasetFormatError(root / EPISODES_PATH.format(chunk_index=0, file_index=0), "missing")
    rows = []
    for f in files:
        rows += _read_parquet(f).to_pylist()
    rows.sort(key=lambda r: r["episode_index"])
    return rows


# -- reader -------------------------------------------------------------------------------------

class Dataset:
    """A loaded dataset: meta in memory, the per-frame table memory-mapped, videos decoded on demand.

    ``info`` (info.json), ``fps``, ``features`` (name -> dtype/shape/names[/info]), ``tasks``
    (task_index -> string), ``episodes`` (rows of the episodes table), ``stats``,
    ``num_episodes``, ``num_frames``, ``video_keys``.
    """

    def __init__(self, root: Path, info: dict, tasks: list[str], rows: list[dict], table, stats: dict | None):
        self.root, self.info, self.tasks, self.episodes, self.stats = root, info, tasks, rows, stats
        self.fps = int(info["fps"])
        self.features = _features_from_info(info, root / INFO_PATH)
        self.video_keys = [k for k, ft in self.features.items() if ft["dtype"] == "video"]
        self.num_episodes = len(rows)
        self.num_frames = int(table.num_rows)
        self._table = table
        self._columns: dict[str, np.ndarray] = {}
        self._from = np.asarray([r["dataset_from_index"] for r in rows], dtype=np.int64)
        self._to = np.asarray([r["dataset_to_index"] for r in rows], dtype=np.int64)
        self._containers: dict = {}

    def __repr__(self) -> str:
        return (f"Dataset({str(self.root)!r}, episodes={self.num_episodes}, frames={self.num_frames}, "
                f"fps={self.fps}, features={list(self.features)})")

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
            arr = _to_numpy(self._table.column(key), ft)
            arr.flags.writeable = False
            self._columns[key] = arr
        return self._columns[key]

    def _episode_row(self, i: int) -> dict:
        if not -self.num_episodes <= i < self.num_episodes:
            raise IndexError(f"episode {i} out of range (dataset has {self.num_episodes})")
        return self.episodes[i]

    def episode(self, i: int) -> dict[str, np.ndarray]:
        """All non-video columns of episode ``i`` (copies), arrays in frame order, (T, *shape)."""
        row = self._episode_row(i)
        a, b = int(row["dataset_from_index"]), int(row["dataset_to_index"])
        return {k: self.column(k)[a:b].copy() for k, ft in self.features.items() if ft["dtype"] != "video"}

    def task(self, i: int) -> str:
        """The (first) task of episode ``i``."""
        return self._episode_row(i)["tasks"][0]

    def video_file(self, i: int, video_key: str) -> tuple[Path, float, float]:
        """(path, from_timestamp, to_timestamp) of episode ``i``'s clip of ``video_key``."""
        if video_key not in self.video_keys:
            raise KeyError(f"no video {video_key!r}; videos: {self.video_keys}")
        row = self._episode_row(i)
        rel = VIDEO_PATH.format(video_key=video_key, chunk_index=int(row[f"videos/{video_key}/chunk_index"]),
                                file_index=int(row[f"videos/{video_key}/file_index"]))
        return (self.root / rel, float(row[f"videos/{video_key}/from_timestamp"]),
                float(row[f"videos/{video_key}/to_timestamp"]))

    def frames(self, i: int, video_key: str, frame_indices=None) -> np.ndarray:
        """Decoded frames of episode ``i``: (k, H, W, 3) uint8 (all frames when ``frame_indices`` is None)."""
        import av

        row = self._episode_row(i)
        n = int(row["length"])
        idx = np.arange(n) if frame_indices is None else np.atleast_1d(np.asarray(frame_indices, dtype=np.int64))
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"frame indices must lie in [0, {n}) for episode {i}, got {idx.min()}..{idx.max()}")
        path, from_ts, _ = self.video_file(i, video_key)
        if not path.is_file():
            raise DatasetFormatError(path, f"missing (video {video_key!r} of episode {i})")
        key = (os.getpid(), str(path))
        try:
            if key not in self._containers:
                if len(self._containers) > 16:
                    for c in self._containers.values():
                        c.close()
                    self._containers.clear()
                self._containers[key] = av.open(str(path))
            return _video.decode(path, from_ts, self.fps, idx, container=self._containers[key])
        except (av.FFmpegError, LookupError) as e:
            self._containers.pop(key, None)
            raise DatasetFormatError(path, f"cannot decode episode {i} ({e})") from None

    def __getstate__(self):  # open containers do not pickle (DataLoader workers)
        state = dict(self.__dict__)
        state["_containers"] = {}
        return state


def _table_from_rows(root: Path, info: dict, rows: list[dict]):
    """Concatenate the data files the episodes table references, in episode order, and check the
    rows line up with dataset_from_index/dataset_to_index."""
    pa = require("pyarrow", "datasets")

    features = _features_from_info(info, root / INFO_PATH)
    schema = _data_schema(features)
    if not rows:
        return schema.empty_table()
    files: list[tuple[int, int]] = []
    for r in rows:
        loc = (int(r["data/chunk_index"]), int(r["data/file_index"]))
        if not files or files[-1] != loc:
            if loc in files:
                raise DatasetFormatError(root / EPISODES_PATH.format(chunk_index=0, file_index=0),
                                         f"episodes of data file {loc} are not contiguous")
            files.append(loc)
    tables = []
    for chunk, file in files:
        path = root / DATA_PATH.format(chunk_index=chunk, file_index=file)
        t = _read_parquet(path, memory_map=True)
        missing = [n for n in schema.names if n not in t.column_names]
        if missing:
            raise DatasetFormatError(path, f"missing columns {missing} declared in info.json features")
        t = t.select(schema.names)
        if t.schema != schema:
            try:
                t = t.cast(schema)
            except (pa.ArrowException, ValueError) as e:
                raise DatasetFormatError(path, f"column types do not match the features ({e})") from None
        tables.append(t)
    table = pa.concat_tables(tables)
    total = int(rows[-1]["dataset_to_index"])
    if table.num_rows != total:
        raise DatasetFormatError(root / DATA_PATH.format(chunk_index=files[-1][0], file_index=files[-1][1]),
                                 f"data files hold {table.num_rows} frames, the episodes table says {total}")
    return table


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
    info, checksums, ours = _read_meta_head(root)
    if verify and ours:
        _verify(root, checksums)
    tasks = _read_tasks(root)
    rows = _read_episode_rows(root) if info.get("total_episodes", 0) else []
    if len(rows) != info.get("total_episodes", 0):
        raise DatasetFormatError(root / INFO_PATH, f"total_episodes={info.get('total_episodes')} but the episodes "
                                                   f"table has {len(rows)} rows")
    if verify and ours:
        listed = set(checksums["files"])
        for r in rows:
            rels = [DATA_PATH.format(chunk_index=int(r["data/chunk_index"]), file_index=int(r["data/file_index"]))]
            rels += [VIDEO_PATH.format(video_key=k, chunk_index=int(r[f"videos/{k}/chunk_index"]),
                                       file_index=int(r[f"videos/{k}/file_index"]))
                     for k, ft in info["features"].items() if ft["dtype"] == "video"]
            for rel in rels:
                if rel not in listed:
                    raise DatasetFormatError(root / rel, "referenced by the episodes table but has no checksum")
    for r in rows:
        for k, ft in info["features"].items():
            if ft["dtype"] == "video":
                path = root / VIDEO_PATH.format(video_key=k, chunk_index=int(r[f"videos/{k}/chunk_index"]),
                                                file_index=int(r[f"videos/{k}/file_index"]))
                if not path.is_file():
                    raise DatasetFormatError(path, f"missing (video {k!r} of episode {r['episode_index']})")
    table = _table_from_rows(root, info, rows)
    stats = _stats_from_json(_read_json(root / STATS_PATH)) if (root / STATS_PATH).is_file() else None
    return Dataset(root, info, tasks, rows, table, stats)


# -- compaction ---------------------------------------------------------------------------------

def compact(root: str | Path, target_size_mb: float = 100.0) -> None:
    """Pack per-episode files into files of about ``target_size_mb`` (``embody dataset compact DIR``).

    Data rows are concatenated; videos are remuxed (no re-encode: frames stay bit-identical)
    with from/to timestamps updated. The new layout is built beside ``root`` and swapped in;
    checksums are recomputed. An episode larger than the target gets a file of its own.
    """
    pa = require("pyarrow", "datasets")

    root = Path(root).resolve()
    st.recover_compact(root, remove_incomplete=True)
    ds = load(root, verify=True)
    if "embody" not in ds.info:
        raise DatasetFormatError(root / INFO_PATH, "not written by embody: compact only handles embody datasets")
    new, old = st.compact_siblings(root)
    new.mkdir()
    limit = target_size_mb * 1024 * 1024
    chunks_size = int(ds.info["chunks_size"])
    rows = [dict(r) for r in ds.episodes]
    checksums: dict[str, str] = {}

    def pack(sizes: list[float], breaks: list[bool] | None = None) -> list[list[int]]:
        groups, size = [], 0.0
        for i, s in enumerate(sizes):
            if not groups or size + s > limit or (breaks and breaks[i]):
                groups.append([])
                size = 0.0
            groups[-1].append(i)
            size += s
        return groups

    # data: an episode's share of its source file's size
    def data_rel(r):
        return DATA_PATH.format(chunk_index=int(r["data/chunk_index"]), file_index=int(r["data/file_index"]))

    file_rows: dict[str, int] = {}
    for r in rows:
        file_rows[data_rel(r)] = file_rows.get(data_rel(r), 0) + int(r["length"])
    sizes = [(root / data_rel(r)).stat().st_size * int(r["length"]) / file_rows[data_rel(r)] for r in rows]
    loc = (0, 0)
    for g, group in enumerate(pack(sizes)):
        if g:
            loc = _next_file(*loc, chunks_size)
        a, b = int(rows[group[0]]["dataset_from_index"]), int(rows[group[-1]]["dataset_to_index"])
        rel = DATA_PATH.format(chunk_index=loc[0], file_index=loc[1])
        st.write_atomic(new / rel, st.parquet_bytes(ds._table.slice(a, b - a).combine_chunks()))
        checksums[rel] = st.sha256_file(new / rel)
        for i in group:
            rows[i]["data/chunk_index"], rows[i]["data/file_index"] = loc

    # videos: remux per key; an encoder change (different extradata) starts a new file
    for key in ds.video_keys:
        clips = [ds.video_file(i, key) for i in range(ds.num_episodes)]
        durations: dict[Path, float] = {}
        for p, _, b in clips:
            durations[p] = max(durations.get(p, 0.0), b)
        vsizes = [p.stat().st_size * (b - a) / durations[p] for p, a, b in clips]
        extra = {p: _video.extradata(p) for p in durations}
        breaks = [i > 0 and extra[clips[i][0]] != extra[clips[i - 1][0]] for i in range(len(clips))]
        loc = (0, 0)
        for g, group in enumerate(pack(vsizes, breaks)):
            if g:
                loc = _next_file(*loc, chunks_size)
            rel = VIDEO_PATH.format(video_key=key, chunk_index=loc[0], file_index=loc[1])
            starts = _video.concat([(clips[i][0], clips[i][1], int(rows[i]["length"])) for i in group], new / rel,
                                   ds.fps)
            checksums[rel] = st.sha256_file(new / rel)
            for i, start in zip(group, starts):
                n = int(rows[i]["length"])
                rows[i].update({f"videos/{key}/chunk_index": loc[0], f"videos/{key}/file_index": loc[1],
                                f"videos/{key}/from_timestamp": start,
                                f"videos/{key}/to_timestamp": start + n / ds.fps})

    info = json.loads(json.dumps(ds.info))
    info["data_files_size_in_mb"] = info["video_files_size_in_mb"] = (
        int(target_size_mb) if float(target_size_mb).is_integer() else target_size_mb)
    episodes_rel = EPISODES_PATH.format(chunk_index=0, file_index=0)
    meta = [(episodes_rel, st.parquet_bytes(pa.Table.from_pylist(rows))),
            (TASKS_PATH, (root / TASKS_PATH).read_bytes()),
            (STATS_PATH, (root / STATS_PATH).read_bytes()),
            (INFO_PATH, st.json_bytes(info))]
    for rel, data in meta:
        st.write_atomic(new / rel, data)
        checksums[rel] = st.sha256_file(new / rel)
    st.write_atomic(new / CHECKSUMS_PATH,
                    st.json_bytes({"algorithm": "sha256", "files": dict(sorted(checksums.items()))}))
    for extra_path in root.iterdir():  # README.md and the like travel along
        if extra_path.name not in ("data", "videos", "meta", st.STAGING_DIR) and not extra_path.name.startswith("."):
            (shutil.copytree if extra_path.is_dir() else shutil.copy2)(extra_path, new / extra_path.name)
    check = validate(new)
    if check:
        shutil.rmtree(new, ignore_errors=True)
        raise DatasetFormatError(root, "compaction produced an invalid layout (left unchanged): " + "; ".join(check))
    st.write_atomic(new / st.COMPACT_COMPLETE, b"")
    os.rename(root, old)
    os.rename(new, root)
    st.recover_compact(root)


# -- validation ---------------------------------------------------------------------------------

_REQUIRED_INFO = ("codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks", "chunks_size",
                  "data_files_size_in_mb", "video_files_size_in_mb", "fps", "splits", "data_path", "video_path",
                  "features")
_REQUIRED_EPISODE_COLUMNS = ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index",
                             "dataset_from_index", "dataset_to_index", "meta/episodes/chunk_index",
                             "meta/episodes/file_index")


def validate(root: str | Path) -> list[str]:
    """Check a dataset and return the problems found (empty: valid).

    Layout and info.json fields, checksums, parquet schemas against the features, episode
    lengths and index continuity (index, frame_index, episode_index, timestamps, task_index),
    tasks, stats entries, unreferenced files in data/ and videos/ (lerobot would read them),
    and video packet counts against episode lengths with keyframes at most the recorded
    keyframe interval apart.
    """
    root = Path(root)
    problems: list[str] = []
    staging = root / st.STAGING_DIR
    if staging.is_dir():
        problems += [f"{stage}: a committed save not yet moved into place (load() or DatasetWriter finishes it)"
                     for stage in sorted(staging.iterdir()) if (stage / st.COMMIT_FILE).is_file()]
    try:
        info, checksums, ours = _read_meta_head(root)
    except DatasetFormatError as e:
        return [str(e)]
    info_path = root / INFO_PATH
    problems += [f"{info_path}: missing field {k!r}" for k in _REQUIRED_INFO if k not in info]
    try:
        features = _features_from_info(info, info_path)
    except DatasetFormatError as e:
        return problems + [str(e)]
    for k, ft in DEFAULT_FEATURES.items():
        if k not in features or features[k]["dtype"] != ft["dtype"]:
            problems.append(f"{info_path}: standard feature {k!r} missing or not {ft['dtype']}")
    for k, ft in features.items():
        if ft.get("dtype") != "video" and ft.get("dtype") not in _NUMERIC:
            problems.append(f"{info_path}: feature {k!r} has unsupported dtype {ft.get('dtype')!r}")
    if problems:
        return problems
    if info.get("data_path") != DATA_PATH:
        problems.append(f"{info_path}: data_path {info.get('data_path')!r} is not {DATA_PATH!r}")
    video_keys = [k for k, ft in features.items() if ft["dtype"] == "video"]
    if video_keys and info.get("video_path") != VIDEO_PATH:
        problems.append(f"{info_path}: video_path {info.get('video_path')!r} is not {VIDEO_PATH!r}")
    if ours:
        for rel, digest in checksums["files"].items():
            p = root / rel
            if not p.is_file():
                problems.append(f"{p}: missing (listed in {CHECKSUMS_PATH})")
            elif st.sha256_file(p) != digest:
                problems.append(f"{p}: checksum mismatch")

    total = int(info.get("total_episodes", 0))
    try:
        rows = _read_episode_rows(root) if total else []
        tasks = _read_tasks(root)
    except DatasetFormatError as e:
        return problems + [str(e)]
    ep_path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    if len(rows) != total:
        problems.append(f"{info_path}: total_episodes={total} but the episodes table has {len(rows)} rows")
    if total and info.get("splits") != {"train": f"0:{total}"}:
        problems.append(f"{info_path}: splits {info.get('splits')} should be {{'train': '0:{total}'}}")
    if int(info.get("total_tasks", -1)) != len(tasks):
        problems.append(f"{info_path}: total_tasks={info.get('total_tasks')} but tasks.parquet has {len(tasks)}")
    if len(set(tasks)) != len(tasks):
        problems.append(f"{root / TASKS_PATH}: duplicate tasks")
    columns = set(_REQUIRED_EPISODE_COLUMNS)
    for k in video_keys:
        columns |= {f"videos/{k}/{c}" for c in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")}
    for r in rows[:1]:
        missing = sorted(columns - set(r))
        if missing:
            return problems + [f"{ep_path}: missing columns {missing}"]
    start = 0
    for i, r in enumerate(rows):
        if r["episode_index"] != i:
            problems.append(f"{ep_path}: episode_index {r['episode_index']} at row {i}")
        if r["dataset_from_index"] != start or r["dataset_to_index"] - r["dataset_from_index"] != r["length"]:
            problems.append(f"{ep_path}: episode {i} spans [{r['dataset_from_index']}, {r['dataset_to_index']}) "
                            f"with length {r['length']}; expected to start at {start}")
        start = int(r["dataset_to_index"])
        unknown = [t for t in r["tasks"] if t not in tasks]
        if unknown:
            problems.append(f"{ep_path}: episode {i} has tasks {unknown} missing from tasks.parquet")
    if rows and start != int(info.get("total_frames", -1)):
        problems.append(f"{info_path}: total_frames={info.get('total_frames')} but episodes sum to {start}")
    if problems:
        return problems

    # data files: schema, row contents
    schema = _data_schema(features)
    referenced = set()
    try:
        table = _table_from_rows(root, info, rows)
    except DatasetFormatError as e:
        return problems + [str(e)]
    for r in rows:
        rel = DATA_PATH.format(chunk_index=int(r["data/chunk_index"]), file_index=int(r["data/file_index"]))
        referenced.add(rel)
    for rel in sorted(referenced):
        pq = require("pyarrow.parquet", "datasets")

        s = pq.read_schema(root / rel)
        if set(s.names) != set(schema.names):
            problems.append(f"{root / rel}: columns {sorted(s.names)} do not match the non-video features "
                            f"{sorted(schema.names)}")
        for f in schema:
            if f.name in s.names and s.field(f.name).type != f.type:
                problems.append(f"{root / rel}: column {f.name!r} is {s.field(f.name).type}, features say {f.type}")
    if table.num_rows:
        col = lambda k: _to_numpy(table.column(k), features[k])  # noqa: E731
        index, ep_index, frame_index = col("index"), col("episode_index"), col("frame_index")
        if not np.array_equal(index, np.arange(len(index))):
            problems.append(f"{root / 'data'}: 'index' is not 0..{len(index) - 1} in order")
        lengths = np.asarray([r["length"] for r in rows])
        want_ep = np.repeat(np.arange(len(rows)), lengths)
        want_frame = np.arange(len(index)) - np.repeat(np.asarray([r["dataset_from_index"] for r in rows]), lengths)
        if not np.array_equal(ep_index, want_ep):
            problems.append(f"{root / 'data'}: 'episode_index' does not match the episodes table")
        if not np.array_equal(frame_index, want_frame):
            problems.append(f"{root / 'data'}: 'frame_index' does not restart at 0 and count up in every episode")
        ts = col("timestamp").astype(np.float64)
        if np.any(np.abs(ts - want_frame / float(info["fps"])) > 1e-4 + 0.5 / float(info["fps"])):
            problems.append(f"{root / 'data'}: timestamps are not frame_index / fps")
        task_index = col("task_index")
        if len(task_index) and (task_index.min() < 0 or task_index.max() >= len(tasks)):
            problems.append(f"{root / 'data'}: task_index outside [0, {len(tasks)})")

    # videos: frames per episode and keyframe spacing
    gop = int(info.get("embody", {}).get("keyframe_interval", 0) or 0)
    for k in video_keys:
        by_file: dict[str, list[dict]] = {}
        for r in rows:
            rel = VIDEO_PATH.format(video_key=k, chunk_index=int(r[f"videos/{k}/chunk_index"]),
                                    file_index=int(r[f"videos/{k}/file_index"]))
            by_file.setdefault(rel, []).append(r)
        referenced |= set(by_file)
        for rel, eps in by_file.items():
            path = root / rel
            if not path.is_file():
                problems.append(f"{path}: missing (video {k!r} of episodes {[e['episode_index'] for e in eps]})")
                continue
            for r in eps:
                a, b = float(r[f"videos/{k}/from_timestamp"]), float(r[f"videos/{k}/to_timestamp"])
                try:
                    packets = _video.packets_in_range(path, a, b, float(info["fps"]))
                except Exception as e:  # noqa: BLE001 - any decoder failure is a problem to report
                    problems.append(f"{path}: unreadable ({e})")
                    break
                n = int(r["length"])
                if [p for p, _ in packets] != list(range(n)):
                    problems.append(f"{path}: episode {r['episode_index']} has {len(packets)} video frames in "
                                    f"[{a}, {b}), its length is {n}")
                    continue
                keys = [p for p, kf in packets if kf]
                if not keys or keys[0] != 0:
                    problems.append(f"{path}: episode {r['episode_index']} does not start on a keyframe")
                elif gop and max(np.diff(keys + [n]), default=1) > gop:
                    problems.append(f"{path}: episode {r['episode_index']} has keyframes more than {gop} frames apart")

    # stats
    stats_path = root / STATS_PATH
    if rows:
        try:
            stats = _read_json(stats_path)
            for k in features:
                missing = [s for s in _STATS if s not in stats.get(k, {})]
                if missing:
                    problems.append(f"{stats_path}: feature {k!r} lacks {missing}")
        except DatasetFormatError as e:
            problems.append(str(e))

    # stray files lerobot would pick up
    for pattern in ("data/*/*.parquet", "videos/*/*/*.mp4", "meta/episodes/*/*.parquet"):
        for p in sorted(root.glob(pattern)):
            rel = p.relative_to(root).as_posix()
            if rel not in referenced and rel != EPISODES_PATH.format(chunk_index=0, file_index=0):
                problems.append(f"{p}: not referenced by the episodes table (lerobot would read it)")
    return problems
