"""Planning (Fast Downward's driver, pyperplan through unified-planning): learned domains, failures,
Fast Downward's exit codes and working directory, plan validation."""

from __future__ import annotations

import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from embody.planners import solve as solve_mod
from embody.planners.learn import learn_domain
from embody.planners.pddl import Atom
from embody.planners.solve import NoPlan, PlannerUnavailable, PlanningError, PlanTimeout, solve, validate


@pytest.mark.parametrize("planner", ["fast-downward", "pyperplan"])
def test_learned_domain_solves_new_problem(blocks, planner):
    domain, issues = learn_domain(blocks.demo_traces(), "blocks")
    assert issues == []
    problem = blocks.reverse_tower(4)  # objects and goal never seen in the demonstrations
    plan = solve(domain, problem, planner=planner, timeout_s=60)
    assert plan.planner == planner and len(plan) >= 6
    # Independent check: replay the plan in the simulator with the *true* domain.
    state = problem.init
    for step in plan:
        state = blocks.apply(blocks.domain(), step.predicate, step.args, state)
    assert problem.goal <= state
    assert plan.to_text().splitlines()[0].startswith("(unstack b1 b2")


@pytest.mark.parametrize("planner", ["fast-downward", "pyperplan"])
def test_unsolvable_raises_noplan(blocks, planner):
    domain = blocks.domain()
    # Without stack nothing can ever end up on another block.
    domain = replace(domain, operators=tuple(o for o in domain.operators if o.name != "stack"))
    problem = blocks.reverse_tower(3)
    with pytest.raises(NoPlan, match=f"{planner} .* no plan for problem 'reverse3'"):
        solve(domain, problem, planner=planner)


def test_unknown_planner_lists_valid_ones(blocks):
    with pytest.raises(
        ValueError, match="unknown planner 'lama'; valid planners: fast-downward, fast-downward-opt, pyperplan"
    ):
        solve(blocks.domain(), blocks.reverse_tower(2), planner="lama")


def test_falls_back_to_pyperplan_when_fast_downward_cannot_run(blocks, monkeypatch, caplog):
    real_run = solve_mod._run

    def broken_fd(planner, task, timeout_s):
        if planner == "fast-downward":
            raise solve_mod.PlannerUnavailable("fast-downward could not run: OSError: Exec format error")
        return real_run(planner, task, timeout_s)

    monkeypatch.setattr(solve_mod, "_run", broken_fd)
    with caplog.at_level(logging.WARNING, logger="embody.planners.solve"):
        plan = solve(blocks.domain(), blocks.reverse_tower(3))
    assert plan.planner == "pyperplan"
    assert "Exec format error; falling back to pyperplan" in caplog.text


def test_invalid_plan_is_rejected(blocks, monkeypatch):
    # A planner returning a wrong plan must not get through: swap the plan for a bogus one.
    real_run = solve_mod._run

    def bad_plan(planner, task, timeout_s):
        plan = real_run(planner, task, timeout_s)
        return type(plan)(plan.actions[1:])  # drop the first action: the rest is inapplicable

    monkeypatch.setattr(solve_mod, "_run", bad_plan)
    with pytest.raises(solve_mod.PlanningError, match="validator rejects"):
        solve(blocks.domain(), blocks.reverse_tower(3), planner="pyperplan")


def test_atom_reused_for_steps():
    assert str(Atom("stack", ("a", "b"))) == "(stack a b)"


def reaches_goal(blocks, problem, plan) -> bool:
    state = problem.init
    for step in plan:
        state = blocks.apply(blocks.domain(), step.predicate, step.args, state)
    return problem.goal <= state


def test_concurrent_solves_keep_their_files_apart(blocks, tmp_path, monkeypatch):
    # Fast Downward writes output.sas and the plan into its working directory: each solve must
    # have its own, or two solves from one directory read each other's translation.
    from unified_planning.environment import get_environment

    monkeypatch.chdir(tmp_path)
    problems = [blocks.reverse_tower(n) for n in (3, 4, 5, 6)]
    with ThreadPoolExecutor(len(problems)) as pool:
        plans = list(pool.map(lambda p: solve(blocks.domain(), p, timeout_s=60), problems))
    for problem, plan in zip(problems, plans):
        assert plan.planner == "fast-downward" and reaches_goal(blocks, problem, plan)
    assert list(tmp_path.iterdir()) == []  # nothing written where the caller stands
    assert get_environment().error_used_name  # up_environment() restored the global settings


FAKE_DRIVER = """import os, subprocess, sys, time
mode = os.environ["FAKE_FD_MODE"]
with open(os.environ["FAKE_FD_LOG"], "a") as log:
    log.write(repr((os.getcwd(), sys.argv[1:])) + "\\n")
if mode == "plan":
    with open("plan", "w") as f:
        f.write("(unstack b1 b2)\\n(put-down b1)\\n(pick-up b2)\\n(stack b2 b1)\\n; cost = 4 (unit cost)\\n")
elif mode == "bogus":
    with open("plan", "w") as f:
        f.write("(fly b1)\\n")
elif mode == "hang":  # a search process in the driver's group that outlives a plain kill of the driver
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.environ["FAKE_FD_LOG"] + ".child", "w") as f:
        f.write(str(child.pid))
    time.sleep(60)
"""


@pytest.fixture
def fake_driver(tmp_path, monkeypatch):
    """Point solve at a stand-in for Fast Downward's driver; returns (set_mode, calls)."""
    driver = tmp_path / "fake-fast-downward.py"
    driver.write_text(FAKE_DRIVER)
    log = tmp_path / "calls.log"
    monkeypatch.setattr(solve_mod, "fast_downward_files", lambda: [driver, driver])
    monkeypatch.setenv("FAKE_FD_LOG", str(log))

    def calls():
        return [eval(line) for line in log.read_text().splitlines()]  # noqa: S307 - our own repr()

    return lambda mode: monkeypatch.setenv("FAKE_FD_MODE", mode), calls, log


def test_driver_runs_in_a_private_directory_and_its_plan_is_validated(blocks, fake_driver, tmp_path, monkeypatch):
    set_mode, calls, _ = fake_driver
    set_mode("plan")
    monkeypatch.chdir(tmp_path)
    plan = solve(blocks.domain(), blocks.reverse_tower(2), timeout_s=7.5, fallback=False)
    assert plan.planner == "fast-downward"
    assert [s.predicate for s in plan] == ["unstack", "put-down", "pick-up", "stack"]
    ((cwd, argv),) = calls()
    assert Path(cwd) != tmp_path and not Path(cwd).exists()  # a temporary directory, removed afterwards
    assert argv == [
        "--plan-file",
        "plan",
        "--search-time-limit",
        "7s",
        "--log-level",
        "info",
        "--alias",
        "lama-first",
        "domain.pddl",
        "problem.pddl",
    ]
    with pytest.raises(PlanningError, match="validator rejects"):  # a wrong plan never gets through
        solve(blocks.domain(), blocks.reverse_tower(3), fallback=False)
    set_mode("bogus")
    with pytest.raises(
        PlanningError,
        match=r"fast-downward returned a plan that is not of domain blocks: "
        r"\(fly b1\): unknown action 'fly'",
    ):
        solve(blocks.domain(), blocks.reverse_tower(2), fallback=False)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_timeout_kills_the_driver_and_its_children(blocks, fake_driver):
    set_mode, _, log = fake_driver
    set_mode("hang")
    start = time.monotonic()
    with pytest.raises(PlanTimeout, match="fast-downward found no plan for problem 'reverse2' within 0.5 s"):
        solve(blocks.domain(), blocks.reverse_tower(2), timeout_s=0.5, fallback=False)
    # A child left alive would also hold the output pipe open: solve would wait for it.
    assert time.monotonic() - start < 10
    assert not _alive(int(Path(str(log) + ".child").read_text()))


@pytest.mark.parametrize(
    "code, error, message",
    [
        (None, PlanTimeout, r"^fast-downward found no plan for problem 'reverse3' within 5 s$"),
        (21, PlanTimeout, r"within 5 s"),
        (23, PlanTimeout, r"within 5 s"),
        (10, NoPlan, r"^fast-downward proved no plan for problem 'reverse3'$"),
        (11, NoPlan, r"^fast-downward proved no plan"),
        (12, NoPlan, r"^fast-downward found no plan for problem 'reverse3'$"),
        (22, PlannerUnavailable, r"^fast-downward ended with MEMOUT \(exit code 22\): log line 1 log line 2$"),
        (34, PlannerUnavailable, r"ended with UNSUPPORTED_PROBLEM \(exit code 34\)"),
        (31, PlannerUnavailable, r"ended with INTERNAL_ERROR \(exit code 31\): log line"),
        (2, PlannerUnavailable, r"ended with INTERNAL_ERROR \(exit code 2, no plan file\)"),  # not "no plan found"
    ],
)
def test_fast_downward_exit_codes(blocks, monkeypatch, code, error, message):
    seen = []

    def driver(cmd, cwd, timeout_s):
        seen.append((cmd, cwd, timeout_s))
        return code, "log line 1\n  log line 2\n"

    monkeypatch.setattr(solve_mod, "_drive", driver)
    with pytest.raises(error, match=message) as info:
        solve(blocks.domain(), blocks.reverse_tower(3), planner="fast-downward", timeout_s=5, fallback=False)
    assert type(info.value) is error
    ((cmd, cwd, timeout_s),) = seen
    assert cmd[-2:] == ["domain.pddl", "problem.pddl"] and timeout_s == 5 and Path(cwd) != Path(os.getcwd())


def test_optimal_search_and_fallback_only_when_fast_downward_cannot_run(blocks, monkeypatch):
    cmds = []

    def driver(cmd, cwd, timeout_s):
        cmds.append(cmd)
        return 35, "driver crashed"

    monkeypatch.setattr(solve_mod, "_drive", driver)
    plan = solve(blocks.domain(), blocks.reverse_tower(3), planner="fast-downward-opt")
    assert plan.planner == "pyperplan"
    assert cmds[0][-5:] == ["domain.pddl", "problem.pddl", "--search-options", "--search", "astar(lmcut())"]
    monkeypatch.setattr(solve_mod, "_drive", lambda cmd, cwd, timeout_s: (11, ""))
    with pytest.raises(NoPlan):  # unsolvable is an answer, not a reason to ask another planner
        solve(blocks.domain(), blocks.reverse_tower(3))


def test_validate_names_steps_outside_the_domain(blocks):
    dom, prob = blocks.domain(), blocks.reverse_tower(2)
    good = (
        Atom("unstack", ("b1", "b2")),
        Atom("put-down", ("b1",)),
        Atom("pick-up", ("b2",)),
        Atom("stack", ("b2", "b1")),
    )
    assert validate(dom, prob, good) is None
    assert validate(dom, prob, good[1:]).startswith("INAPPLICABLE_ACTION")
    assert validate(dom, prob, (Atom("fly", ("b1",)),)) == "not a plan of domain blocks: (fly b1): unknown action 'fly'"
    assert validate(dom, prob, (Atom("stack", ("b1",)),)) == (
        "not a plan of domain blocks: (stack b1): stack takes 2 arguments, got 1"
    )
    assert validate(dom, prob, (Atom("pick-up", ("zz",)),)) == (
        "not a plan of domain blocks: (pick-up zz): unknown object 'zz'"
    )
