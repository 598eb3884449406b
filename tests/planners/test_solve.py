"""Planning with the learned blocksworld domain through unified-planning (Fast Downward, pyperplan)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from embody.planners import solve as solve_mod
from embody.planners.learn import learn_domain
from embody.planners.pddl import Atom
from embody.planners.solve import NoPlan, solve


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
    with pytest.raises(ValueError, match="unknown planner 'lama'; valid planners: fast-downward, fast-downward-opt, pyperplan"):
        solve(blocks.domain(), blocks.reverse_tower(2), planner="lama")


def test_falls_back_to_pyperplan_when_fast_downward_cannot_run(blocks, monkeypatch, caplog):
    real_run = solve_mod._run

    def broken_fd(planner, up_problem, timeout_s):
        if planner == "fast-downward":
            raise solve_mod.PlannerUnavailable("fast-downward could not run: OSError: Exec format error")
        return real_run(planner, up_problem, timeout_s)

    monkeypatch.setattr(solve_mod, "_run", broken_fd)
    with caplog.at_level(logging.WARNING, logger="embody.planners.solve"):
        plan = solve(blocks.domain(), blocks.reverse_tower(3))
    assert plan.planner == "pyperplan"
    assert "Exec format error; falling back to pyperplan" in caplog.text


def test_invalid_plan_is_rejected(blocks, monkeypatch):
    # A planner returning a wrong plan must not get through: swap the plan for a bogus one.
    real_run = solve_mod._run

    def bad_plan(planner, up_problem, timeout_s):
        plan = real_run(planner, up_problem, timeout_s)
        return type(plan)(plan.actions[1:])  # drop the first action: the rest is inapplicable

    monkeypatch.setattr(solve_mod, "_run", bad_plan)
    with pytest.raises(solve_mod.PlanningError, match="validator rejects"):
        solve(blocks.domain(), blocks.reverse_tower(3), planner="pyperplan")


def test_atom_reused_for_steps():
    assert str(Atom("stack", ("a", "b"))) == "(stack a b)"
