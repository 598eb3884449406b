"""Optional dependencies: import them by name, fail with the extra that provides them."""

from __future__ import annotations

import importlib
import importlib.util


class MissingExtra(ImportError):
    pass


def require(module: str, extra: str):
    """Import ``module`` or raise an error telling the user which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(
            f"{module!r} is not installed; it comes with the {extra!r} extra: pip install 'embody[{extra}]' ({e})"
        ) from e


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
