"""Every registered task records, replays and validates (issue 18): `embody record` →
`embody replay` (kinematic, dynamic) → `embody dataset validate`, through the CLI, in process.

Tiny: one env, one 5-step episode, a 32x32 camera. A task is skipped only when the extra its
simulator needs is missing (the CLI's exit 2 naming the extra)."""

import json

import pytest

pytest.importorskip("pyarrow")

from embody import exits  # noqa: E402
from embody.cli import main  # noqa: E402
from embody.sims.tasks import TASKS  # noqa: E402

TINY = ["--set", "env.max_episode_steps=5", "--set", "env.sim.render_width=32", "--set", "env.sim.render_height=32"]


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("task", TASKS.names())
def test_task_records_replays_and_validates(task, tmp_path, capsys):
    out = tmp_path / task
    rc, stdout, err = run(capsys, "record", task, "--episodes", 1, "--envs", 1, "--out", out, *TINY)
    if rc == exits.INPUT and "extra" in err:
        pytest.skip(f"{task}: its simulator's extra is missing ({err.strip()})")
    assert rc == exits.OK, err
    summary = json.loads(stdout)
    assert summary["episodes"] == 1 and summary["frames"] == 5, summary

    rc, stdout, err = run(capsys, "replay", out)
    assert rc == exits.OK, err
    assert [r["max_state_error"] for r in json.loads(stdout)] == [0.0]  # kinematic replay is exact
    rc, stdout, err = run(capsys, "replay", out, "--mode", "dynamic")
    assert rc == exits.OK, err
    assert json.loads(stdout)[0]["frames"] == 5

    rc, stdout, err = run(capsys, "dataset", "validate", out)
    assert rc == exits.OK, stdout + err
