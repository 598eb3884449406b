"""The core without the methods (issue 17): the tracked tree minus papers/ and tests/papers/, installed
into a folder of its own, lists no plugins, imports every one of its modules, trains, and passes a smoke
subset of its own tests. A core module importing papers at import time fails here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# Fast core tests run from the copy; they cover the CLI, configs, checkpoints, envs and the planners' CLI.
SMOKE = [
    "embody/test_config.py",
    "embody/test_cli.py",
    "policies/test_checkpoint.py",
    "sims/test_vec_env.py",
    "planners/test_pddl.py",
    "planners/test_plan_cli.py",
    "planners/test_retrieve.py",
]

# The venv's own embody is an editable install whose import hook maps embody.papers onto this checkout
# even when embody itself comes from PYTHONPATH: take it out so the copy cannot reach papers/ at all.
# (sitecustomize runs after the venv's .pth files, which install the hook.)
GUARD = """import sys
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path_importer_cache.clear()
"""

# Loaded into the copy's pytest run (-p): names the embody the tests imported.
WHERE = """import embody
def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"embody imported from {embody.__file__}")
"""


@pytest.fixture(scope="module")
def core(tmp_path_factory) -> Path:
    """tmp/copy (the tracked core), tmp/site (it, installed), tmp/guard (sitecustomize); returns tmp."""
    tmp = tmp_path_factory.mktemp("core")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = [f for f in tracked.stdout.split("\0") if f and not f.startswith(("papers/", "tests/papers/"))]
    for f in files:
        if (ROOT / f).is_file():  # a tracked file someone is deleting right now: not part of the core
            (tmp / "copy" / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, tmp / "copy" / f)
    assert (tmp / "copy" / "setup.py").is_file() and not (tmp / "copy" / "papers").exists()
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
            str(tmp / "site"),
            str(tmp / "copy"),
        ],
        check=True,
        capture_output=True,
    )
    (tmp / "guard").mkdir()
    (tmp / "guard" / "sitecustomize.py").write_text(GUARD)
    (tmp / "guard" / "embody_where.py").write_text(WHERE)
    return tmp


def python(core: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # cwd: the copy's parent, never the copy (its embody/ and the build's egg-info would shadow the install)
    env = {**os.environ, "PYTHONPATH": f"{core / 'site'}{os.pathsep}{core / 'guard'}"}
    return subprocess.run([sys.executable, *argv], cwd=core, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_core_installs_alone_and_lists_no_plugins(core):
    run = python(
        core, "-c", "import embody, importlib.util; print(embody.__file__, importlib.util.find_spec('embody.papers'))"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(core / "site" / "embody" / "__init__.py"), "None"]
    assert "embody.plugins" not in (core / "site" / "embody-0.1.0.dist-info" / "entry_points.txt").read_text()

    run = python(core, "-m", "embody.cli", "list")
    assert run.returncode == 0, run.stderr
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in run.stdout.splitlines())}
    assert fields["plugins"] == "none" and fields["studies"] == "none", run.stdout
    assert "failed to load" not in run.stdout and "cartpole-swingup" in run.stdout


def test_every_core_module_imports_without_papers(core):
    script = """if True:
        import importlib, pkgutil, embody
        for m in pkgutil.walk_packages(embody.__path__, "embody.", onerror=lambda name: None):
            try:
                importlib.import_module(m.name)
            except Exception as e:  # an optional extra's absence is fine; a reach into papers is not
                if "papers" in str(e):
                    print(f"{m.name}: {type(e).__name__}: {e}")
        """
    run = python(core, "-c", script)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def test_the_core_trains_without_papers(core):
    out = core / "run"
    run = python(
        core,
        "-m",
        "embody.cli",
        "train",
        "cartpole-swingup",
        "--steps",
        "2048",
        "--envs",
        "4",
        "--out",
        str(out),
        "--set",
        "ppo.n_steps=64",
        "--set",
        "eval_episodes=1",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (out / "checkpoint" / "model.safetensors").stat().st_size > 0 and (out / "metrics.csv").is_file()


def test_core_tests_pass_without_papers(core):
    tests = [str(core / "copy" / "tests" / t) for t in SMOKE]
    run = python(core, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "embody_where", *tests, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert f"embody imported from {core / 'site' / 'embody' / '__init__.py'}" in run.stdout
    assert " passed" in run.stdout.splitlines()[-1] and " failed" not in run.stdout.splitlines()[-1]
