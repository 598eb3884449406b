"""Dataset checks: small named functions, each returning the problems it finds (empty: sound).

:func:`validate` runs them all, in stages (a stage's problems stop the later stages, whose checks
would only repeat them), and collects every problem; :func:`load` runs :data:`LOAD_CHECKS` (cheap,
what reading needs) and raises the first. A part that cannot be read at all (a missing or
unreadable file) raises DatasetFormatError from the snapshot; validate reports it and stops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.extras import require

from . import _storage as st
from . import _video
from .episodes import CLIP_FIELDS
from .meta import read_json
from .schema import (
    CHECKSUMS_PATH,
    DATA_PATH,
    DEFAULT_FEATURES,
    EPISODES_FILE,
    INFO_PATH,
    NUMERIC,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetFormatError,
    data_schema,
    to_numpy,
)
from .snapshot import Snapshot
from .stats import STATS


@dataclass(frozen=True)
class Problem:
    """What is wrong, and the file it is wrong in."""

    path: Path | str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def error(self) -> DatasetFormatError:
        """This problem as a DatasetFormatError."""
        return DatasetFormatError(self.path, self.message)


Check = Callable[[Snapshot], list[Problem]]


def raise_first(problems: list[Problem]) -> None:
    """Raise the first of ``problems`` as a DatasetFormatError; nothing when there are none."""
    if problems:
        raise problems[0].error()


# -- info.json ----------------------------------------------------------------------------------

_REQUIRED_INFO = (
    "codebase_version",
    "robot_type",
    "total_episodes",
    "total_frames",
    "total_tasks",
    "chunks_size",
    "data_files_size_in_mb",
    "video_files_size_in_mb",
    "fps",
    "splits",
    "data_path",
    "video_path",
    "features",
)


def staged_saves(s: Snapshot) -> list[Problem]:
    """A committed save not yet moved into place (load() or DatasetWriter finishes it)."""
    staging = s.root / st.STAGING_DIR
    stages = sorted(staging.iterdir()) if staging.is_dir() else []
    return [
        Problem(stage, "a committed save not yet moved into place (load() or DatasetWriter finishes it)")
        for stage in stages
        if (stage / st.COMMIT_FILE).is_file()
    ]


def info_fields(s: Snapshot) -> list[Problem]:
    """``meta/info.json`` has every required field."""
    return [Problem(s.root / INFO_PATH, f"missing field {k!r}") for k in _REQUIRED_INFO if k not in s.info]


def feature_declarations(s: Snapshot) -> list[Problem]:
    """The standard columns are declared with their dtypes; every dtype is one we can store."""
    path = s.root / INFO_PATH
    problems = [
        Problem(path, f"standard feature {k!r} missing or not {ft['dtype']}")
        for k, ft in DEFAULT_FEATURES.items()
        if k not in s.features or s.features[k]["dtype"] != ft["dtype"]
    ]
    return problems + [
        Problem(path, f"feature {k!r} has unsupported dtype {ft.get('dtype')!r}")
        for k, ft in s.features.items()
        if ft.get("dtype") != "video" and ft.get("dtype") not in NUMERIC
    ]


def path_templates(s: Snapshot) -> list[Problem]:
    """``data_path`` (and ``video_path``, with video features) are the LeRobot v3.0 templates."""
    path, info, problems = s.root / INFO_PATH, s.info, []
    if info.get("data_path") != DATA_PATH:
        problems.append(Problem(path, f"data_path {info.get('data_path')!r} is not {DATA_PATH!r}"))
    if s.video_keys and info.get("video_path") != VIDEO_PATH:
        problems.append(Problem(path, f"video_path {info.get('video_path')!r} is not {VIDEO_PATH!r}"))
    return problems


# -- checksums ----------------------------------------------------------------------------------


def checksum_problems(root: Path, files: dict[str, str]) -> list[Problem]:
    """Each listed file exists and has its recorded sha256."""
    problems = []
    for rel, digest in files.items():
        path = root / rel
        if not path.is_file():
            problems.append(Problem(path, f"missing (listed in {CHECKSUMS_PATH})"))
        elif st.sha256_file(path) != digest:
            problems.append(
                Problem(
                    path, f"checksum mismatch: the file changed or is corrupt (sha256 differs from {CHECKSUMS_PATH})"
                )
            )
    return problems


def checksums(s: Snapshot) -> list[Problem]:
    """Each file in our checksum list has its recorded sha256 (datasets written by embody only)."""
    return checksum_problems(s.root, s.meta.checksums) if s.meta.ours else []


def files_have_checksums(s: Snapshot) -> list[Problem]:
    """Every file the episodes table references is in the checksum table (embody datasets)."""
    if not s.meta.ours:
        return []
    referenced = dict.fromkeys(rel for r in s.rows for rel in r.paths())
    return [
        Problem(s.root / rel, "referenced by the episodes table but has no checksum")
        for rel in referenced
        if rel not in s.meta.checksums
    ]


# -- the episodes and tasks tables --------------------------------------------------------------


def episode_count(s: Snapshot) -> list[Problem]:
    """``total_episodes`` matches the rows of the episodes table."""
    total = int(s.info.get("total_episodes", 0))
    if len(s.rows) == total:
        return []
    return [
        Problem(
            s.root / INFO_PATH,
            f"total_episodes={s.info.get('total_episodes')} but the episodes table has {len(s.rows)} rows",
        )
    ]


def splits_and_tasks(s: Snapshot) -> list[Problem]:
    """``splits`` is ``{"train": "0:<total>"}`` and ``total_tasks`` matches tasks.parquet, without duplicate tasks."""
    path, info, total, problems = s.root / INFO_PATH, s.info, int(s.info.get("total_episodes", 0)), []
    if total and info.get("splits") != {"train": f"0:{total}"}:
        problems.append(Problem(path, f"splits {info.get('splits')} should be {{'train': '0:{total}'}}"))
    if int(info.get("total_tasks", -1)) != len(s.tasks):
        problems.append(Problem(path, f"total_tasks={info.get('total_tasks')} but tasks.parquet has {len(s.tasks)}"))
    if len(set(s.tasks)) != len(s.tasks):
        problems.append(Problem(s.root / TASKS_PATH, "duplicate tasks"))
    return problems


def episode_columns(s: Snapshot) -> list[Problem]:
    """Every row locates a clip of every camera."""
    missing = sorted(
        {f"videos/{k}/{c}" for r in s.rows for k in s.video_keys if k not in r.videos for c in CLIP_FIELDS}
    )
    return [Problem(s.root / EPISODES_FILE, f"missing columns {missing}")] if missing else []


def episode_spans(s: Snapshot) -> list[Problem]:
    """Rows in episode order, laid end to end, with known tasks, adding up to total_frames."""
    path, problems, start = s.root / EPISODES_FILE, [], 0
    for i, r in enumerate(s.rows):
        if r.episode_index != i:
            problems.append(Problem(path, f"episode_index {r.episode_index} at row {i}"))
        if r.dataset_from_index != start or r.dataset_to_index - r.dataset_from_index != r.length:
            problems.append(
                Problem(
                    path,
                    f"episode {i} spans [{r.dataset_from_index}, {r.dataset_to_index}) "
                    f"with length {r.length}; expected to start at {start}",
                )
            )
        start = r.dataset_to_index
        unknown = [t for t in r.tasks if t not in s.tasks]
        if unknown:
            problems.append(Problem(path, f"episode {i} has tasks {unknown} missing from tasks.parquet"))
    if s.rows and start != int(s.info.get("total_frames", -1)):
        problems.append(
            Problem(s.root / INFO_PATH, f"total_frames={s.info.get('total_frames')} but episodes sum to {start}")
        )
    return problems


# -- data files ---------------------------------------------------------------------------------


def data_file_schemas(s: Snapshot) -> list[Problem]:
    """Each referenced data file's columns are the non-video features, with their arrow types."""
    pq = require("pyarrow.parquet", "datasets")

    schema, problems = data_schema(s.features), []
    for rel in sorted({r.data_path for r in s.rows}):
        found = pq.read_schema(s.root / rel)
        if set(found.names) != set(schema.names):
            problems.append(
                Problem(
                    s.root / rel,
                    f"columns {sorted(found.names)} do not match the non-video features {sorted(schema.names)}",
                )
            )
        problems += [
            Problem(s.root / rel, f"column {f.name!r} is {found.field(f.name).type}, features say {f.type}")
            for f in schema
            if f.name in found.names and found.field(f.name).type != f.type
        ]
    return problems


def data_columns(s: Snapshot) -> list[Problem]:
    """index counts 0..N-1; episode_index and frame_index follow the episodes table; timestamps are
    frame_index / fps; task_index points into tasks.parquet."""
    table, path, problems = s.table, s.root / "data", []
    if not table.num_rows:
        return []
    col = lambda k: to_numpy(table.column(k), s.features[k])  # noqa: E731
    n, fps = table.num_rows, float(s.info["fps"])
    lengths = np.asarray([r.length for r in s.rows])
    want_frame = np.arange(n) - np.repeat(np.asarray([r.dataset_from_index for r in s.rows]), lengths)
    if not np.array_equal(col("index"), np.arange(n)):
        problems.append(Problem(path, f"'index' is not 0..{n - 1} in order"))
    if not np.array_equal(col("episode_index"), np.repeat(np.arange(len(s.rows)), lengths)):
        problems.append(Problem(path, "'episode_index' does not match the episodes table"))
    if not np.array_equal(col("frame_index"), want_frame):
        problems.append(Problem(path, "'frame_index' does not restart at 0 and count up in every episode"))
    if np.any(np.abs(col("timestamp").astype(np.float64) - want_frame / fps) > 1e-4 + 0.5 / fps):
        problems.append(Problem(path, "timestamps are not frame_index / fps"))
    task_index = col("task_index")
    if task_index.min() < 0 or task_index.max() >= len(s.tasks):
        problems.append(Problem(path, f"task_index outside [0, {len(s.tasks)})"))
    return problems


# -- videos -------------------------------------------------------------------------------------


def _clips_by_file(s: Snapshot, key: str) -> dict[str, list]:
    """Video file (relative) -> the rows with a ``key`` clip in it."""
    by_file: dict[str, list] = {}
    for r in s.rows:
        by_file.setdefault(r.video_path(key), []).append(r)
    return by_file


def video_files_exist(s: Snapshot) -> list[Problem]:
    """Every video file an episode points to exists."""
    return [
        Problem(s.root / rel, f"missing (video {k!r} of episodes {[r.episode_index for r in rows]})")
        for k in s.video_keys
        for rel, rows in _clips_by_file(s, k).items()
        if not (s.root / rel).is_file()
    ]


def _clip_problems(path: Path, r, key: str, fps: float, gop: int) -> list[Problem]:
    """One clip: a packet per frame of the episode, a keyframe first and then at least every ``gop``."""
    clip = r.videos[key]
    packets = _video.packets_in_range(path, clip.from_timestamp, clip.to_timestamp, fps)
    if [p for p, _ in packets] != list(range(r.length)):
        return [
            Problem(
                path,
                f"episode {r.episode_index} has {len(packets)} video frames in "
                f"[{clip.from_timestamp}, {clip.to_timestamp}), its length is {r.length}",
            )
        ]
    keys = [p for p, kf in packets if kf]
    if not keys or keys[0] != 0:
        return [Problem(path, f"episode {r.episode_index} does not start on a keyframe")]
    if gop and max(np.diff(keys + [r.length]), default=1) > gop:
        return [Problem(path, f"episode {r.episode_index} has keyframes more than {gop} frames apart")]
    return []


def video_frames(s: Snapshot) -> list[Problem]:
    """Every clip's frame count and keyframe spacing (the recorded keyframe interval at most)."""
    gop, fps, problems = int(s.info.get("embody", {}).get("keyframe_interval", 0) or 0), float(s.info["fps"]), []
    for k in s.video_keys:
        for rel, rows in _clips_by_file(s, k).items():
            path = s.root / rel
            for r in rows if path.is_file() else []:  # a missing file is video_files_exist's to report
                try:
                    problems += _clip_problems(path, r, k, fps, gop)
                except Exception as e:  # noqa: BLE001 - any decoder failure is a problem to report
                    problems.append(Problem(path, f"unreadable ({e})"))
                    break
    return problems


# -- stats and stray files ----------------------------------------------------------------------


def stats_entries(s: Snapshot) -> list[Problem]:
    """``meta/stats.json`` has every statistic for every feature (when the dataset has episodes)."""
    if not s.rows:
        return []
    try:
        stats = read_json(s.root / STATS_PATH)
    except DatasetFormatError as e:
        return [Problem(e.path, e.problem)]
    return [
        Problem(s.root / STATS_PATH, f"feature {k!r} lacks {missing}")
        for k in s.features
        if (missing := [name for name in STATS if name not in stats.get(k, {})])
    ]


def stray_files(s: Snapshot) -> list[Problem]:
    """Parquet and MP4 files no episode references: lerobot globs these folders and would read them."""
    referenced = {rel for r in s.rows for rel in r.paths()} | {EPISODES_FILE}
    return [
        Problem(p, "not referenced by the episodes table (lerobot would read it)")
        for pattern in ("data/*/*.parquet", "videos/*/*/*.mp4", "meta/episodes/*/*.parquet")
        for p in sorted(s.root.glob(pattern))
        if p.relative_to(s.root).as_posix() not in referenced
    ]


# -- what validate and load run -----------------------------------------------------------------

VALIDATE_STAGES: tuple[tuple[Check, ...], ...] = (
    (staged_saves, info_fields, feature_declarations),
    (path_templates, checksums, episode_count, splits_and_tasks, episode_columns, episode_spans, files_have_checksums),
    (data_columns, data_file_schemas, video_files_exist, video_frames, stats_entries, stray_files),
)

#: what reading needs, cheapest first; the checksum checks run when load verifies
LOAD_CHECKS: tuple[Check, ...] = (checksums, episode_count, episode_columns, files_have_checksums, video_files_exist)
_VERIFYING = (checksums, files_have_checksums)


def load_checks(verify: bool) -> tuple[Check, ...]:
    """The checks ``load`` runs: LOAD_CHECKS, without the checksum checks unless ``verify``."""
    return LOAD_CHECKS if verify else tuple(c for c in LOAD_CHECKS if c not in _VERIFYING)


def validate(root: str | Path) -> list[str]:
    """Check a dataset and return the problems found (empty: valid).

    Layout and info.json fields, checksums, parquet schemas against the features, episode
    lengths and index continuity (index, frame_index, episode_index, timestamps, task_index),
    tasks, stats entries, unreferenced files in data/ and videos/ (lerobot would read them),
    and video packet counts against episode lengths with keyframes at most the recorded
    keyframe interval apart.
    """
    s, problems = Snapshot(Path(root)), []
    for stage in VALIDATE_STAGES:
        try:
            for check in stage:
                problems += check(s)
        except DatasetFormatError as e:
            return [*map(str, problems), str(e)]
        if problems:
            break
    return [str(p) for p in problems]
