"""String-keyed registries whose entries load lazily ("module:attribute").

Heavy modules (a simulator, a robot's model builder) are imported only when their name is
asked for, and an unknown name fails with the list of valid ones. Plugins (``embody.plugins``) add
entries; they are loaded before a registry is first read.
"""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

from embody import exits

T = TypeVar("T")


class UnknownName(KeyError):
    """A registry lookup of a name nobody registered; the message lists the valid ones (exit code 2)."""

    exit_code = exits.INPUT

    def __str__(self) -> str:  # KeyError would print the repr with quotes
        return str(self.args[0])


class Registry(Generic[T]):
    """Names → ``"module:attribute"`` entry points, imported only by ``get``; plugins load before the first read."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, str] = {}
        self._extras: dict[str, str | None] = {}

    def register(self, name: str, entry_point: str, extra: str | None = None) -> None:
        """``entry_point`` is "package.module:attribute"; ``extra`` names the pip extra it needs."""
        self.check_free(name)
        self._entries[name] = entry_point
        self._extras[name] = extra

    def check_free(self, name: str) -> None:
        """Raise ValueError if ``name`` is already registered."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")

    def names(self) -> list[str]:
        """Every registered name, sorted (plugins loaded first)."""
        _load_plugins()
        return sorted(self._entries)

    def extra(self, name: str) -> str | None:
        """The pip extra ``name``'s entry needs, or None; KeyError for an unknown name."""
        return self._extras[name]

    def get(self, name: str) -> T:
        """Import and return ``name``'s attribute; ``UnknownName`` listing the valid names when unregistered."""
        if name not in self:
            raise UnknownName(f"unknown {self.kind} {name!r}; valid: {', '.join(self.names())}")
        module, _, attr = self._entries[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def __contains__(self, name: str) -> bool:
        _load_plugins()
        return name in self._entries


def _load_plugins() -> None:
    from embody import plugins

    plugins.load()
