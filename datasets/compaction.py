"""``embody dataset compact DIR``: per-episode files packed into the larger files the format prefers.

Data rows are concatenated; videos are remuxed (no re-encode: frames stay bit-identical) with
from/to timestamps updated. The new layout is built beside ``root`` and swapped in with two
renames (``_storage.recover_compact`` finishes an interrupted swap); checksums are recomputed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from . import _storage as st
from . import _video
from .checks import validate
from .episodes import EpisodeRow, Location, VideoClip
from .meta import episodes_bytes, write_meta
from .reader import Dataset, load
from .schema import DATA_PATH, EPISODES_FILE, INFO_PATH, STATS_PATH, TASKS_PATH, VIDEO_PATH, DatasetFormatError


def _pack(sizes: list[float], limit: float, breaks: list[bool] | None = None) -> list[list[int]]:
    """Consecutive indices grouped up to ``limit`` bytes; ``breaks[i]`` starts a new group at ``i``."""
    groups: list[list[int]] = []
    size = 0.0
    for i, s in enumerate(sizes):
        if not groups or size + s > limit or (breaks and breaks[i]):
            groups.append([])
            size = 0.0
        groups[-1].append(i)
        size += s
    return groups


def _placed(groups: list[list[int]], chunks_size: int) -> Iterator[tuple[Location, list[int]]]:
    """Each group with the file it goes to: chunk 0 file 0, then the next file, wrapping chunks."""
    loc = Location()
    for g, group in enumerate(groups):
        loc = loc.next(chunks_size) if g else loc
        yield loc, group


def _compact_data(ds: Dataset, new: Path, rows: list[EpisodeRow], limit: float, checksums: dict) -> None:
    """Data files of about ``limit`` bytes (an episode counts its share of its source file)."""
    frames = Counter()
    for r in rows:
        frames[r.data_path] += r.length
    sizes = [(ds.root / r.data_path).stat().st_size * r.length / frames[r.data_path] for r in rows]
    for loc, group in _placed(_pack(sizes, limit), int(ds.info["chunks_size"])):
        a, b = rows[group[0]].dataset_from_index, rows[group[-1]].dataset_to_index
        rel = loc.path(DATA_PATH)
        st.write_atomic(new / rel, st.parquet_bytes(ds.table.slice(a, b - a).combine_chunks()))
        checksums[rel] = st.sha256_file(new / rel)
        for i in group:
            rows[i] = replace(rows[i], data=loc)


def _compact_video(ds: Dataset, key: str, new: Path, rows: list[EpisodeRow], limit: float, checksums: dict) -> None:
    """``key``'s clips remuxed into files of about ``limit`` bytes; an encoder change (different
    extradata) starts a new file."""
    clips = [ds.video_file(i, key) for i in range(ds.num_episodes)]
    durations: dict[Path, float] = {}
    for p, _, b in clips:
        durations[p] = max(durations.get(p, 0.0), b)
    sizes = [p.stat().st_size * (b - a) / durations[p] for p, a, b in clips]
    extra = {p: _video.extradata(p) for p in durations}
    breaks = [i > 0 and extra[clips[i][0]] != extra[clips[i - 1][0]] for i in range(len(clips))]
    for loc, group in _placed(_pack(sizes, limit, breaks), int(ds.info["chunks_size"])):
        rel = loc.path(VIDEO_PATH, video_key=key)
        starts = _video.concat([(clips[i][0], clips[i][1], rows[i].length) for i in group], new / rel, ds.fps)
        checksums[rel] = st.sha256_file(new / rel)
        for i, start in zip(group, starts):
            clip = VideoClip(loc, start, start + rows[i].length / ds.fps)
            rows[i] = replace(rows[i], videos={**rows[i].videos, key: clip})


def _write_meta(ds: Dataset, new: Path, rows: list[EpisodeRow], target_size_mb: float, checksums: dict) -> None:
    info = json.loads(json.dumps(ds.info))
    info["data_files_size_in_mb"] = info["video_files_size_in_mb"] = (
        int(target_size_mb) if float(target_size_mb).is_integer() else target_size_mb
    )
    write_meta(
        new,
        [
            (EPISODES_FILE, episodes_bytes(rows)),
            (TASKS_PATH, (ds.root / TASKS_PATH).read_bytes()),
            (STATS_PATH, (ds.root / STATS_PATH).read_bytes()),
            (INFO_PATH, st.json_bytes(info)),
        ],
        checksums,
    )


def _copy_extras(root: Path, new: Path) -> None:
    """README.md and the like travel along."""
    for path in root.iterdir():
        if path.name not in ("data", "videos", "meta", st.STAGING_DIR) and not path.name.startswith("."):
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, new / path.name)


def compact(root: str | Path, target_size_mb: float = 100.0) -> None:
    """Pack per-episode files into files of about ``target_size_mb`` (``embody dataset compact DIR``).

    Data rows are concatenated; videos are remuxed (no re-encode: frames stay bit-identical)
    with from/to timestamps updated. The new layout is built beside ``root`` and swapped in;
    checksums are recomputed. An episode larger than the target gets a file of its own.
    """
    root = Path(root).resolve()
    st.recover_compact(root, remove_incomplete=True)
    ds = load(root, verify=True)
    if "embody" not in ds.info:
        raise DatasetFormatError(root / INFO_PATH, "not written by embody: compact only handles embody datasets")
    new, old = st.compact_siblings(root)
    new.mkdir()
    limit, rows, checksums = target_size_mb * 1024 * 1024, list(ds.episodes), {}
    _compact_data(ds, new, rows, limit, checksums)
    for key in ds.video_keys:
        _compact_video(ds, key, new, rows, limit, checksums)
    _write_meta(ds, new, rows, target_size_mb, checksums)
    _copy_extras(root, new)
    problems = validate(new)
    if problems:
        shutil.rmtree(new, ignore_errors=True)
        raise DatasetFormatError(root, "compaction produced an invalid layout (left unchanged): " + "; ".join(problems))
    st.write_atomic(new / st.COMPACT_COMPLETE, b"")
    os.rename(root, old)
    os.rename(new, root)
    st.recover_compact(root)
