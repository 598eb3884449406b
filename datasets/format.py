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

This module is the public face; the work is done in ``schema`` (paths, features, arrow types),
``stats``, ``episodes`` (:class:`EpisodeRow`, a typed row of the episodes table), ``meta`` (info,
tasks and episodes tables, schema versions and migrations, checksums), ``snapshot`` (a dataset's
parts read lazily), ``checks`` (named checks; :func:`validate`), ``reader`` (:class:`Dataset`,
:func:`load`), ``writer`` (:class:`DatasetWriter`) and ``compaction`` (:func:`compact`).
"""

from .checks import validate
from .compaction import compact
from .episodes import EpisodeRow, Location, VideoClip
from .meta import MIGRATIONS
from .reader import Dataset, load
from .schema import (
    CHECKSUMS_PATH,
    CHUNK_FILE,
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_DATA_FILE_SIZE_IN_MB,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_FILE_SIZE_IN_MB,
    EMBODY_SCHEMA_VERSION,
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetFormatError,
    feature,
)
from .writer import DatasetWriter

__all__ = [
    "CHECKSUMS_PATH",
    "CHUNK_FILE",
    "CODEBASE_VERSION",
    "DATA_PATH",
    "DEFAULT_DATA_FILE_SIZE_IN_MB",
    "DEFAULT_FEATURES",
    "DEFAULT_VIDEO_FILE_SIZE_IN_MB",
    "EMBODY_SCHEMA_VERSION",
    "EPISODES_PATH",
    "INFO_PATH",
    "MIGRATIONS",
    "STATS_PATH",
    "TASKS_PATH",
    "VIDEO_PATH",
    "Dataset",
    "DatasetFormatError",
    "DatasetWriter",
    "EpisodeRow",
    "Location",
    "VideoClip",
    "compact",
    "feature",
    "load",
    "validate",
]
