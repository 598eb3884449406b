"""Crash-safe writes: a file is either its old content or its new content, never half of each."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (so a rename in it survives a crash); a no-op where unsupported."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` to a temporary name beside ``path``, fsync, then ``os.replace`` it in place (the temporary's
    name is per process: two processes writing one file, e.g. a shared study's report, never mix their bytes)."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def write_study(out: str | Path, result: dict, report: str) -> Path:
    """A study's ``out/results.json`` (``result``; numpy numbers as floats) and ``out/report.md`` (``report``),
    each written atomically; returns the report's path."""
    import json

    write_atomic(Path(out, "results.json"), json.dumps(result, indent=2, default=float))
    return write_atomic(Path(out, "report.md"), report)


def save_arrays(path: str | Path, arrays: dict, meta: dict[str, str]) -> None:
    """Numpy ``arrays`` and string ``meta`` as one safetensors file, written beside ``path`` and renamed into place."""
    import numpy as np
    from safetensors.numpy import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial")
    save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, str(tmp), metadata=meta)
    os.replace(tmp, path)


def load_arrays(path: str | Path, fmt: str, keys, error: type[Exception], what: str) -> tuple[dict[str, str], dict]:
    """(meta, arrays) of a file ``save_arrays`` wrote with ``meta["format"] == fmt`` and exactly ``keys``; a missing,
    damaged or foreign file raises ``error`` naming ``path`` and ``what`` it should have been."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "np") as f:
            meta, arrays = f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}
    except FileNotFoundError:
        raise error(f"{path}: {what} file is missing") from None
    except Exception as e:  # noqa: BLE001 - safetensors raises several types for damaged files
        raise error(f"{path}: not a readable {what} ({e})") from None
    if meta.get("format") != fmt or set(arrays) != set(keys):
        raise error(f"{path}: not an embody {what} (keys {sorted(arrays)})")
    return meta, arrays
