"""A regular (non-editable) install maps the top-level folders onto embody.* and ships the assets."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_regular_install_has_the_namespace_and_assets(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheel_dir, ROOT],
        check=True,
        cwd=tmp_path,
        capture_output=True,
    )
    wheel = next(wheel_dir.glob("embody-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", target, wheel], check=True, capture_output=True)
    code = (
        "import embody.robots, embody.sims, embody.policies, embody.planners, embody.hardware; "
        "from embody.robots import get_robot; "
        "paths = [get_robot(n).mjcf for n in ('h1_2', 'cartpole')]; "
        "assert all(p.is_file() and str(p).startswith(sys.argv[1]) for p in paths), paths; print('ok')"
    )
    r = subprocess.run(
        [sys.executable, "-c", "import sys; " + code, str(target)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target), "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert r.stdout.strip() == "ok", r.stderr
    # the policies a method commits (papers/*/policies/RUN/...) ship too; found by path, no method imported
    shipped = [p.relative_to(ROOT) for p in ROOT.glob("papers/*/policies/*/**/*") if p.is_file()]
    assert shipped or not (ROOT / "papers").is_dir()  # a core-only tree ships none
    assert all((target / "embody" / p).is_file() for p in shipped), shipped
