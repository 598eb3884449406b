"""``embody plan demo``: plan, execute in the tabletop scene, detect an injected failure, re-plan.
(With a library learned from UniDomain's demonstrations: tests/papers/test_unidomain_planning.py.)"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("unified_planning")

from embody.cli import main  # noqa: E402


def test_default_demo_recovers_from_a_drop(tmp_path, capsys):
    # The default plan picks b1 up as its 7th step (after the peg, the tower and the drawer):
    # dropping it there must be caught before put-in-drawer and re-planned.
    assert main(["plan", "demo", "--no-video", "--perturb", "7:drop:b1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["goal_reached"] and report["replans"] >= 1
    failed = [s for s in report["steps"] if not s["ok"]]
    assert failed and failed[0]["missing"] == ["(holding b1)"]
    assert (tmp_path / "plan.txt").read_text().splitlines()[-1].startswith("; cost = ")


def test_bad_perturbation_and_problem_exit_2(tmp_path, capsys):
    assert main(["plan", "demo", "--no-video", "--perturb", "drop", "--out", str(tmp_path)]) == 2
    assert "expected STEP:KIND:OBJ" in capsys.readouterr().err
    bad = tmp_path / "p.pddl"
    bad.write_text("(define (problem x) (:domain tabletop) (:objects b1 - block) (:init (on b1 b1)) (:goal (and)))")
    assert main(["plan", "demo", "--no-video", "--problem", str(bad), "--out", str(tmp_path)]) == 2
    assert "embody plan demo: error:" in capsys.readouterr().err
