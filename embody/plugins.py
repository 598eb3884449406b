"""Plugins: how a method (or any package) adds commands, tasks, policy classes and studies to embody.

A plugin is a Python package that names a ``register(api)`` function in the ``embody.plugins``
entry-point group of its own ``pyproject.toml``::

    [project.entry-points."embody.plugins"]
    mymethod = "mymethod.plugin:register"

and registers through the ``PluginAPI`` it is handed (commands, tasks, policy classes, studies), naming
heavy modules as ``"module:attribute"`` strings so that ``embody`` stays fast to start. The built-in
methods under ``papers/`` are registered exactly so (``setup.py`` names each ``papers/NAME/plugin.py``).

Plugins load once, on first use of a registry or the CLI. A plugin that fails to import or register
changes nothing (its registrations are applied only when ``register`` returns and none of its names is
taken) and does not break
embody: ``embody list`` names it with its one-line error (``failures()``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass, field

GROUP = "embody.plugins"

_state = {"loaded": False}
_loaded: dict[str, str] = {}  # plugin name -> the distribution providing it ("name version")
_failed: dict[str, str] = {}  # plugin name -> its one-line error


@dataclass
class PluginAPI:
    """What a plugin's ``register(api)`` is handed; every call is recorded and applied when it returns."""

    name: str
    _pending: list[tuple[Callable[[], None], Callable[[], None]]] = field(default_factory=list)  # (check, apply)

    def command(
        self,
        name: str,
        help: str,
        arguments: Callable[[argparse.ArgumentParser], None] | None = None,
        run: Callable[[argparse.Namespace], int] | None = None,
    ) -> None:
        """A command (``"mymethod"``), a group (``run=None``) or a subcommand (``"mymethod train"``, or
        ``"plan eval"`` under a core group). ``run(args)`` returns an exit code (``embody.exits``)."""
        from embody.commands import Command, check_free, register

        self._pending.append(
            (lambda: check_free(name), lambda: register(Command(name, help, arguments, run, provider=self.name)))
        )

    def task(self, name: str, entry_point: str, extra: str | None = None) -> None:
        """A task class, ``"package.module:Class"`` (see ``embody.sims.tasks``)."""
        tasks = _registry("embody.sims.tasks", "TASKS")
        self._pending.append((lambda: tasks.check_free(name), lambda: tasks.register(name, entry_point, extra)))

    def policy(self, name: str, entry_point: str) -> None:
        """A policy class that checkpoints name (``checkpoint.json`` "class"), ``"package.module:Class"``."""
        policies = _registry("embody.policies.classes", "POLICY_CLASSES")
        self._pending.append((lambda: policies.check_free(name), lambda: policies.register(name, entry_point)))

    def pixel_source(self, name: str, entry_point: str) -> None:
        """A source of pixel observations (``--set pixel_source=NAME``): a ``PixelEnv`` subclass,
        ``"package.module:Class"`` (see ``embody.sims.pixels``)."""
        sources = _registry("embody.sims.pixels", "PIXEL_SOURCES")
        self._pending.append((lambda: sources.check_free(name), lambda: sources.register(name, entry_point)))

    def benchmark(self, name: str, module: str) -> None:
        """A benchmark run by ``embody bench NAME``: ``module`` (dotted) has ``main(argv) -> int``."""
        benchmarks = _registry("embody.benchmarks", "BENCHMARKS")

        def check() -> None:
            if name in benchmarks:
                raise ValueError(f"benchmark {name!r} is already registered")

        self._pending.append((check, lambda: benchmarks.__setitem__(name, module)))

    def study(self, name: str, entry_point: str, command: str) -> None:
        """A study: ``entry_point`` names its config dataclass (``"module:Config"``); ``command`` is
        the command line that runs it (``embody list`` shows both)."""
        self._pending.append((lambda: STUDIES.check_free(name), lambda: STUDIES.register(name, entry_point, command)))


def _registry(module: str, name: str):
    return getattr(importlib.import_module(module), name)


def load() -> None:
    """Load every installed plugin once (idempotent; cheap after the first call)."""
    if _state["loaded"]:
        return
    _state["loaded"] = True  # before loading: registries a plugin touches call load() again
    for ep in importlib.metadata.entry_points(group=GROUP):
        if ep.name in _loaded or ep.name in _failed:
            continue  # the same plugin seen twice on sys.path: the first wins
        api = PluginAPI(ep.name)
        try:
            ep.load()(api)
            for check, _ in api._pending:  # all or nothing: a taken name leaves no partial registration
                check()
            for _, apply in api._pending:
                apply()
        except Exception as e:  # noqa: BLE001 - any failure of a plugin is reported, never fatal
            _failed[ep.name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
            continue
        dist = ep.dist
        _loaded[ep.name] = f"{dist.name} {dist.version}" if dist is not None else "?"


def loaded() -> dict[str, str]:
    """The plugins that registered, name → ``"distribution version"`` (loads them first)."""
    load()
    return dict(_loaded)


def failures() -> dict[str, str]:
    """The plugins that failed, name → their one-line error (loads them first)."""
    load()
    return dict(_failed)


@dataclass(frozen=True)
class Study:
    """A registered study: its config dataclass (``"module:Class"``) and the command that runs it."""

    name: str
    config: str  # "module:ConfigDataclass"
    command: str  # how to run it, e.g. "embody blindfolded study --scale tiny"


class _Studies:
    def __init__(self):
        self._studies: dict[str, Study] = {}

    def check_free(self, name: str) -> None:
        """Raise ValueError if a study called ``name`` is already registered."""
        if name in self._studies:
            raise ValueError(f"study {name!r} is already registered")

    def register(self, name: str, config: str, command: str) -> None:
        """Register a study; ValueError when the name is taken."""
        self.check_free(name)
        self._studies[name] = Study(name, config, command)

    def all(self) -> list[Study]:
        """Every registered study (plugins loaded first), sorted by name."""
        load()
        return [self._studies[n] for n in sorted(self._studies)]


STUDIES = _Studies()
