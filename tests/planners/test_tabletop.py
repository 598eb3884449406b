"""The tabletop scene: setup realizes inits exactly, every skill does physically what the
reference domain predicts (plans from the solver, checked fact by fact), failures come back
as ok=False, impossible inits raise SceneError."""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco")

from embody.assets import asset_path  # noqa: E402
from embody.planners.execute import expected_effects  # noqa: E402
from embody.planners.pddl import Atom, Problem, read_domain  # noqa: E402
from embody.planners.solve import solve  # noqa: E402
from embody.planners.tabletop import SceneError, TabletopScene  # noqa: E402
from embody.planners.tabletop.facts import PREDICATES  # noqa: E402
from embody.planners.tabletop.skills import SKILLS  # noqa: E402


def A(text: str) -> Atom:
    name, *args = text.strip("()").split()
    return Atom(name, tuple(args))


def atoms(*texts: str) -> frozenset[Atom]:
    return frozenset(A(t) for t in texts)


def on_table(*blocks: str, far: tuple[str, ...] = ()) -> set[str]:
    return (
        {f"(ontable {b})" for b in blocks}
        | {f"(clear {b})" for b in blocks}
        | {f"(reachable {b})" for b in blocks if b not in far}
    )


@pytest.fixture(scope="module")
def domain():
    return read_domain(asset_path("planning/tabletop.pddl"))


@pytest.fixture(scope="module")
def scene():
    s = TabletopScene()
    yield s
    s.close()


def run_plan(scene, domain, objects, init, goal):
    """Set up, solve, run every step; each step must succeed and leave exactly the predicted facts."""
    scene.setup(objects, init)
    assert scene.facts() == init
    plan = solve(domain, Problem("t", "tabletop", objects, init, goal))
    facts = init
    for step in plan.steps:
        _, expected, _ = expected_effects(domain, step, facts)
        result = scene.run(step.predicate, step.args)
        assert result.ok, f"{step}: {result.message}"
        facts = scene.facts()
        assert facts == expected, f"{step}: missing {expected - facts}, extra {facts - expected}"
    assert goal <= facts
    return plan


def test_vocabulary_is_the_reference_domain(domain):
    assert PREDICATES == {p.name: tuple(t for _, t in p.params) for p in domain.predicates}
    assert {n: types for n, (_, types) in SKILLS.items()} == {
        o.name: tuple(t for _, t in o.params) for o in domain.operators
    }


def test_tower_of_three(scene, domain):
    objects = {"b1": "block", "b2": "block", "b3": "block"}
    init = atoms("(handempty)", *on_table("b1", "b2", "b3"))
    plan = run_plan(scene, domain, objects, init, atoms("(on b1 b2)", "(on b2 b3)"))
    assert [s.predicate for s in plan.steps] == ["pick-up", "stack", "pick-up", "stack"]


def test_unstack_and_put_down(scene, domain):
    objects = {"a": "block", "b": "block", "c": "block", "d": "block"}
    init = atoms(
        "(handempty)",
        "(ontable a)",
        "(on b a)",
        "(on c b)",
        "(on d c)",
        "(clear d)",
        "(reachable a)",
        "(reachable b)",
        "(reachable c)",
        "(reachable d)",
    )
    run_plan(scene, domain, objects, init, atoms("(ontable b)", "(ontable c)", "(on d a)"))


def test_push_far_block_then_pick_it(scene, domain):
    objects = {"b1": "block", "b2": "block"}
    init = atoms("(handempty)", *on_table("b1", "b2", far=("b1",)))
    plan = run_plan(scene, domain, objects, init, atoms("(on b1 b2)"))
    assert [s.predicate for s in plan.steps] == ["push", "pick-up", "stack"]


def test_put_block_in_drawer_and_close_it(scene, domain):
    objects = {"b1": "block", "d1": "drawer"}
    init = atoms("(handempty)", "(drawer-closed d1)", *on_table("b1"))
    plan = run_plan(scene, domain, objects, init, atoms("(in-drawer b1 d1)", "(drawer-closed d1)"))
    assert [s.predicate for s in plan.steps] == ["open-drawer", "pick-up", "put-in-drawer", "close-drawer"]


def test_take_block_from_closed_drawer(scene, domain):
    objects = {"b1": "block", "b2": "block", "d1": "drawer"}
    init = atoms("(handempty)", "(drawer-closed d1)", "(in-drawer b1 d1)", "(reachable b1)", *on_table("b2"))
    run_plan(scene, domain, objects, init, atoms("(on b1 b2)", "(drawer-closed d1)"))


def test_insert_pegs(scene, domain):
    objects = {"p1": "peg", "p2": "peg", "h1": "hole", "h2": "hole"}
    init = atoms("(handempty)", "(peg-on-table p1)", "(peg-on-table p2)", "(hole-free h1)", "(hole-free h2)")
    run_plan(scene, domain, objects, init, atoms("(inserted p1 h2)", "(inserted p2 h1)"))


SETUPS = {
    "held block over a far block, open drawer holding two": (
        {"a": "block", "b": "block", "c": "block", "d": "block", "dr": "drawer"},
        atoms(
            "(holding a)",
            "(reachable a)",
            *on_table("b", far=("b",)),
            "(drawer-open dr)",
            "(in-drawer c dr)",
            "(in-drawer d dr)",
            "(reachable c)",
            "(reachable d)",
        ),
    ),
    "held peg, the other inserted": (
        {"p1": "peg", "p2": "peg", "h1": "hole", "h2": "hole", "b1": "block"},
        atoms("(holding-peg p1)", "(inserted p2 h2)", "(hole-free h1)", *on_table("b1")),
    ),
    "far tower and a tower of three": (
        {"a": "block", "b": "block", "c": "block", "d": "block", "p": "peg", "h": "hole", "dr": "drawer"},
        atoms(
            "(handempty)",
            "(ontable a)",
            "(on b a)",
            "(clear b)",
            "(reachable b)",
            "(ontable c)",
            "(on d c)",
            "(clear d)",
            "(reachable c)",
            "(reachable d)",
            "(peg-on-table p)",
            "(hole-free h)",
            "(drawer-closed dr)",
        ),
    ),
    "four blocks in a closed drawer": (
        {"a": "block", "b": "block", "c": "block", "d": "block", "dr": "drawer"},
        atoms(
            "(handempty)",
            "(drawer-closed dr)",
            *(f"(in-drawer {x} dr)" for x in "abcd"),
            *(f"(reachable {x})" for x in "abcd"),
        ),
    ),
}


@pytest.mark.parametrize("name", list(SETUPS))
def test_setup_realizes_init_exactly(scene, name):
    objects, init = SETUPS[name]
    scene.setup(objects, init)
    assert scene.objects() == objects
    assert scene.facts() == init
    scene.world.step(250)  # and it stays that way: nothing is balanced on a knife edge
    assert scene.facts() == init


IMPOSSIBLE = [
    (
        {"b1": "block", "d1": "drawer"},
        ["(handempty)", "(drawer-open d1)", *on_table("b1"), "(in-drawer b1 d1)"],
        "block b1 needs exactly one place",
    ),
    ({"b1": "block"}, ["(handempty)", *on_table("b1"), "(flying b1)"], "unknown predicate 'flying'"),
    ({"b1": "block", "c": "cup"}, ["(handempty)", *on_table("b1")], "type 'cup' is not supported"),
    ({f"b{i}": "block" for i in range(5)}, ["(handempty)"], "5 objects of type block, the scene holds at most 4"),
    (
        {"b1": "block", "b2": "block"},
        ["(handempty)", *on_table("b1"), "(on b2 b1)", "(reachable b2)", "(clear b2)"],
        "(clear b1) must be false",
    ),
    ({"b1": "block"}, [*on_table("b1")], "(handempty) must be true"),
    (
        {"b1": "block", "d": "drawer"},
        ["(handempty)", "(in-drawer b1 d)", "(drawer-open d)"],
        "b1 is not reachable, but only a block on the table",
    ),
    ({"p": "peg", "h": "hole"}, ["(handempty)", "(peg-on-table p)", "(inserted p h)"], "peg p needs exactly one place"),
    (
        {"b1": "block", "b2": "block"},
        ["(handempty)", "(on b1 b2)", "(on b2 b1)", "(clear b1)", "(reachable b1)", "(reachable b2)"],
        "form a cycle",
    ),
    (
        {"b1": "block"},
        ["(handempty)", "(ontable b1)", "(clear b1)", "(reachable b1)", "(on b1)"],
        "on takes 2 arguments",
    ),
]


@pytest.mark.parametrize("objects, init, fragment", IMPOSSIBLE)
def test_impossible_init_raises(scene, objects, init, fragment):
    with pytest.raises(SceneError, match="cannot set up|unsupported objects") as e:
        scene.setup(objects, atoms(*init))
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_failed_skills_report_not_ok(scene):
    scene.setup(
        {"b1": "block", "b2": "block", "d": "drawer"},
        atoms("(handempty)", "(drawer-closed d)", *on_table("b1", "b2", far=("b1",))),
    )
    before = scene.facts()
    r = scene.run("pick-up", ("b1",))
    assert not r.ok and "out of reach" in r.message
    r = scene.run("put-in-drawer", ("b2", "d"))
    assert not r.ok and "does not hold b2" in r.message
    assert scene.run("pick-up", ("b2",)).ok
    r = scene.run("put-in-drawer", ("b2", "d"))
    assert not r.ok and "not open" in r.message
    r = scene.run("unstack", ("b1", "b2"))
    assert not r.ok and "not empty" in r.message
    assert scene.facts() == (before - atoms("(handempty)", "(ontable b2)", "(clear b2)")) | atoms("(holding b2)")
    with pytest.raises(SceneError, match="unknown action"):
        scene.run("fly", ("b1",))
    with pytest.raises(SceneError, match="expected arguments of types"):
        scene.run("stack", ("b2",))


def test_perturbations_change_the_facts(scene):
    scene.setup(
        {"b1": "block", "b2": "block", "d": "drawer"},
        atoms(
            "(handempty)",
            "(drawer-open d)",
            "(ontable b1)",
            "(on b2 b1)",
            "(clear b2)",
            "(reachable b1)",
            "(reachable b2)",
        ),
    )
    scene.perturb("knock", "b2")
    assert atoms("(ontable b2)", "(clear b1)", "(clear b2)") <= scene.facts()
    scene.perturb("far", "b2")
    assert A("(reachable b2)") not in scene.facts()
    scene.perturb("close-drawer", "d")
    assert A("(drawer-closed d)") in scene.facts()
    with pytest.raises(SceneError, match="the hand holds nothing"):
        scene.perturb("drop", "b1")


def test_collision_stops_the_arm(scene):
    scene.setup({"p": "peg", "h": "hole"}, atoms("(handempty)", "(peg-on-table p)", "(hole-free h)"))
    board_top = scene.world.hole_pos["h"] + (0.035, 0, 0)  # beside the hole, on the board
    scene.arm.fingers(0.0)
    assert scene.arm.goto(board_top + (0, 0, 0.05)) is None
    message = scene.arm.move(board_top - (0, 0, 0.05))
    assert message and "blocked (collision)" in message
    assert scene.arm.pos[2] > board_top[2] - 0.01  # stopped on the board, not through it
