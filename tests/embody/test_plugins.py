"""Plugins (embody.plugins): a package outside this repository adds commands, a subcommand under a core
group, a policy class and a study through its own pyproject.toml, exactly as papers/ do; a plugin that fails
(on import, in ``register``, or by taking a name already taken) is named by ``embody list`` and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from embody import commands, plugins

HELLO = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "embody-hello"
        version = "0.0.1"

        [project.entry-points."embody.plugins"]
        hello = "embody_hello.plugin:register"

        [tool.setuptools]
        packages = ["embody_hello"]
        """,
    "embody_hello/__init__.py": "",
    "embody_hello/plugin.py": """
        from dataclasses import dataclass


        @dataclass
        class HelloConfig:
            greeting: str = "hello"


        class HelloPolicy:
            pass


        def say(args):
            print(f"hello from a plugin, {args.name}")
            return 0


        def register(api):
            api.command("hello", "say hello", lambda p: p.add_argument("--name", default="world"), say)
            api.command("plan hello", "say hello under a core group", None, lambda args: print("plan hello") or 0)
            api.policy("HelloPolicy", "embody_hello.plugin:HelloPolicy")
            api.study("hello", "embody_hello.plugin:HelloConfig", "embody hello --name study")
        """,
}

# Three ways to fail, one distribution: an import error, a register that raises after registering a command,
# a command name the core already has (registered after one of its own, which must not be applied either).
BROKEN = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "embody-broken"
        version = "0.0.2"

        [project.entry-points."embody.plugins"]
        noimport = "embody_broken.noimport:register"
        raises = "embody_broken.raises:register"
        clash = "embody_broken.clash:register"

        [tool.setuptools]
        packages = ["embody_broken"]
        """,
    "embody_broken/__init__.py": "",
    "embody_broken/noimport.py": """
        import embody_no_such_dependency  # noqa: F401


        def register(api):
            api.command("noimport", "never seen", None, lambda args: 0)
        """,
    "embody_broken/raises.py": """
        def register(api):
            api.command("ghost", "registered before the failure", None, lambda args: 0)
            raise RuntimeError("no licence for this robot\\nsecond line of detail")
        """,
    "embody_broken/clash.py": """
        def register(api):
            api.command("clash-ok", "a fresh name", None, lambda args: 0)
            api.command("train", "takes the core's name", None, lambda args: 0)
        """,
}


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Both packages installed into one folder, offline, by the venv's pip (its setuptools builds them)."""
    root = tmp_path_factory.mktemp("plugins")
    packages = [write_package(root / "hello", HELLO), write_package(root / "broken", BROKEN)]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(root / "site"),
            *map(str, packages),
        ],
        check=True,
        capture_output=True,
    )
    return root / "site"


def python(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    # cwd outside the repository: the embody the venv installs, plus what PYTHONPATH adds
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_an_installed_plugin_adds_commands_policies_and_studies(site, tmp_path):
    run = python(site, tmp_path, "-m", "embody.cli", "hello", "--name", "arm")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "hello from a plugin, arm"

    run = python(site, tmp_path, "-m", "embody.cli", "list")
    assert run.returncode == 0, run.stderr
    lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1] for line in run.stdout.splitlines() if ":" in line}
    assert "hello (embody-hello 0.0.1)" in lines["plugins"]
    assert "HelloPolicy" in lines["policies"] and "ActorCritic" in lines["policies"]  # the core's still there
    assert "hello (embody hello --name study)" in lines["studies"]
    # The failing plugins are named, each with its error's first line only.
    assert (
        "  plugin noimport failed to load: ModuleNotFoundError: No module named 'embody_no_such_dependency'"
        in run.stdout.splitlines()
    )
    assert "  plugin raises failed to load: RuntimeError: no licence for this robot" in run.stdout.splitlines()
    assert (
        "  plugin clash failed to load: ValueError: command 'train' is already registered by embody"
        in run.stdout.splitlines()
    )
    assert "second line" not in run.stdout
    assert "noimport (" not in lines["plugins"] and "raises (" not in lines["plugins"]


def test_failing_plugins_leave_the_core_and_their_names_alone(site, tmp_path):
    # One process for several command lines (each a fresh process would cost seconds of imports).
    script = """if True:
        from embody.cli import main
        print(main(["plan", "hello"]))  # a plugin's subcommand under a core group
        print(main(["train", "cartpole-swingup", "--steps", "0"]))  # the core's train, not the clash's
        print(main(["ghost"]))  # registered by a plugin before its register raised: not applied
        """
    run = python(site, tmp_path, "-c", script)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["plan", "hello", "0", "2", "2"]
    assert "--steps: expected an integer >= 1, got '0'" in run.stderr  # the core's range check
    assert "invalid choice: 'ghost'" in run.stderr


# ---------------------------------------------------------------- embody.plugins in-process


class FakeEntryPoint:
    """What ``plugins.load`` uses of an importlib.metadata entry point: name, load(), dist."""

    dist = None

    def __init__(self, name: str, register):
        self.name, self._register = name, register

    def load(self):
        return self._register


@pytest.fixture
def fresh(monkeypatch):
    """embody.plugins and the command registry as if nothing were loaded yet; restored afterwards."""
    monkeypatch.setattr(plugins, "_state", {"loaded": False})
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(plugins, "_failed", {})
    monkeypatch.setattr(plugins, "STUDIES", plugins._Studies())
    monkeypatch.setattr(commands, "COMMANDS", {"train": commands.Command("train", "core", run=lambda a: 0)})

    def install(*eps: FakeEntryPoint) -> None:
        monkeypatch.setattr(plugins.importlib.metadata, "entry_points", lambda group: list(eps))

    return install


def test_a_plugin_that_raises_registers_nothing(fresh):
    def good(api):
        api.command("good", "fine", None, lambda args: 0)
        api.study("good", "m:C", "embody good")

    def bad(api):
        api.command("bad", "applied only if register returns", None, lambda args: 0)
        api.study("bad", "m:C", "embody bad")
        raise ValueError("")  # an empty message still yields a readable line

    fresh(FakeEntryPoint("bad", bad), FakeEntryPoint("good", good), FakeEntryPoint("good", bad))
    assert plugins.loaded() == {"good": "?"}  # the second "good" (later on sys.path) is ignored
    assert plugins.failures() == {"bad": "ValueError"}
    assert set(commands.COMMANDS) == {"train", "good"} and [s.name for s in plugins.STUDIES.all()] == ["good"]


def test_a_plugin_whose_name_clashes_registers_nothing(fresh):
    def clash(api):
        api.command("clash-ok", "a fresh name", None, lambda args: 0)
        api.command("train", "the core's name", None, lambda args: 0)

    fresh(FakeEntryPoint("clash", clash))
    assert plugins.failures() == {"clash": "ValueError: command 'train' is already registered by embody"}
    assert commands.COMMANDS["train"].help == "core"
    assert "clash-ok" not in commands.COMMANDS
