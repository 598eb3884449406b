"""The LeRobot v3.0 on-disk schema: path templates, feature declarations, their arrow types.

Shapes: N frames; a feature's ``shape`` is per frame, so its column is (N, *shape), except
shape (1,) (a scalar, lerobot's convention) which is a plain parquet column read back as (N,).
Video features are (H, W, 3) uint8 frames stored as MP4, never as parquet columns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from embody import exits
from embody.extras import require

CODEBASE_VERSION = "v3.0"
EMBODY_SCHEMA_VERSION = 1

CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
EPISODES_FILE = EPISODES_PATH.format(chunk_index=0, file_index=0)  # the one our writer keeps
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
NUMERIC = (
    "bool",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
)


class DatasetFormatError(ValueError):
    """A dataset file is missing, corrupt or not what the format says; the message names the file."""

    exit_code = exits.INPUT

    def __init__(self, path: str | Path, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


# -- feature declarations -----------------------------------------------------------------------


def feature(dtype: str, shape: tuple, names: list | None = None) -> dict:
    """A feature declaration: ``dtype`` a numpy dtype name or ``"video"``; ``shape`` per frame.

    Scalars are shape (1,) (lerobot's convention; ``()`` is taken as (1,)); they are stored as
    plain parquet columns and read back as (T,) arrays. Videos are (H, W, 3) uint8 frames.
    """
    shape = tuple(int(d) for d in shape) or (1,)
    if dtype != "video" and dtype not in NUMERIC:
        raise ValueError(f"unsupported feature dtype {dtype!r}: use one of {', '.join(NUMERIC)} or 'video'")
    if any(d <= 0 for d in shape):
        raise ValueError(f"feature shape {shape} must be positive")
    if dtype == "video":
        names = names or ["height", "width", "channels"]
    return {"dtype": dtype, "shape": shape, "names": names}


def video_keys(features: dict) -> list[str]:
    """The keys of the features stored as video."""
    return [k for k, ft in features.items() if ft["dtype"] == "video"]


def _declared(key: str, ft: dict, as_video: bool) -> dict:
    """One user declaration checked and normalized (uint8 named as a video key becomes a video)."""
    if "/" in key:
        raise ValueError(f"feature name {key!r} must not contain '/' (lerobot uses it in column names)")
    dtype = "video" if as_video and ft["dtype"] == "uint8" else ft["dtype"]
    f = feature(dtype, ft["shape"], ft.get("names"))
    if dtype == "video":
        if len(f["shape"]) != 3 or f["shape"][2] != 3:
            raise ValueError(f"video feature {key!r} must have shape (H, W, 3), got {f['shape']}")
        if f["shape"][0] % 2 or f["shape"][1] % 2:
            raise ValueError(f"video feature {key!r}: height and width must be even for yuv420p, got {f['shape']}")
    return f


def normalize_features(features: dict, videos: tuple) -> dict:
    """The writer's features: the user's declarations checked, then the standard columns."""
    out = {}
    for key, ft in features.items():
        if key in DEFAULT_FEATURES:
            if ft["dtype"] != DEFAULT_FEATURES[key]["dtype"] or tuple(ft["shape"]) != (1,):
                raise ValueError(f"feature {key!r} is a standard column ({DEFAULT_FEATURES[key]}); do not redeclare it")
            continue
        out[key] = _declared(key, ft, key in videos)
    for key in videos:
        if key not in out:
            raise ValueError(f"video key {key!r} is not among the features")
        if out[key]["dtype"] != "video":
            raise ValueError(
                f"video key {key!r} must be declared with dtype 'video' (or uint8), got {out[key]['dtype']}"
            )
    return {**out, **{k: dict(v) for k, v in DEFAULT_FEATURES.items()}}


def features_from_info(info: dict, path) -> dict:
    """info.json's ``features`` with tuple shapes; DatasetFormatError naming ``path`` when malformed."""
    try:
        return {k: {**ft, "shape": tuple(ft["shape"])} for k, ft in info["features"].items()}
    except (KeyError, TypeError, AttributeError) as e:
        raise DatasetFormatError(path, f"malformed 'features' ({e!r})") from None


def comparable(features: dict) -> dict:
    """What must agree for two feature sets to be the same dataset (video info aside)."""
    return {k: (ft["dtype"], tuple(ft["shape"]), ft.get("names")) for k, ft in features.items()}


# -- arrow types --------------------------------------------------------------------------------


def arrow_type(ft: dict):
    """A scalar for shape (1,), else nested fixed-size lists, outermost = first dimension."""
    pa = require("pyarrow", "datasets")

    t = pa.from_numpy_dtype(np.dtype(ft["dtype"]))
    if tuple(ft["shape"]) == (1,):
        return t
    for d in reversed(ft["shape"]):
        t = pa.list_(t, d)
    return t


def data_schema(features: dict):
    """The data parquet schema: the non-video features, in declaration order."""
    pa = require("pyarrow", "datasets")

    return pa.schema([(k, arrow_type(ft)) for k, ft in features.items() if ft["dtype"] != "video"])


def to_arrow(values: np.ndarray, ft: dict):
    """(T, *shape) numpy -> arrow column of the feature's type (scalar or nested fixed-size list)."""
    pa = require("pyarrow", "datasets")

    values = np.ascontiguousarray(values, dtype=np.dtype(ft["dtype"]))
    arr = pa.array(values.reshape(-1))
    if tuple(ft["shape"]) == (1,):
        return arr
    for d in reversed(ft["shape"]):
        arr = pa.FixedSizeListArray.from_arrays(arr, d)
    return arr


def to_numpy(column, ft: dict) -> np.ndarray:
    """Arrow column -> (N, *shape) numpy ((N,) for shape (1,) features)."""
    pa = require("pyarrow", "datasets")

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(arr)
    shape = tuple(ft["shape"])
    if shape != (1,):
        for _ in shape:
            arr = arr.flatten()
    out = arr.to_numpy(zero_copy_only=False).astype(np.dtype(ft["dtype"]), copy=False)
    return out.reshape(n) if shape == (1,) else out.reshape(n, *shape)
