"""Instruction → goal: LLM goals through a real loopback HTTP server (embody.chat), and the rule-based grounder."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from embody.chat import ChatError
from embody.planners.language import ChatClient, LanguageError, goal_from_instruction, llm_goal, rule_goal
from embody.planners.pddl import Atom, Predicate, read_domain

TABLETOP = Path(__file__).resolve().parents[2] / "assets" / "planning" / "tabletop.pddl"
OBJECTS = {"b1": "block", "b2": "block", "b3": "block", "d1": "drawer", "p1": "peg", "h1": "hole"}


def A(*s: str) -> Atom:
    return Atom(s[0], tuple(s[1:]))


@pytest.fixture(scope="module")
def preds():
    return read_domain(TABLETOP).predicates


def test_request_shape_and_goal(stub, preds):
    """The goal request (the transport itself: tests/embody/test_chat.py)."""
    stub.replies.append((200, stub.completion("(and (on b1 b2) (in-drawer b3 d1))"), 0))
    client = ChatClient(stub.url, "tiny-model", api_key="sk-test", timeout_s=5)
    assert llm_goal("stack b1 on b2, b3 in the drawer", OBJECTS, preds, client) == {
        A("on", "b1", "b2"),
        A("in-drawer", "b3", "d1"),
    }
    (req,) = stub.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "tiny-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert "b3 - block" in user and "d1 - drawer" in user
    assert "(in-drawer ?b - block ?d - drawer)" in user and "(handempty)" in user
    assert "stack b1 on b2, b3 in the drawer" in user


@pytest.mark.parametrize(
    "reply",
    [
        "Sure! The goal is:\n```pddl\n(and (ON b1 b2)\n     (drawer-closed d1))\n```\n(b1 must be clear first.)",
        "(:goal (and (on b1 b2) (drawer-closed d1)))",
        "Goal: (on b1 b2) and (drawer-closed d1)",  # no (and ...): the atoms naming known predicates
    ],
)
def test_reply_in_prose_or_code_fences(stub, preds, reply):
    stub.replies.append((200, stub.completion(reply), 0))
    goal = llm_goal("put b1 on b2 and close the drawer", OBJECTS, preds, ChatClient(stub.url, "m"))
    assert goal == {A("on", "b1", "b2"), A("drawer-closed", "d1")}


@pytest.mark.parametrize(
    "reply, match",
    [
        ("(and (on b1 b9))", r"\(on b1 b9\): 'b9' is not an object of the scene; reply: '\(and \(on b1 b9\)\)'"),
        ("(and (on b1 b2) (fly b1))", r"\(fly b1\): unknown predicate 'fly'; reply:"),
        ("(and (on b1))", r"\(on b1\): on takes 2 arguments, got 1; reply:"),
        ("(and (in-drawer d1 b1))", r"\(in-drawer d1 b1\): d1 is a drawer, in-drawer expects a block; reply:"),
        ("(and (not (on b1 b2)))", r"only positive atoms .* got \(not \(on b1 b2\)\)"),
        ("(and (on b1 b2) (on b2 b3)", r"unbalanced parentheses"),
        ("I cannot help with that.", r"no PDDL goal"),
    ],
)
def test_invalid_goal_is_named(stub, preds, reply, match):
    stub.replies.append((200, stub.completion(reply), 0))
    with pytest.raises(LanguageError, match=match):
        llm_goal("do it", OBJECTS, preds, ChatClient(stub.url, "m"))


@pytest.mark.parametrize(
    "replies, match",
    [
        ([(500, b'{"error": "model overloaded, try later"}', 0)], r"answered HTTP 500 .*model overloaded"),
        ([(200, b"<html>not json", 0)], "malformed JSON: '<html>not json'"),
        ([(200, b'{"choices": []}', 0)], r"without choices\[0\].message.content"),
        (["drop", "drop"], "closed the connection twice"),
        ([(200, b"{}", 30)], r"/v1/chat/completions did not answer within timeout_s=0.3 s"),
    ],
)
def test_endpoint_failures_are_language_errors(stub, preds, replies, match):
    """Callers of the planner catch one error (the CLI exits 2 on it); the chat error is its cause."""
    stub.replies += replies
    with pytest.raises(LanguageError, match=match) as caught:
        llm_goal("hold b1", OBJECTS, preds, ChatClient(stub.url, "m", timeout_s=0.3))
    assert isinstance(caught.value.__cause__, ChatError)


def test_connection_refused_names_the_url(preds):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LanguageError, match=rf"cannot reach LLM endpoint {url}/chat/completions: connection refused"):
        llm_goal("hold b1", OBJECTS, preds, ChatClient(url, "m", timeout_s=2))


def test_old_names_stay_importable():
    from embody import chat
    from embody.planners import language

    assert language.ChatClient is chat.ChatClient and language.API_KEY_ENV == chat.API_KEY_ENV == "EMBODY_LLM_API_KEY"


def test_goal_from_instruction_uses_the_client_when_given(stub, preds):
    stub.replies.append((200, stub.completion("(and (reachable b2))"), 0))
    client = ChatClient(stub.url, "m")
    assert goal_from_instruction("push b2 within reach", OBJECTS, preds, client) == {A("reachable", "b2")}
    assert goal_from_instruction("push b3 within reach", OBJECTS, preds) == {A("reachable", "b3")}
    assert len(stub.requests) == 1


# ---------------------------------------------------------------- rules

RULES = [
    ("put b1 in the drawer", {A("in-drawer", "b1", "d1")}),
    ("Put B1 into d1.", {A("in-drawer", "b1", "d1")}),
    ("stack b1 on b2", {A("on", "b1", "b2")}),
    ("put the block b3 on top of b1", {A("on", "b3", "b1")}),
    ("build a tower b1 b2 b3", {A("on", "b1", "b2"), A("on", "b2", "b3")}),
    ("build a tower of b1, b2 and b3 from bottom to top", {A("on", "b2", "b1"), A("on", "b3", "b2")}),
    ("put b1 on the table", {A("ontable", "b1")}),
    ("open the drawer", {A("drawer-open", "d1")}),
    ("close drawer d1", {A("drawer-closed", "d1")}),
    ("insert the peg p1 into h1", {A("inserted", "p1", "h1")}),
    ("insert p1", {A("inserted", "p1", "h1")}),
    ("push b1 within reach", {A("reachable", "b1")}),
    ("bring b2 within reach", {A("reachable", "b2")}),
    ("hold b1", {A("holding", "b1")}),
    ("pick up the peg", {A("holding-peg", "p1")}),
    ("put the peg on the table", {A("peg-on-table", "p1")}),
    ("stack b1 on b2 and b2 on b3", {A("on", "b1", "b2"), A("on", "b2", "b3")}),
    (
        "put b1 and b2 in the drawer, then push b3 within reach",
        {A("in-drawer", "b1", "d1"), A("in-drawer", "b2", "d1"), A("reachable", "b3")},
    ),
    ("put all blocks on the table", {A("ontable", "b1"), A("ontable", "b2"), A("ontable", "b3")}),
    # the goal is the final state: later clauses replace what they move again
    ("pick up b1 and put it on b2", {A("on", "b1", "b2")}),
    ("open the drawer, put b1 in it, then close it", {A("in-drawer", "b1", "d1"), A("drawer-closed", "d1")}),
    ("please put b3 on the table and empty the hand", {A("ontable", "b3"), A("handempty")}),
]


@pytest.mark.parametrize("instruction, goal", RULES, ids=[r[0] for r in RULES])
def test_rule_goal(preds, instruction, goal):
    assert rule_goal(instruction, OBJECTS, preds) == goal


@pytest.mark.parametrize(
    "instruction, match",
    [
        ("dance a little", r"cannot understand 'dance a little' .*supported: put X on Y"),
        ("put b1 on b2 quickly", r"cannot understand 'quickly' after 'put b1 on b2'"),
        ("", "no goal in instruction"),
        ("put b1 on the drawer", "d1 is a drawer, on expects a block"),
    ],
)
def test_rule_goal_rejects_what_it_cannot_parse(preds, instruction, match):
    with pytest.raises(LanguageError, match=match):
        rule_goal(instruction, OBJECTS, preds)


def test_rule_goal_ambiguous_references(preds):
    two = {**OBJECTS, "d2": "drawer", "h2": "hole"}
    with pytest.raises(LanguageError, match=r"'the drawer' .* is ambiguous: there are 2: d1, d2; name one"):
        rule_goal("put b1 in the drawer", two, preds)
    with pytest.raises(LanguageError, match=r"ambiguous: there are 2: h1, h2"):
        rule_goal("insert p1", two, preds)
    assert rule_goal("put b1 in d2", two, preds) == {A("in-drawer", "b1", "d2")}
    with pytest.raises(LanguageError, match=r"'insert p1 \(into which hole\?\)' in 'insert p1': there is no hole"):
        rule_goal("insert p1", {"p1": "peg"}, preds)


def test_rule_goal_maps_concepts_to_another_vocabulary():
    x, y = ("?x", "thing"), ("?y", "box")
    preds = [Predicate("inside", (x, y)), Predicate("atop", (x, ("?z", "thing"))), Predicate("grasped", (x,))]
    objects = {"cup": "thing", "plate": "thing", "bin": "box"}
    names = {"on": "atop", "holding": "grasped"}
    calls = []

    def resolve(concept: str, arity: int) -> str | None:
        calls.append((concept, arity))
        return names.get(concept, "inside" if concept == "in" else None)

    goal = rule_goal("put the cup on the plate and put the plate in the box", objects, preds, resolve)
    assert goal == {A("atop", "cup", "plate"), A("inside", "plate", "bin")}
    assert calls == [("on", 2), ("in", 2)]
    with pytest.raises(
        LanguageError,
        match=r"no predicate for concept 'reachable' \(1 argument\(s\)\) among: atop, "
        r"grasped, inside$",
    ):
        rule_goal("push the cup within reach", objects, preds, resolve)
    with pytest.raises(LanguageError, match="pass resolve="):
        rule_goal("hold the cup", objects, preds)
    with pytest.raises(LanguageError, match=r"resolve\('holding', 1\) gave 'hold'"):
        rule_goal("hold the cup", objects, preds, lambda c, n: "hold")
