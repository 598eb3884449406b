"""Every ``embody`` subcommand, core or plugin, is registered here the same way.

A command is a name (``"train"``, or ``"plan eval"`` for a subcommand of the group ``plan``), a
one-line help, a function adding its arguments to an argparse parser and a function running it that
returns an exit code (``embody.exits``). A group (``plan``, ``blindfolded``) is a command without
``run``; its subcommands are registered under ``"GROUP SUB"`` by whoever provides them, core or plugin.

Arguments are checked at the edge with the types below: a numeric flag declares its range, so
``--envs 0`` or ``--steps -5`` end in argparse's one-line error (exit 2), never in a traceback or a run.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

Arguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """One registered subcommand or group (see the module docstring); ``run`` returns an exit code."""

    name: str  # "train" or "GROUP SUB"
    help: str
    arguments: Arguments | None = None
    run: Run | None = None  # None: a group of subcommands
    provider: str = "embody"  # the core or the plugin that registered it


COMMANDS: dict[str, Command] = {}


def check_free(name: str) -> None:
    """Raise ValueError (naming the provider that took it) if ``name`` is already registered."""
    if name in COMMANDS:
        raise ValueError(f"command {name!r} is already registered by {COMMANDS[name].provider}")


def register(command: Command) -> None:
    """Add ``command`` to ``COMMANDS``; ValueError when its name is taken or its group is a command."""
    check_free(command.name)
    group = command.name.rpartition(" ")[0]
    if group and group in COMMANDS and COMMANDS[group].run is not None:
        raise ValueError(f"command {command.name!r}: {group!r} is a command, not a group")
    COMMANDS[command.name] = command


def group(name: str, help: str, provider: str = "embody") -> None:
    """A group of subcommands (``embody plan ...``); its subcommands are registered as ``"NAME SUB"``."""
    register(Command(name, help, provider=provider))


def command(name: str, help: str, arguments: Arguments | None = None, provider: str = "embody"):
    """Decorator registering ``run``: ``@command("train", "train a policy", add_train_arguments)``."""

    def wrap(run: Run) -> Run:
        register(Command(name, help, arguments, run, provider))
        return run

    return wrap


def build_parser(prog: str = "embody", description: str | None = None) -> argparse.ArgumentParser:
    """One argparse parser over every registered command; each leaf sets ``args.embody_command`` to its Command."""
    root = argparse.ArgumentParser(prog=prog, description=description)
    root.add_argument(
        "--ray-address",
        dest="jobs_ray_address",  # not train's own --ray-address (a subcommand's default would overwrite it)
        metavar="HOST:PORT",
        help="run the jobs of studies and sweeps on this Ray cluster (the scale extra; docs/cluster.md)",
    )
    subparsers = {"": root.add_subparsers(dest="_command", required=True, metavar="COMMAND")}
    for name in sorted(COMMANDS, key=lambda n: (n.count(" "), n)):  # groups before their subcommands
        cmd = COMMANDS[name]
        group, _, leaf = name.rpartition(" ")
        if group not in subparsers:
            raise ValueError(f"command {name!r} ({cmd.provider}): no group {group!r} is registered")
        p = subparsers[group].add_parser(leaf, help=cmd.help, description=cmd.help)
        if cmd.arguments:
            cmd.arguments(p)
        if cmd.run is None:
            subparsers[name] = p.add_subparsers(dest=f"_{name}", required=True, metavar="SUBCOMMAND")
        else:
            p.set_defaults(embody_command=cmd)
    return root


# ---------------------------------------------------------------- argument types (checked at the edge)


def _number(kind: type, ok: Callable[[float], bool], what: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (math.isfinite(value) and ok(value)):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = what.replace(" ", "_")  # argparse names the type in some messages
    parse.checked = True  # the bad-input test asserts every numeric argument is checked
    return parse


positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
any_int = _number(int, lambda v: True, "an integer")  # seeds and ids: any integer is meaningful
positive_float = _number(float, lambda v: v > 0, "a number > 0")
nonneg_float = _number(float, lambda v: v >= 0, "a number >= 0")
fraction = _number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")
rt_priority = _number(int, lambda v: 1 <= v <= 99, "a real-time priority in 1..99")


def floats(text: str) -> list[float]:
    """Comma-separated finite numbers, e.g. ``0.5,0,0.1``."""
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {text!r}")
    return values


floats.checked = True


def add_set(parser: argparse.ArgumentParser, what: str = "the config", example: str = "") -> None:
    """The ``--set KEY=VALUE`` flag (repeatable) every configurable command takes."""
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help=f"override a value of {what}" + (f", e.g. {example}" if example else ""),
    )


def add_merge_arguments(parser: argparse.ArgumentParser, what: str, default_out: str) -> None:
    """``--from DIR`` (repeatable, required) and ``--out DIR``: study folders run apart (``embody.jobs``) pooled
    into one report; ``what`` names what the folders hold, e.g. "a study's output folder"."""
    parser.add_argument(
        "--from",
        dest="sources",
        action="append",
        metavar="DIR",
        required=True,
        help=f"{what} (repeatable): pooled into one report in --out",
    )
    parser.add_argument("--out", default=default_out, metavar="DIR", help=f"output folder (default {default_out})")
