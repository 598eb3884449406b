"""Fixtures: blocksworld (the true domain, a tiny simulator that applies it, demonstration traces)
and an OpenAI-compatible chat server on loopback."""

from __future__ import annotations

import pytest

pytest.importorskip("unified_planning")  # every test here parses or plans through unified-planning

from embody.chat import API_KEY_ENV, LoopbackChatServer  # noqa: E402
from embody.planners.learn import Step, Trace  # noqa: E402
from embody.planners.pddl import Atom, Domain, Operator, Predicate, Problem  # noqa: E402

B = "block"


def A(*s: str) -> Atom:
    return Atom(s[0], tuple(s[1:]))


def blocksworld() -> Domain:
    x, y = ("?x", B), ("?y", B)
    f = frozenset
    return Domain(
        "blocks",
        (B,),
        (
            Predicate("clear", (x,)),
            Predicate("handempty"),
            Predicate("holding", (x,)),
            Predicate("on", (x, y)),
            Predicate("ontable", (x,)),
        ),
        (
            Operator(
                "pick-up",
                (x,),
                f({A("clear", "?x"), A("ontable", "?x"), A("handempty")}),
                f({A("holding", "?x")}),
                f({A("clear", "?x"), A("ontable", "?x"), A("handempty")}),
            ),
            Operator(
                "put-down",
                (x,),
                f({A("holding", "?x")}),
                f({A("clear", "?x"), A("ontable", "?x"), A("handempty")}),
                f({A("holding", "?x")}),
            ),
            Operator(
                "stack",
                (x, y),
                f({A("holding", "?x"), A("clear", "?y")}),
                f({A("on", "?x", "?y"), A("clear", "?x"), A("handempty")}),
                f({A("holding", "?x"), A("clear", "?y")}),
            ),
            Operator(
                "unstack",
                (x, y),
                f({A("on", "?x", "?y"), A("clear", "?x"), A("handempty")}),
                f({A("holding", "?x"), A("clear", "?y")}),
                f({A("on", "?x", "?y"), A("clear", "?x"), A("handempty")}),
            ),
        ),
    )


def ground(atoms: frozenset[Atom], binding: dict[str, str]) -> frozenset[Atom]:
    return frozenset(Atom(a.predicate, tuple(binding[x] for x in a.args)) for a in atoms)


def apply(domain: Domain, action: str, args: tuple[str, ...], state: frozenset[Atom]) -> frozenset[Atom]:
    """The simulator: one STRIPS step; refuses inapplicable actions so demos are always legal."""
    op = domain.operator(action)
    binding = {v: a for (v, _), a in zip(op.params, args)}
    missing = ground(op.preconditions, binding) - state
    assert not missing, f"{action}{args} not applicable: missing {missing}"
    return (state - ground(op.delete, binding)) | ground(op.add, binding)


def table_state(*blocks: str) -> frozenset[Atom]:
    return frozenset({A("handempty")} | {A("ontable", b) for b in blocks} | {A("clear", b) for b in blocks})


def make_trace(
    name: str, blocks: tuple[str, ...], actions: list[tuple[str, ...]], init: frozenset[Atom] | None = None
) -> Trace:
    state = table_state(*blocks) if init is None else init
    steps = []
    for action, *args in actions:
        after = apply(blocksworld(), action, tuple(args), state)
        steps.append(Step(action, tuple(args), state, after))
        state = after
    return Trace(name, {b: B for b in blocks}, steps)


def demo_traces() -> list[Trace]:
    # Stack/unstack both onto a block on the table and onto one on another block, so that
    # "ontable ?y" is not mistaken for a precondition.
    return [
        make_trace(
            "demo-1",
            ("a", "b", "c"),
            [
                ("pick-up", "a"),
                ("stack", "a", "b"),
                ("pick-up", "c"),
                ("stack", "c", "a"),
                ("unstack", "c", "a"),
                ("put-down", "c"),
                ("unstack", "a", "b"),
                ("put-down", "a"),
            ],
        ),
        make_trace(
            "demo-2",
            ("d", "e", "f"),
            [
                ("pick-up", "e"),
                ("stack", "e", "d"),
                ("pick-up", "f"),
                ("stack", "f", "e"),
                ("unstack", "f", "e"),
                ("put-down", "f"),
                ("unstack", "e", "d"),
                ("put-down", "e"),
            ],
        ),
    ]


def reverse_tower_problem(n: int = 4) -> Problem:
    """Blocks b1..bn stacked b1 on b2 on ... on bn; goal: the reverse tower."""
    blocks = [f"b{i}" for i in range(1, n + 1)]
    init = {A("handempty"), A("clear", blocks[0]), A("ontable", blocks[-1])}
    init |= {A("on", blocks[i], blocks[i + 1]) for i in range(n - 1)}
    goal = {A("on", blocks[i + 1], blocks[i]) for i in range(n - 1)}
    return Problem(f"reverse{n}", "blocks", {b: B for b in blocks}, frozenset(init), frozenset(goal))


@pytest.fixture
def bw() -> Domain:
    return blocksworld()


@pytest.fixture
def blocks():
    """The simulator helpers (conftest is not importable by name: several test dirs have one)."""
    import types

    return types.SimpleNamespace(
        A=A,
        domain=blocksworld,
        apply=apply,
        make_trace=make_trace,
        demo_traces=demo_traces,
        table_state=table_state,
        reverse_tower=reverse_tower_problem,
    )


# ---------------------------------------------------------------- an OpenAI-compatible stand-in


@pytest.fixture
def stub(monkeypatch):
    """``embody.chat.LoopbackChatServer``; unscripted requests get the empty goal ``(and)``."""
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with LoopbackChatServer(default="(and)") as server:
        yield server
