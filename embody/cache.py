"""Files embody generates (scene variants, URDFs): one cache folder, content-addressed, atomic."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def cache_dir(sub: str = "") -> Path:
    """$EMBODY_CACHE_DIR, else $XDG_CACHE_HOME/embody, else ~/.cache/embody (then ``sub``)."""
    root = os.environ.get("EMBODY_CACHE_DIR")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "embody"
    return base / sub if sub else base


def write_cached(folder: Path, text: str, stem: str = "", suffix: str = ".xml") -> Path:
    """Write ``text`` to ``folder/<stem>-<content hash><suffix>`` unless it is there already.

    Written to a temporary file and renamed, so concurrent writers never expose a partial file.
    """
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = folder / f"{stem + '-' if stem else ''}{digest}{suffix}"
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
