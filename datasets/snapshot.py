"""A dataset as the checks and the reader see it: each part read once, on first use.

Reading a part raises DatasetFormatError naming the file when it cannot be read at all; whether
what was read is consistent is for the checks (``checks.py``) to say.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from embody.extras import require

from .episodes import EpisodeRow, Location
from .meta import Meta, read_episode_rows, read_json, read_meta, read_parquet, read_tasks
from .schema import DATA_PATH, EPISODES_FILE, INFO_PATH, STATS_PATH, DatasetFormatError, data_schema, features_from_info
from .schema import video_keys as _video_keys
from .stats import from_json


class Snapshot:
    """``root``'s meta, features, tasks, episode rows and data table, read lazily."""

    def __init__(self, root: Path):
        self.root = root

    @cached_property
    def meta(self) -> Meta:
        return read_meta(self.root)

    @property
    def info(self) -> dict:
        return self.meta.info

    @cached_property
    def features(self) -> dict:
        return features_from_info(self.info, self.root / INFO_PATH)

    @cached_property
    def video_keys(self) -> list[str]:
        return _video_keys(self.features)

    @cached_property
    def tasks(self) -> list[str]:
        return read_tasks(self.root)

    @cached_property
    def rows(self) -> list[EpisodeRow]:
        """The episodes table's rows (empty when ``total_episodes`` is 0)."""
        return read_episode_rows(self.root) if int(self.info.get("total_episodes", 0)) else []

    @cached_property
    def table(self):
        """The data files the episodes reference, concatenated in episode order: N rows."""
        return read_data_table(self.root, self.features, self.rows)

    @cached_property
    def stats(self) -> dict | None:
        """``meta/stats.json`` as arrays per feature and statistic; None when the file is absent."""
        path = self.root / STATS_PATH
        return from_json(read_json(path)) if path.is_file() else None


def _data_files(root: Path, rows: list[EpisodeRow]) -> list[Location]:
    """The data files in episode order; an episode run split across files is an error."""
    files: list[Location] = []
    for r in rows:
        if not files or files[-1] != r.data:
            if r.data in files:
                raise DatasetFormatError(
                    root / EPISODES_FILE, f"episodes of data file {(r.data.chunk, r.data.file)} are not contiguous"
                )
            files.append(r.data)
    return files


def _read_data_file(path: Path, schema):
    pa = require("pyarrow", "datasets")

    t = read_parquet(path, memory_map=True)
    missing = [n for n in schema.names if n not in t.column_names]
    if missing:
        raise DatasetFormatError(path, f"missing columns {missing} declared in info.json features")
    t = t.select(schema.names)
    if t.schema != schema:
        try:
            t = t.cast(schema)
        except (pa.ArrowException, ValueError) as e:
            raise DatasetFormatError(path, f"column types do not match the features ({e})") from None
    return t


def read_data_table(root: Path, features: dict, rows: list[EpisodeRow]):
    """Concatenate the data files the episodes table references, in episode order, and check the
    frame count matches the table's last dataset_to_index."""
    pa = require("pyarrow", "datasets")

    schema = data_schema(features)
    if not rows:
        return schema.empty_table()
    files = _data_files(root, rows)
    table = pa.concat_tables([_read_data_file(root / loc.path(DATA_PATH), schema) for loc in files])
    total = rows[-1].dataset_to_index
    if table.num_rows != total:
        raise DatasetFormatError(
            root / files[-1].path(DATA_PATH),
            f"data files hold {table.num_rows} frames, the episodes table says {total}",
        )
    return table
