"""PDDL model: write -> parse round trip, and readable errors for malformed files."""

from __future__ import annotations

import pytest

from embody.planners.pddl import (
    PDDLError, domain_to_pddl, problem_to_pddl, read_domain, read_problem, write_domain, write_problem,
)


def test_round_trip(tmp_path, blocks):
    dom, prob = blocks.domain(), blocks.reverse_tower(3)
    dpath = write_domain(dom, tmp_path / "domain.pddl")
    ppath = write_problem(prob, tmp_path / "p1.pddl")
    assert read_domain(dpath) == dom
    assert read_problem(dpath, ppath) == prob
    # Deterministic text: writing what was parsed gives the same file.
    assert domain_to_pddl(read_domain(dpath)) == dpath.read_text()
    assert problem_to_pddl(read_problem(dpath, ppath)) == ppath.read_text()


def test_syntax_error_names_file_and_line(tmp_path, blocks):
    bad = tmp_path / "bad_domain.pddl"
    bad.write_text(domain_to_pddl(blocks.domain()).rstrip()[:-1])  # drop the final ')'
    with pytest.raises(PDDLError, match=r"bad_domain\.pddl: line \d+, column \d+: Expected '\)'"):
        read_domain(bad)


def test_unknown_predicate_and_type_name_file_and_line(tmp_path, blocks):
    text = domain_to_pddl(blocks.domain())
    bad = tmp_path / "typo.pddl"
    bad.write_text(text.replace("(holding ?x))", "(holdin ?x))", 1))
    with pytest.raises(PDDLError, match=r"typo\.pddl: .*holdin.*line: \d+"):
        read_domain(bad)
    bad.write_text(text.replace(":parameters (?x - block)", ":parameters (?x - blok)", 1))
    with pytest.raises(PDDLError, match=r"typo\.pddl: .*type: blok.*line: \d+"):
        read_domain(bad)


def test_problem_errors_blame_problem_file(tmp_path, blocks):
    dpath = write_domain(blocks.domain(), tmp_path / "domain.pddl")
    p = tmp_path / "prob.pddl"
    p.write_text(problem_to_pddl(blocks.reverse_tower(3)).replace("(on b1 b2)", "(on b1 zz)"))
    with pytest.raises(PDDLError, match=r"prob\.pddl: .*zz"):
        read_problem(dpath, p)
    p.write_text(problem_to_pddl(blocks.reverse_tower(3)).replace("(:domain blocks)", "(:domain other)"))
    with pytest.raises(PDDLError, match=r"prob\.pddl: problem is for domain 'other'"):
        read_problem(dpath, p)
    with pytest.raises(PDDLError, match=r"missing\.pddl: cannot read"):
        read_problem(dpath, tmp_path / "missing.pddl")


def test_unsupported_features_rejected(tmp_path, blocks):
    text = domain_to_pddl(blocks.domain())
    p = tmp_path / "neg.pddl"
    p.write_text(text.replace("(and (holding ?x))", "(and (not (handempty)))", 1))
    with pytest.raises(PDDLError, match=r"neg\.pddl: action put-down precondition: only positive atoms"):
        read_domain(p)
    p.write_text(text.replace("(:types block)", "(:types block - thing thing)"))
    with pytest.raises(PDDLError, match=r"neg\.pddl: type hierarchies are not supported"):
        read_domain(p)


def test_object_may_share_an_action_name(tmp_path, blocks):
    # Legal PDDL that unified-planning refuses by default; the parser allows it.
    prob = blocks.reverse_tower(2)
    objects = {"stack": "block", "b2": "block"}
    rename = {"b1": "stack"}
    atoms = lambda s: frozenset(type(a)(a.predicate, tuple(rename.get(x, x) for x in a.args)) for a in s)  # noqa: E731
    prob = type(prob)(prob.name, prob.domain_name, objects, atoms(prob.init), atoms(prob.goal))
    dpath = write_domain(blocks.domain(), tmp_path / "domain.pddl")
    assert read_problem(dpath, write_problem(prob, tmp_path / "p.pddl")) == prob
