"""The meta files: info.json, tasks.parquet, the episodes table, stats.json, embody's checksum
table; embody schema versions and their migrations. Readers raise DatasetFormatError naming the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.extras import require

from . import _storage as st
from .episodes import EpisodeRow
from .schema import (
    CHECKSUMS_PATH,
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    EMBODY_SCHEMA_VERSION,
    EPISODES_FILE,
    INFO_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetFormatError,
)

# -- writing ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """info.json's sizes and recording facts that stay fixed while episodes are appended."""

    fps: int
    robot_type: str | None
    chunks_size: int
    keyframe_interval: int
    data_mb: float = DEFAULT_DATA_FILE_SIZE_IN_MB
    video_mb: float = DEFAULT_VIDEO_FILE_SIZE_IN_MB
    recording: dict | None = None


def info_json(layout: Layout, features: dict, total_episodes: int, total_frames: int, total_tasks: int) -> dict:
    """info.json as lerobot's ``create_empty_dataset_info`` lays it out, plus our ``embody`` section."""
    has_video = any(ft["dtype"] == "video" for ft in features.values())
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": layout.robot_type,
        "total_episodes": total_episodes,
        "total_frames": total_frames,
        "total_tasks": total_tasks,
        "chunks_size": layout.chunks_size,
        "data_files_size_in_mb": layout.data_mb,
        "video_files_size_in_mb": layout.video_mb,
        "fps": layout.fps,
        "splits": {"train": f"0:{total_episodes}"} if total_episodes else {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if has_video else None,
        "features": {k: {**ft, "shape": list(ft["shape"])} for k, ft in features.items()},
        "embody": {
            "schema_version": EMBODY_SCHEMA_VERSION,
            "checksums": CHECKSUMS_PATH,
            "keyframe_interval": layout.keyframe_interval,
            "recording": layout.recording or {},
        },
    }


def tasks_table(tasks: list[str]):
    """meta/tasks.parquet as pandas would write ``DataFrame({"task_index"}, index=Index(tasks, name="task"))``."""
    pa = require("pyarrow", "datasets")

    table = pa.table(
        {"task_index": pa.array(np.arange(len(tasks), dtype=np.int64)), "task": pa.array(tasks, type=pa.string())}
    )
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def episodes_bytes(rows: list[EpisodeRow]) -> bytes:
    """The episodes table as parquet."""
    pa = require("pyarrow", "datasets")

    return st.parquet_bytes(pa.Table.from_pylist([r.columns() for r in rows]))


def write_meta(folder: Path, files: list[tuple[str, bytes]], checksums: dict[str, str]) -> None:
    """Write ``files`` ((path relative to the root, content)) under ``folder``, each atomically, adding
    their sha256 to ``checksums``; then meta/embody_checksums.json with all of ``checksums``."""
    for rel, data in files:
        st.write_atomic(folder / rel, data)
        checksums[rel] = st.sha256_file(folder / rel)
    st.write_atomic(
        folder / CHECKSUMS_PATH, st.json_bytes({"algorithm": "sha256", "files": dict(sorted(checksums.items()))})
    )


# -- reading ------------------------------------------------------------------------------------


def read_json(path: Path):
    """The parsed JSON file; DatasetFormatError if it is missing or not valid JSON."""
    if not path.is_file():
        raise DatasetFormatError(path, "missing")
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as e:
        raise DatasetFormatError(path, f"not valid JSON ({e})") from None


def read_parquet(path: Path, memory_map: bool = False):
    """The parquet file as a pyarrow Table; DatasetFormatError if it is missing or unreadable."""
    pa = require("pyarrow", "datasets")
    pq = require("pyarrow.parquet", "datasets")

    if not path.is_file():
        raise DatasetFormatError(path, "missing")
    try:
        return pq.read_table(path, memory_map=memory_map)
    except (pa.ArrowException, OSError) as e:
        raise DatasetFormatError(path, f"unreadable parquet ({e})") from None


def read_tasks(root: Path) -> list[str]:
    """task_index -> task ([] when the dataset has no tasks.parquet yet)."""
    path = root / TASKS_PATH
    if not path.is_file():
        return []
    t = read_parquet(path)
    if "task" not in t.column_names or "task_index" not in t.column_names:
        raise DatasetFormatError(path, f"expected columns 'task' and 'task_index', found {t.column_names}")
    order = np.argsort(t.column("task_index").to_numpy())
    tasks = t.column("task").to_pylist()
    return [tasks[i] for i in order]


def read_episode_rows(root: Path) -> list[EpisodeRow]:
    """Every episodes-table file's rows, in episode order."""
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        raise DatasetFormatError(root / EPISODES_FILE, "missing")
    rows = [EpisodeRow.from_columns(cols, f) for f in files for cols in read_parquet(f).to_pylist()]
    return sorted(rows, key=lambda r: r.episode_index)


# -- versions, migrations, checksums ------------------------------------------------------------


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


def check_versions(root: Path, info: dict) -> int | None:
    """Refuse unknown layouts; return the embody schema version (None: a plain LeRobot dataset)."""
    version = info.get("codebase_version")
    if version != CODEBASE_VERSION:
        hint = (
            " (LeRobot v2.x: convert it with lerobot's convert_dataset_v21_to_v30 first)"
            if isinstance(version, str) and version.startswith("v2")
            else ""
        )
        raise DatasetFormatError(
            root / INFO_PATH,
            f"codebase_version {version!r} is not supported; this reader handles {CODEBASE_VERSION!r}{hint}",
        )
    if "embody" not in info:
        return None
    schema = info["embody"].get("schema_version") if isinstance(info["embody"], dict) else None
    if not isinstance(schema, int):
        raise DatasetFormatError(root / INFO_PATH, f"embody.schema_version {schema!r} is not an integer")
    if schema > EMBODY_SCHEMA_VERSION:
        raise DatasetFormatError(
            root / INFO_PATH,
            f"written by a newer embody (schema {schema}; this embody reads "
            f"up to {EMBODY_SCHEMA_VERSION}): upgrade embody to read it",
        )
    return schema


@dataclass(frozen=True)
class Meta:
    """info.json migrated to the current embody schema, and the files' sha256 table (relative path
    -> hex digest; None for a plain LeRobot dataset, which has none and is not verified)."""

    info: dict
    checksums: dict[str, str] | None

    @property
    def ours(self) -> bool:
        """Written by embody (checksummed, appendable, compactable)."""
        return self.checksums is not None


def read_meta(root: Path) -> Meta:
    """info.json and the checksum table, migrated in memory to the current schema."""
    info = read_json(root / INFO_PATH)
    if not isinstance(info, dict):
        raise DatasetFormatError(root / INFO_PATH, "not a JSON object")
    schema = check_versions(root, info)
    if schema is None:
        return Meta(info, None)
    checksums = read_json(root / CHECKSUMS_PATH) if schema >= 1 else None
    while schema < EMBODY_SCHEMA_VERSION:
        info, checksums = MIGRATIONS[schema](root, info, checksums)
        schema = info["embody"]["schema_version"]
    if not isinstance(checksums, dict) or not isinstance(checksums.get("files"), dict):
        raise DatasetFormatError(root / CHECKSUMS_PATH, "no 'files' table")
    return Meta(info, dict(checksums["files"]))
