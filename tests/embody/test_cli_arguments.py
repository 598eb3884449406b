"""Bad input at the edge, over every command (core and plugins): numeric arguments declare their
range, bad numbers and missing input files end in one line and exit code 2, never a traceback or a run."""

from __future__ import annotations

import argparse
import socket

import pytest

from embody.cli import build_parser, main
from embody.commands import COMMANDS

MISSING = "/nonexistent/embody-input"

# each command's input files: an argv whose MISSING path must be named in a one-line error (exit 2)
INPUT_PATHS = {
    "train": [["train", "--resume", MISSING], ["train", "cartpole-swingup", "--config", MISSING]],
    "distill": [],  # no input files
    "eval": [["eval", MISSING]],
    "video": [["video", MISSING]],
    "sim2sim": [["sim2sim", MISSING, "--sim", "mujoco"]],
    "deploy": [["deploy", MISSING, "--robot", "peg_arm"], ["deploy", "x", "--robot", "h1_2", "--clip", MISSING]],
    "record": [["record", "peg-insert", "--episodes", "1", "--out", "{tmp}/ds", "--policy", MISSING]],
    "replay": [["replay", MISSING]],
    "dataset info": [["dataset", "info", MISSING]],
    "dataset stats": [["dataset", "stats", MISSING]],
    "dataset plot": [["dataset", "plot", MISSING]],
    "dataset view": [["dataset", "view", MISSING, "--save", "{tmp}/x.rrd"]],
    "dataset export-mcap": [["dataset", "export-mcap", MISSING, "--out", "{tmp}/x.mcap"]],
    "dataset compact": [["dataset", "compact", MISSING]],
    "dataset export-minari": [["dataset", "export-minari", MISSING, "--out", "{tmp}/m"]],
    "dataset import-minari": [["dataset", "import-minari", MISSING, "--out", "{tmp}/ds", "--fps", "10"]],
    "plan learn": [["plan", "learn", MISSING, "--out", "{tmp}/lib"]],
    "plan fuse": [["plan", "fuse", MISSING, "--out", "{tmp}/meta.pddl"]],
    "plan solve": [["plan", "solve", "--domain", MISSING, "--problem", MISSING]],
    "plan task": [["plan", "task", "x", "--library", MISSING, "--problem", MISSING]],
    "plan demo": [["plan", "demo", "--problem", MISSING, "--out", "{tmp}/demo", "--no-video"]],
    "drive": [["drive", "highway", "--actors", MISSING]],
    "motion retarget": [["motion", "retarget", MISSING, "--out", "{tmp}/clips"]],
    "almi eval": [["almi", "eval", MISSING, "--out", "{tmp}/e"], ["almi", "eval", "x", "--clips", MISSING]],
    "almi export-dataset": [
        ["almi", "export-dataset", MISSING, "--clips", "{tmp}", "--out", "{tmp}/ds"],
        ["almi", "export-dataset", "x", "--clips", MISSING, "--out", "{tmp}/ds"],
    ],
    "backdoor trigger": [["backdoor", "trigger", MISSING, "--out", "{tmp}/lib"]],
    "backdoor dataset": [
        ["backdoor", "dataset", MISSING, "--out", "{tmp}/ds"],
        ["backdoor", "dataset", "{tmp}", "--config", MISSING, "--out", "{tmp}/ds"],
    ],
    "backdoor train": [["backdoor", "train", MISSING, "--agent", "bc", "--out", "{tmp}/a"]],
    "backdoor demo": [
        ["backdoor", "demo", "--agent", MISSING, "--trigger", "{tmp}/t.csv", "--out", "{tmp}/d"],
        ["backdoor", "demo", "--agent", "{tmp}", "--trigger", MISSING, "--out", "{tmp}/d"],
    ],
    "almi compose": [["almi", "compose", "--lower", MISSING, "--upper", MISSING, "--out", "{tmp}/whole"]],
    "mpa eval": [["mpa", "eval", "--models", MISSING, "--out", "{tmp}/mpa"]],
    "mpa diagnose": [["mpa", "diagnose", "--models", MISSING, "--out", "{tmp}/mpa"]],
    "mpa merge": [["mpa", "merge", "--from", MISSING, "--out", "{tmp}/mpa"]],
    "blindfolded train": [["blindfolded", "train", "--domain", "peg", "--demos", MISSING, "--out", "{tmp}/b"]],
    "blindfolded import": [["blindfolded", "import", "--dataset", MISSING, "--out", "{tmp}/b"]],
    "blindfolded merge": [["blindfolded", "merge", "--from", MISSING, "--out", "{tmp}/b"]],
    "primt label": [["primt", "label", MISSING, "--task", "cartpole-swingup", "--out", "{tmp}/p.safetensors"]],
}
NO_INPUT_FILES = {
    "list",
    "bench",
    "robot-sim",
    "motion generate",
    "almi train",
    "almi study",
    "backdoor study",
    "primt train",
    "primt study",
    "dva train",
    "dva study",
    "dataset validate",
    "plan eval",
    "mpa train",
    "blindfolded collect",
    "blindfolded eval",
    "blindfolded study",
    "sweep",
}  # (validate reports a missing folder as a problem, exit 1)
BAD = {
    "an integer >= 1": ["0", "-5", "1.5", "x"],
    "an integer >= 0": ["-1", "x"],
    "an integer": ["1.5", "x"],
    "a number > 0": ["0", "-1", "nan", "inf", "x"],
    "a number >= 0": ["-0.5", "nan", "x"],
    "a number in [0, 1]": ["-0.1", "1.5", "nan"],
    "a real-time priority in 1..99": ["0", "100", "x"],
}


def _leaf_parsers():
    """(command name, its parser) for every runnable command."""
    root = build_parser()

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{prefix} {name}".strip())
        if prefix in COMMANDS and COMMANDS[prefix].run is not None:
            yield prefix, parser

    return list(walk(root, ""))


def _minimal_argv(name: str, parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """The command with placeholders for its positionals and required options (valid numbers where typed)."""
    argv = name.split()
    for a in parser._actions:
        if a is skip or isinstance(a, argparse._HelpAction):
            continue
        value = "1" if getattr(a.type, "checked", False) else "x"
        if a.choices and value not in a.choices:
            value = next(iter(a.choices))
        if not a.option_strings and a.nargs != argparse.REMAINDER:
            argv.append(value)
        elif a.option_strings and a.required:
            argv += [a.option_strings[0], value]
    return argv


def _numeric_arguments():
    return [
        (name, parser, a)
        for name, parser in _leaf_parsers()
        for a in parser._actions
        if getattr(a.type, "checked", False) and a.type.__name__.replace("_", " ") in BAD
    ]


def test_every_numeric_argument_declares_its_range():
    unchecked = [
        f"{name} {'/'.join(a.option_strings) or a.dest}: type={a.type.__name__}"
        for name, parser in _leaf_parsers()
        for a in parser._actions
        if a.type in (int, float)
    ]
    assert not unchecked, "use embody.commands' range-checked types:\n" + "\n".join(unchecked)
    assert len(_numeric_arguments()) > 30  # the walk found the commands' numeric flags


def test_every_benchmark_argument_declares_its_range(monkeypatch):
    """``embody bench NAME`` hands the rest of the line to the benchmark's own parser, which the walk above does
    not reach: capture each parser as it parses, before the benchmark runs."""
    import importlib

    from embody import plugins
    from embody.benchmarks import BENCHMARKS

    class Parsed(Exception):
        pass

    def capture(parser, *args, **kwargs):
        raise Parsed(parser)

    plugins.load()
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    unchecked = []
    for name, module in sorted(BENCHMARKS.items()):
        with pytest.raises(Parsed) as parsed:
            importlib.import_module(module).main([])
        unchecked += [
            f"bench {name} {'/'.join(a.option_strings)}"
            for a in parsed.value.args[0]._actions
            if a.type in (int, float)
        ]
    assert not unchecked, "use embody.commands' range-checked types:\n" + "\n".join(unchecked)


def test_every_command_lists_its_input_files():
    names = {name for name, _ in _leaf_parsers()}
    assert names == set(INPUT_PATHS) | NO_INPUT_FILES, "add new commands to INPUT_PATHS or NO_INPUT_FILES"


@pytest.mark.parametrize(
    "name,parser,action",
    _numeric_arguments(),
    ids=lambda x: (
        x.replace(" ", "-")
        if isinstance(x, str)
        else (x.option_strings or [x.dest])[0]
        if isinstance(x, argparse.Action)
        else ""
    ),
)
def test_bad_numbers_are_one_clear_line(name, parser, action, capsys):
    for bad in BAD[action.type.__name__.replace("_", " ")]:
        argv = _minimal_argv(name, parser, action)
        argv = argv[: len(name.split())] + [*action.option_strings[:1], bad] + argv[len(name.split()) :]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"embody {name}: error: argument" in err and "expected" in err, err
        assert "Traceback" not in err


@pytest.mark.parametrize("name", sorted(INPUT_PATHS))
def test_missing_input_files_are_one_clear_line(name, tmp_path, capsys):
    for argv in INPUT_PATHS[name]:
        argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"embody {name}: ") and MISSING in err[0], err
        assert not any(tmp_path.iterdir()), f"{argv} wrote {list(tmp_path.iterdir())}"


def test_the_cases_a_new_user_tried(tmp_path, capsys):
    assert main(["train", "cartpole-swingup", "--envs", "0"]) == 2
    assert main(["train", "cartpole-swingup", "--steps", "-5", "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    capsys.readouterr()
    assert (
        main(["train", "cartpole-swingup", "--workers", "2", "--ray-address", address, "--out", str(tmp_path / "run")])
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"no Ray head reachable at {address}" in err[0] and not (tmp_path / "run").exists()
    assert main(["--ray-address", address, "list"]) == 2  # studies' jobs on a cluster: checked before the command
    assert f"no Ray head reachable at {address}" in capsys.readouterr().err
    assert main(["record", "h1_2-stand", "--episodes", "0", "--out", str(tmp_path / "ds")]) == 2
    assert not (tmp_path / "ds").exists()
    capsys.readouterr()
    assert main(["deploy", str(tmp_path), "--robot", "h1_2"]) == 2
    assert capsys.readouterr().err.startswith("embody deploy: error: ")  # not "embody None"
