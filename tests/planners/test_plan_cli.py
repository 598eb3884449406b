"""``embody plan``: each subcommand end to end, and one exit code per kind of failure. (learn, fuse and task on
UniDomain's demonstrations: tests/papers/test_unidomain_planning.py.)"""

from __future__ import annotations

import random

import pytest

from embody.assets import asset_path
from embody.cli import main
from embody.planners import solve as solve_mod
from embody.planners.pddl import Atom, Problem, problem_to_pddl, read_domain, write_domain
from embody.planners.solve import validate

REF = asset_path("planning/tabletop.pddl")
PROBLEM = """(define (problem t1) (:domain tabletop)
 (:objects b1 b2 b3 - block d1 - drawer)
 (:init (handempty) (ontable b1) (clear b1) (ontable b2) (clear b2) (reachable b2) (ontable b3) (clear b3)
        (reachable b3) (drawer-closed d1))
 (:goal (and (in-drawer b1 d1) (on b2 b3))))
"""


@pytest.fixture
def problem(tmp_path):
    path = tmp_path / "p.pddl"
    path.write_text(PROBLEM)
    return path


def plan_steps(text: str) -> tuple[Atom, ...]:
    lines = [ln.strip("()").split() for ln in text.splitlines() if ln.startswith("(")]
    return tuple(Atom(x[0], tuple(x[1:])) for x in lines)


def test_solve_writes_an_ipc_plan(problem, tmp_path):
    out = tmp_path / "plan.txt"
    assert main(["plan", "solve", "--domain", str(REF), "--problem", str(problem), "--out", str(out)]) == 0
    text = out.read_text()
    steps = plan_steps(text)
    assert text.splitlines()[-1] == f"; cost = {len(steps)} (unit cost)"
    from embody.planners.pddl import read_problem

    assert validate(read_domain(REF), read_problem(REF, problem), steps) is None


def test_malformed_pddl_names_file_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.pddl"
    bad.write_text(PROBLEM.replace("(clear b1)", "(clear b1"))
    assert main(["plan", "solve", "--domain", str(REF), "--problem", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.pddl: line 1, column 1: '(' is never closed" in err


def test_unsolvable_exits_3(problem, tmp_path, capsys):
    p = tmp_path / "u.pddl"
    p.write_text(PROBLEM.replace("(handempty) ", ""))  # nothing can ever be grasped
    assert main(["plan", "solve", "--domain", str(REF), "--problem", str(p)]) == 3
    assert "unsolvable: fast-downward" in capsys.readouterr().err


def test_timeout_exits_4(tmp_path, blocks, capsys):
    dom = tmp_path / "bw.pddl"
    write_domain(blocks.domain(), dom)
    names = [f"b{i}" for i in range(40)]
    order = names[:]
    random.Random(0).shuffle(order)
    init = {Atom("handempty"), Atom("ontable", (names[0],)), Atom("clear", (names[-1],))}
    init |= {Atom("on", (names[i], names[i - 1])) for i in range(1, 40)}
    goal = {Atom("on", (order[i], order[i - 1])) for i in range(1, 40)}
    prob = tmp_path / "big.pddl"
    prob.write_text(
        problem_to_pddl(Problem("big", "blocks", {b: "block" for b in names}, frozenset(init), frozenset(goal)))
    )
    code = main(
        [
            "plan",
            "solve",
            "--domain",
            str(dom),
            "--problem",
            str(prob),
            "--planner",
            "fast-downward-opt",
            "--timeout",
            "1",
        ]
    )
    assert code == 4
    assert "timeout: fast-downward-opt found no plan for problem 'big' within 1 s" in capsys.readouterr().err


def test_missing_planner_binary_exits_5_unless_falling_back(problem, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(solve_mod, "fast_downward_files", lambda: [tmp_path / "nowhere" / "downward"])
    assert main(["plan", "solve", "--domain", str(REF), "--problem", str(problem), "--planner", "fast-downward"]) == 5
    assert "planner not available: fast-downward could not run: missing" in capsys.readouterr().err
    # Without an explicit --planner, pyperplan takes over.
    assert main(["plan", "solve", "--domain", str(REF), "--problem", str(problem)]) == 0


def test_contradicting_domains_exit_2(tmp_path, capsys):
    ref = read_domain(REF)
    other = (
        REF.read_text()
        .replace("(domain tabletop)", "(domain other)")
        .replace(
            ":effect (and (ontable ?b) (clear ?b) (handempty) (not (holding ?b))))",
            ":effect (and (ontable ?b) (clear ?b) (not (handempty)) (not (holding ?b))))",
        )
    )
    (tmp_path / "other.pddl").write_text(other)
    write_domain(ref, tmp_path / "tabletop.pddl")
    code = main(
        [
            "plan",
            "fuse",
            str(tmp_path / "tabletop.pddl"),
            str(tmp_path / "other.pddl"),
            "--out",
            str(tmp_path / "m.pddl"),
            "--embedder",
            "lexical",
        ]
    )
    assert code == 2
    assert "operator put-down: other and tabletop contradict: (handempty)" in capsys.readouterr().err


def test_malformed_traces_exit_2(tmp_path, capsys):
    bad = tmp_path / "t.json"
    bad.write_text('{"traces": [{"objects": {"a": "block"}, "steps": [{"action": "pick"}]}]}')
    assert main(["plan", "learn", str(bad), "--out", str(tmp_path / "lib"), "--embedder", "lexical"]) == 2
    assert "t.json: trace 0 ('trace0') step 0: missing key(s) args, before, after" in capsys.readouterr().err
