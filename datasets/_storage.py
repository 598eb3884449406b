"""Crash-safe file plumbing for the dataset writer: atomic writes, checksums, the staging journal.

A save stages every new file (episode data, videos, the rewritten meta files) under
``<root>/.embody-staging/<name>/``, then writes ``COMMIT`` (the list of moves) atomically: that
single rename is the commit point. Applying the moves (``os.replace`` each staged file onto its
final path) is idempotent, so a crash while applying is rolled forward by :func:`recover`; a
staging folder without ``COMMIT`` is an interrupted save and is discarded by the writer. Readers
that know nothing of this (lerobot itself) only ever glob ``data/``, ``videos/`` and ``meta/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from embody.extras import require
from embody.files import fsync_dir as _fsync_dir  # noqa: F401 (re-exported)
from embody.files import write_atomic

STAGING_DIR = ".embody-staging"
COMMIT_FILE = "COMMIT"


def sha256_file(path: str | Path, block: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


def json_bytes(obj) -> bytes:
    """JSON the way lerobot writes its meta files (indent 4, UTF-8 kept)."""
    return (json.dumps(obj, indent=4, ensure_ascii=False) + "\n").encode()


def parquet_bytes(table) -> bytes:
    """Serialise a pyarrow table to parquet bytes (snappy, lerobot's default)."""
    pa = require("pyarrow", "datasets")
    pq = require("pyarrow.parquet", "datasets")

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue().to_pybytes()


def fsync_file(path: str | Path) -> None:
    """Flush the file at ``path`` to disk (``os.fsync``)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def new_stage(root: Path) -> Path:
    """A fresh, empty staging folder ``<root>/.embody-staging/<ns-time>-<pid>`` (names sort in creation
    order, which is the order committed stages are applied in)."""
    stage = root / STAGING_DIR / f"{time.time_ns():020d}-{os.getpid()}"
    stage.mkdir(parents=True)
    return stage


def commit(stage: Path, moves: list[tuple[str, str]]) -> None:
    """Make the staged save durable: ``moves`` is [(path inside stage, path inside root)], applied in order."""
    for src, _ in moves:
        fsync_file(stage / src)
    write_atomic(stage / COMMIT_FILE, json.dumps({"moves": moves}).encode())


def apply(root: Path, stage: Path) -> None:
    """Move a committed stage's files onto their final paths (idempotent), then remove the stage."""
    moves = json.loads((stage / COMMIT_FILE).read_text())["moves"]
    touched = set()
    for src, dst in moves:
        staged, final = stage / src, root / dst
        if staged.exists():  # already moved by an earlier, interrupted apply otherwise
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, final)
            touched.add(final.parent)
    for d in touched:
        _fsync_dir(d)
    shutil.rmtree(stage, ignore_errors=True)
    parent = stage.parent
    if parent.name == STAGING_DIR and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()


def recover(root: Path, discard_uncommitted: bool) -> None:
    """Roll committed stages forward; drop uncommitted ones when ``discard_uncommitted`` (writer only:
    a reader must not delete a save another process is still writing)."""
    staging = root / STAGING_DIR
    if not staging.is_dir():
        return
    for stage in sorted(staging.iterdir()):
        if (stage / COMMIT_FILE).is_file():
            apply(root, stage)
        elif discard_uncommitted:
            shutil.rmtree(stage, ignore_errors=True)
    if staging.is_dir() and not any(staging.iterdir()):
        staging.rmdir()


# -- compaction swaps a whole new layout in beside the old one --------------------------------

COMPACT_COMPLETE = ".embody-compact-complete"


def compact_siblings(root: Path) -> tuple[Path, Path]:
    """(new, old) folders that ``compact`` builds and swaps beside ``root``."""
    return (root.with_name(f".{root.name}.embody-compact-new"), root.with_name(f".{root.name}.embody-compact-old"))


def recover_compact(root: Path, remove_incomplete: bool = False) -> None:
    """Finish or undo an interrupted compaction swap so ``root`` holds exactly one complete layout.

    ``remove_incomplete`` also deletes a half-built new layout (only ``compact`` itself does this:
    a reader must not delete a compaction another process is still writing).
    """
    new, old = compact_siblings(root)
    if not root.exists():
        if (new / COMPACT_COMPLETE).is_file():
            os.rename(new, root)
        elif old.is_dir():
            os.rename(old, root)
    if root.exists():
        if (root / COMPACT_COMPLETE).exists():
            (root / COMPACT_COMPLETE).unlink(missing_ok=True)
        if old.exists():  # the swap finished; the previous layout is garbage
            shutil.rmtree(old, ignore_errors=True)
        if new.exists() and (remove_incomplete or (new / COMPACT_COMPLETE).is_file()):
            shutil.rmtree(new, ignore_errors=True)
