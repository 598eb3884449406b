"""PDDL model: write -> parse round trip, and readable errors for malformed files."""

from __future__ import annotations

import pytest

from embody.planners.pddl import (
    Atom,
    PDDLError,
    domain_to_pddl,
    parse_domain,
    parse_problem,
    problem_to_pddl,
    read_domain,
    read_problem,
    to_up_problem,
    up_environment,
    write_domain,
    write_problem,
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
    with pytest.raises(PDDLError, match=r"bad_domain\.pddl: line 1, column 1: '\(' is never closed"):
        read_domain(bad)


def test_unknown_predicate_and_type_name_file_and_line(tmp_path, blocks):
    text = domain_to_pddl(blocks.domain())
    bad = tmp_path / "typo.pddl"
    bad.write_text(text.replace("(holding ?x))", "(holdin ?x))", 1))
    with pytest.raises(
        PDDLError,
        match=r"typo\.pddl: line 11, column 24: action put-down precondition \(holdin \?x\): "
        r"unknown predicate 'holdin'",
    ):
        read_domain(bad)
    bad.write_text(text.replace(":parameters (?x - block)", ":parameters (?x - blok)", 1))
    with pytest.raises(PDDLError, match=r"typo\.pddl: line 6, column 17: action pick-up: unknown type 'blok' of \?x"):
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
    with pytest.raises(
        PDDLError,
        match=r"neg\.pddl: line 11, column 24: action put-down precondition: "
        r"only positive atoms",
    ):
        read_domain(p)
    p.write_text(text.replace("(:types block)", "(:types block - thing thing)"))
    with pytest.raises(
        PDDLError,
        match=r"neg\.pddl: line 3, column 3: type hierarchies are not supported "
        r"\(block - thing\)",
    ):
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


# ---------------------------------------------------------------- the parser's own errors

DOMAIN = """(define (domain d)
  (:requirements :strips :typing)
  (:types box)
  (:predicates (p ?x - box) (q))
  (:action a
    :parameters (?x - box)
    :precondition (and (p ?x))
    :effect (and (q) (not (p ?x)))))
"""
PROBLEM = """(define (problem pr) (:domain d)
  (:objects b1 b2 - box)
  (:init (p b1))
  (:goal (and (q) (p b2))))
"""


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "(and (p ?x))",
            "(and (not (p ?x)))",
            r"line 7, column 24: action a precondition: only positive atoms are supported, got \(not \(p \?x\)\)",
        ),
        (
            "(and (p ?x))",
            "(and (or (p ?x) (q)))",
            r"line 7, column 24: action a precondition: .* got \(or \(p \?x\) \(q\)\)",
        ),
        ("(and (p ?x))", "(forall (?y - box) (p ?y))", r"line 7, column 19: action a precondition: .* got \(forall"),
        ("(and (p ?x))", "(exists (?y - box) (p ?y))", r"line 7, column 19: action a precondition: .* got \(exists"),
        ("(and (p ?x))", "(and (= ?x ?x))", r"line 7, column 24: action a precondition: .* got \(= \?x \?x\)"),
        (
            "(not (p ?x))",
            "(when (q) (not (p ?x)))",
            r"line 8, column 22: action a effect: only plain add/delete effects are supported, got \(when",
        ),
        ("(not (p ?x))", "(increase (total-cost) 1)", r"line 8, column 22: action a effect: .* got \(increase"),
        ("(not (p ?x))", "(not (not (p ?x)))", r"line 8, column 22: action a effect: .* got \(not \(not"),
        (
            "(:types box)",
            "(:types box - thing thing)",
            r"line 3, column 3: type hierarchies are not supported \(box - thing\)",
        ),
        (
            "(:types box)",
            "(:types box - (either a b) a b)",
            r"line 3, column 17: ':types': 'either' types are not supported",
        ),
        (
            "(q))\n",
            "(q))\n  (:functions (total-cost))\n",
            r"line 5, column 3: numeric fluents \(:functions\) are not supported",
        ),
        (
            "(q))\n",
            "(q))\n  (:constants c - box)\n",
            r"line 5, column 3: domain constants \(:constants\) are not supported",
        ),
        ("(q))\n", "(q))\n  (:derived (q) (p ?x))\n", r"line 5, column 3: derived predicates are not supported"),
        ("(:action a", "(:durative-action a", r"line 5, column 3: durative actions are not supported"),
        ("    :effect", "    :observe (q)\n    :effect", r"line 5, column 3: action a: unsupported :observe"),
        (
            "(and (p ?x))",
            "(and (p ?y))",
            r"line 7, column 24: action a precondition \(p \?y\): '\?y' is not a parameter",
        ),
        (
            "(and (p ?x))",
            "(and (p ?x ?x))",
            r"line 7, column 24: action a precondition \(p \?x \?x\): p takes 1 arguments, got 2",
        ),
        ("(and (p ?x))", "(and (r ?x))", r"line 7, column 24: action a precondition \(r \?x\): unknown predicate 'r'"),
        ("(?x - box)", "(?x - crate)", r"line 6, column 17: action a: unknown type 'crate' of \?x"),
        ("(?x - box)", "(?x ?x - box)", r"line 6, column 17: action a: repeated parameter name"),
        ("(q))\n", "(q) (q))\n", r"line 4, column 33: predicate q is declared twice"),
        ("(and (q) (not", "(and (q)) (not", r"line 8, column 37: unbalanced '\)'"),
        ("(define (domain d)", "(define (problem d)", r"no '\(define \(domain NAME\)' header"),
    ],
)
def test_domain_rejections_name_what_and_where(old, new, message):
    assert old in DOMAIN
    with pytest.raises(PDDLError, match=r"^d\.pddl: " + message):
        parse_domain(DOMAIN.replace(old, new, 1), "d.pddl")


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("(p b1)", "(p zz)", r"line 3, column 10: init \(p zz\): 'zz' is an unknown object"),
        ("(p b1)", "(p b1 b2)", r"line 3, column 10: init \(p b1 b2\): p takes 1 arguments, got 2"),
        ("(p b1)", "(= (cost) 1)", r"line 3, column 10: init: only positive atoms are supported, got \(= \(cost\) 1\)"),
        ("(p b2)", "(not (p b2))", r"line 4, column 19: goal: only positive atoms are supported, got \(not \(p b2\)\)"),
        ("(p b2)", "(or (p b2) (p b1))", r"line 4, column 19: goal: only positive atoms are supported, got \(or"),
        ("- box", "- crate", r"line 2, column 3: object b1 has unknown type 'crate'"),
        ("(:goal", "(:metric minimize (cost)) (:goal", r"line 4, column 3: unsupported section :metric"),
        ("(:domain d)", "(:domain e)", r"problem is for domain 'e', not 'd'"),
        ("(p b1))", "(p b1)", r"line 1, column 1: '\(' is never closed"),
    ],
)
def test_problem_rejections_name_what_and_where(old, new, message):
    assert old in PROBLEM
    with pytest.raises(PDDLError, match=r"^p\.pddl: " + message):
        parse_problem(DOMAIN, PROBLEM.replace(old, new, 1), "d.pddl", "p.pddl")


def test_parser_reads_the_typed_strips_fragment():
    # Untyped and object-typed parameters (the flat model's root type), nested 'and', comments,
    # mixed case: names lower-cased except the domain's and problem's own.
    text = """; a comment
    (define (domain Rooms) (:requirements :strips :typing)
      (:types room - object)
      (:predicates (AT ?x - object ?r - room) (door ?a ?b - room) (seen ?x))  ; ?x untyped: object
      (:action Go :parameters (?x - object ?a ?b - room)
        :precondition (and (at ?x ?a) (and (door ?a ?b)))
        :effect (and (at ?x ?b) (seen ?x) (not (at ?x ?a)))))"""
    dom = parse_domain(text)
    assert dom.name == "Rooms" and dom.types == ("room",)
    assert dom.predicate("at").params == (("?x", "object"), ("?r", "room"))
    assert dom.predicate("seen").params == (("?x", "object"),)
    op = dom.operator("go")
    assert op.params == (("?x", "object"), ("?a", "room"), ("?b", "room"))
    assert op.preconditions == {Atom("at", ("?x", "?a")), Atom("door", ("?a", "?b"))}
    assert op.add == {Atom("at", ("?x", "?b")), Atom("seen", ("?x",))} and op.delete == {Atom("at", ("?x", "?a"))}
    assert parse_domain(domain_to_pddl(dom)) == dom


def test_unified_planning_parser_is_not_used(tmp_path, blocks, monkeypatch):
    io = pytest.importorskip("unified_planning.io")

    def refuse(*args, **kwargs):
        raise AssertionError("unified-planning's PDDL reader was called")

    monkeypatch.setattr(io.PDDLReader, "__init__", refuse)
    dpath = write_domain(blocks.domain(), tmp_path / "domain.pddl")
    ppath = write_problem(blocks.reverse_tower(3), tmp_path / "p.pddl")
    dom, prob = read_domain(dpath), read_problem(dpath, ppath)
    up = to_up_problem(dom, prob)
    assert {a.name for a in up.actions} == {o.name for o in dom.operators}
    assert {o.name for o in up.all_objects} == set(prob.objects)


def test_to_up_problem_matches_unified_planning_reading_our_text(blocks):
    io = pytest.importorskip("unified_planning.io")
    dom, prob = blocks.domain(), blocks.reverse_tower(4)
    ours = to_up_problem(dom, prob)
    with up_environment() as env:
        theirs = io.PDDLReader(environment=env).parse_problem_string(domain_to_pddl(dom), problem_to_pddl(prob))

    def facts(p):
        return {str(f) for f, v in p.explicit_initial_values.items() if v.is_true()}

    def conjuncts(formulas):
        return frozenset(str(c) for f in formulas for c in (f.args if f.is_and() else [f]))

    def ops(p):
        return {
            (
                a.name,
                tuple(str(x.type) for x in a.parameters),
                conjuncts(a.preconditions),
                frozenset(map(str, a.effects)),
            )
            for a in p.actions
        }

    assert facts(ours) == facts(theirs) and ops(ours) == ops(theirs)
    assert conjuncts(ours.goals) == conjuncts(theirs.goals)
    # The domain part is built once and shared by the problems of one domain.
    again = to_up_problem(dom, blocks.reverse_tower(2))
    assert again.actions[0] is ours.actions[0] and again is not ours
