"""Optional dependencies: import them by name, fail with the extra that provides them."""

from __future__ import annotations

import importlib
import importlib.util

from embody import exits


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the pip extra that provides it (exit code 2)."""

    exit_code = exits.INPUT


def require(module: str, extra: str):
    """Import ``module`` or raise an error telling the user which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(
            f"{module!r} is not installed; it comes with the {extra!r} extra: pip install 'embody[{extra}]' ({e})"
        ) from e


def available(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    return importlib.util.find_spec(module) is not None


def installed_extras(dist: str = "embody") -> dict[str, bool]:
    """Each extra of ``dist`` (from its installed metadata; ``dev`` aside): are all its requirements installed?"""
    import importlib.metadata as md
    import re

    meta = md.metadata(dist)
    wanted: dict[str, list[str]] = {e: [] for e in meta.get_all("Provides-Extra") or [] if e != "dev"}
    for req in md.requires(dist) or []:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+).*extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if m and m.group(2) in wanted:
            wanted[m.group(2)].append(m.group(1))
    return {extra: all(_installed(d) for d in dists) for extra, dists in wanted.items()}


def _installed(distribution: str) -> bool:
    import importlib.metadata as md

    try:
        md.version(distribution)
    except md.PackageNotFoundError:
        return False
    return True
