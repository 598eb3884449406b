"""Instruction → PDDL goal: the language plug-in of UniDomain-style planning.

Two ways to ground an instruction in the scene's objects and a domain's predicates:

* ``llm_goal``: ask an OpenAI-compatible chat endpoint (``embody.chat.ChatClient``, re-exported
  here) for the goal as PDDL, then parse and check every atom against the objects and
  predicates. Nothing the model writes reaches the planner unchecked.
* ``rule_goal``: templated English, no endpoint. Templates produce *concepts* named as in the
  tabletop reference domain (``on``, ``in-drawer``, ...); each concept is then mapped to the
  caller's predicates by exact name, else through the caller's ``resolve`` callback.

``goal_from_instruction`` picks the LLM when a client is given, else the rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from embody import exits
from embody.chat import API_KEY_ENV, ChatClient, ChatError  # noqa: F401 (re-exported)
from embody.chat import one_line as _one_line

from .pddl import Atom, PDDLError, Predicate, _check_atom

Resolve = Callable[[str, int], "str | None"]  # (concept, arity) -> predicate name, or None


class LanguageError(ValueError):
    """The instruction could not be turned into a valid goal, or the LLM endpoint failed."""

    exit_code = exits.INPUT


# ---------------------------------------------------------------- LLM goals


def _signature(p: Predicate) -> str:
    return "(" + " ".join([p.name] + [f"{v} - {t}" for v, t in p.params]) + ")"


def goal_messages(instruction: str, objects: dict[str, str], predicates: Sequence[Predicate]) -> list[dict]:
    """The chat messages ``llm_goal`` sends: objects with types, typed predicates, the instruction."""
    system = (
        "You translate a robot instruction into a PDDL goal. Use only the listed objects and "
        "predicates, with arguments of the listed types. Answer with ONLY the goal, in the form "
        "(and (predicate arg ...) ...), positive atoms only, no explanation."
    )
    user = "\n".join(
        [
            "Objects:",
            *(f"  {o} - {t}" for o, t in objects.items()),
            "Predicates:",
            *(f"  {_signature(p)}" for p in predicates),
            f"Instruction: {instruction}",
            "Goal:",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _groups(text: str) -> list[str]:
    """Every balanced ``( ... )`` in ``text``, nested ones included, in order of their start."""
    out = []
    for start, ch in enumerate(text):
        if ch != "(":
            continue
        depth = 0
        for end in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                out.append(text[start : end + 1])
                break
    return out


def _sexpr(text: str):
    """``(a (b c))`` → ``["a", ["b", "c"]]`` (``text`` is balanced)."""
    stack: list[list] = [[]]
    for tok in re.findall(r"\(|\)|[^\s()]+", text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0][0]


def _head(group: str) -> str:
    m = re.match(r"\(\s*([^\s()]+)", group)
    return m.group(1).lower() if m else ""


def _unparse(expr) -> str:
    return expr if isinstance(expr, str) else "(" + " ".join(_unparse(x) for x in expr) + ")"


def _goal_expr(reply: str, predicates: set[str]):
    """The goal in a reply: the first ``(and ...)``; else the flat ``(p a ...)`` groups that name
    a known predicate (prose may hold parentheses of its own), else the first flat group."""
    groups = _groups(reply)
    for g in groups:
        if _head(g) == "and":
            return _sexpr(g)
    if re.search(r"\(\s*and\b", reply, flags=re.IGNORECASE):  # a cut-off conjunction: its atoms are not all here
        raise LanguageError(f"unbalanced parentheses in the LLM goal: {_one_line(reply)!r}")
    flat = [g for g in groups if "(" not in g[1:]]
    known = [g for g in flat if _head(g) in predicates]
    if known or flat:
        return ["and", *(_sexpr(g) for g in known or flat[:1])]
    raise LanguageError(f"no PDDL goal '(and (p a ...) ...)' in the LLM reply: {_one_line(reply)!r}")


def _atoms(expr, reply: str) -> list[list[str]]:
    """Flatten ``and`` (nested too); anything else than a positive atom is an error."""
    if expr and isinstance(expr[0], str) and expr[0].lower() == "and":
        return [a for part in expr[1:] for a in _atoms(part, reply)]
    if (
        isinstance(expr, str)
        or not expr
        or not all(isinstance(x, str) for x in expr)
        or expr[0].lower() in ("not", "or", "forall", "exists", "imply", "when")
    ):
        raise LanguageError(
            f"LLM goal: only positive atoms are supported, got {_unparse(expr)}; reply: {_one_line(reply)!r}"
        )
    return [expr]


def parse_goal(reply: str, objects: dict[str, str], predicates: Sequence[Predicate]) -> frozenset[Atom]:
    """The checked goal in an LLM ``reply`` (code fences and prose around it are ignored).

    Names match case-insensitively (PDDL is) and come back spelled as in ``objects`` and
    ``predicates``. Raises ``LanguageError`` naming the first bad atom and the reply.
    """
    preds = {p.name.lower(): p for p in predicates}
    names = {o.lower(): o for o in objects}
    goal = set()
    for raw in _atoms(_goal_expr(reply, set(preds)), reply):
        p = preds.get(raw[0].lower())
        atom = Atom(p.name if p else raw[0], tuple(names.get(a.lower(), a) for a in raw[1:]))
        goal.add(_checked(atom, predicates, objects, f"LLM goal atom {atom}", f"; reply: {_one_line(reply)!r}"))
    if not goal:
        raise LanguageError(f"the LLM goal is empty; reply: {_one_line(reply)!r}")
    return frozenset(goal)


def _checked(
    atom: Atom, predicates: Sequence[Predicate], objects: dict[str, str], where: str, suffix: str = ""
) -> Atom:
    try:
        _check_atom(where, atom, {p.name: p for p in predicates}, objects, "is not an object of the scene")
    except PDDLError as e:
        raise LanguageError(f"{e}{suffix}") from None
    return atom


def llm_goal(
    instruction: str, objects: dict[str, str], predicates: Sequence[Predicate], client: ChatClient
) -> frozenset[Atom]:
    """Ask ``client`` for the goal of ``instruction`` and check it (``parse_goal``); an endpoint
    failure (``ChatError``) is raised as a ``LanguageError``, the one error of this module."""
    try:
        reply = client.chat(goal_messages(instruction, objects, predicates))
    except ChatError as e:
        raise LanguageError(str(e)) from e
    return parse_goal(reply, objects, predicates)


# ---------------------------------------------------------------- rule-based goals

# Concepts that have a type-specific predicate in the reference domain, tried before the generic one.
TYPED_CONCEPTS = {("holding", "peg"): "holding-peg", ("ontable", "peg"): "peg-on-table"}
# What "put X in Y" means, by the type of Y; other containers give the concept "in".
CONTAINERS = {"drawer": "in-drawer", "hole": "inserted"}
# A later clause that places an object again overrides the earlier place (and drawers likewise).
EXCLUSIVE = ({"on", "ontable", "holding", "in-drawer", "inserted", "in"}, {"drawer-open", "drawer-closed"})
FILLERS = {"please", "first", "now", "finally", "also", "next", "afterwards"}
TEMPLATES_HELP = (
    "put X on Y | put X on the table | put X in D | stack X on Y | "
    "build a tower X Y Z (top to bottom; add 'bottom to top' to reverse) | open/close D | "
    "insert P [into H] | push/bring X within reach | pick up/hold X | clear X | empty the hand; "
    "X may be a list ('b1 and b2'), 'the T' (the only object of type T), 'all Ts' or 'it' "
    "(the object named last before this clause); clauses joined by 'and', 'then', commas"
)

_O, _L = r"<\d+>", r"<\d+>(?:(?: ,)?(?: and)? <\d+>)*"
_PUT = r"put|place|set|move|lay|drop|leave|return|stack"
_TEMPLATES: list[tuple[str, str]] = [  # (regex on the normalized clause, kind)
    (rf"(?P<verb>put down|set down|{_PUT}) (?P<a>{_L})(?: down)? (?:on|onto) the table", "table"),
    (rf"(?P<verb>put down|set down) (?P<a>{_L})", "table"),
    (rf"(?P<verb>put|set|lay) (?P<a>{_L}) down", "table"),
    (
        rf"(?P<verb>build|make|form|stack) (?:a |the )?tower (?:of |with |from |using )?(?P<a>{_L})"
        r"(?P<order> (?:from )?(?:top to bottom|bottom to top|bottom up|top down))?",
        "tower",
    ),
    (rf"(?P<verb>{_PUT}) (?P<a>{_O}) (?:on top of|onto|on|upon|atop) (?P<b>{_O})", "on"),
    (rf"(?P<verb>{_PUT}|store|stow|insert|plug) (?P<a>{_L}) (?:into|inside|in) (?P<b>{_O})", "in"),
    (rf"(?P<verb>insert|plug in|plug) (?P<a>{_O})", "insert"),
    (rf"(?P<verb>push|bring|move|slide|pull|get) (?P<a>{_L}) (?:within|in|into) reach", "reach"),
    (rf"(?P<verb>make) (?P<a>{_L}) reachable", "reach"),
    (rf"(?P<verb>pick up|pick|hold|grasp|grab|take|lift) (?P<a>{_O})(?: up)?", "hold"),
    (rf"(?P<verb>open) (?P<a>{_L})", "open"),
    (rf"(?P<verb>close|shut) (?P<a>{_L})", "close"),
    (rf"(?P<verb>clear) (?:the top of )?(?P<a>{_L})", "clear"),
    (r"(?P<verb>empty|free) (?:the |your )?(?:hand|gripper)", "handempty"),
]
_COMPILED = [(re.compile(p + r"(?= |$)"), kind) for p, kind in _TEMPLATES]
_SEPARATOR = re.compile(r"(?:(?:,|;|and|then|after that)(?: |$))+")


class _Scene:
    """Object references of one instruction: names, 'the T', 'all Ts', 'it' → numbered slots."""

    def __init__(self, instruction: str, objects: dict[str, str]):
        self.instruction, self.objects = instruction, objects
        self.names = {o.lower(): o for o in objects}
        self.types = set(objects.values())
        self.refs: list[str] = []
        self.clause_start = 0  # refs[clause_start:] are named in the current clause

    def of_type(self, typ: str) -> list[str]:
        """The scene's objects of type ``typ``, sorted."""
        return sorted(o for o, t in self.objects.items() if t == typ)

    def the(self, typ: str, phrase: str) -> str:
        """The one object of type ``typ``; LanguageError when there is none or more than one."""
        found = self.of_type(typ)
        if not found:
            raise LanguageError(f"{phrase!r} in {self.instruction!r}: there is no {typ} in the scene")
        if len(found) > 1:
            raise LanguageError(
                f"{phrase!r} in {self.instruction!r} is ambiguous: there are {len(found)}: {', '.join(found)}; name one"
            )
        return found[0]

    def slot(self, name: str) -> str:
        """Record a reference to object ``name``; returns its ``<i>`` slot."""
        self.refs.append(name)
        return f"<{len(self.refs) - 1}>"

    def normalize(self) -> str:
        """Lower-case words with every object reference replaced by a ``<i>`` slot."""
        toks = [t for t in re.findall(r"[a-z0-9_\-]+|[,;]", self.instruction.lower()) if t not in FILLERS]
        out, i = [], 0
        while i < len(toks):
            i = self._reference(toks, i, out)
        return " ".join(out)

    def _reference(self, toks: list[str], i: int, out: list[str]) -> int:
        """Append the reference (or plain word) at ``toks[i]`` to ``out``; the next index."""
        t = toks[i]
        j = i + 1 if t in ("the", "a") else i
        typ = toks[j] if j < len(toks) and toks[j] in self.types else None
        k = j + 1 if typ else j
        if k < len(toks) and toks[k] in self.names and (typ is None or self.objects[self.names[toks[k]]] == typ):
            out.append(self.slot(self.names[toks[k]]))
            return k + 1
        if typ:  # "the drawer": the only one
            out.append(self.slot(self.the(typ, " ".join(toks[i:k]))))
            return k
        if t in ("all", "every", "each", "both"):
            j = i + 2 if i + 1 < len(toks) and toks[i + 1] == "the" else i + 1
            word = toks[j] if j < len(toks) else ""
            typ = word if word in self.types else word[:-1] if word.endswith("s") and word[:-1] in self.types else None
            if typ and self.of_type(typ):
                out.extend(self.slot(o) for o in self.of_type(typ))
                return j + 1
        if t == "it":  # the object named last outside this clause ("put b1 in it": not b1)
            earlier = [r for r in self.refs if r not in self.refs[self.clause_start :]]
            if earlier:
                out.append(self.slot(earlier[-1]))
                return i + 1
        if t in (",", ";", "and", "then"):
            self.clause_start = len(self.refs)
        out.append(t)
        return i + 1

    def text(self, clause: str) -> str:
        """A normalized clause with the object names back in place (for error messages)."""
        return re.sub(r"<(\d+)>", lambda m: self.refs[int(m.group(1))], clause)


def _slots(scene: _Scene, group: str | None) -> list[str]:
    return [scene.refs[int(i)] for i in re.findall(r"<(\d+)>", group or "")]


def _facts(kind: str, m: re.Match, scene: _Scene, clause: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (concept, args) facts one matched clause asks for."""
    groups = m.groupdict()
    a, b = _slots(scene, groups.get("a")), _slots(scene, groups.get("b"))
    if kind == "tower":
        if len(a) < 2:
            raise LanguageError(f"{scene.text(clause)!r}: a tower needs at least two objects")
        if (m.group("order") or "").strip().removeprefix("from ") in ("bottom to top", "bottom up"):
            a = a[::-1]
        return [("on", (x, y)) for x, y in zip(a, a[1:])]
    if kind == "in":
        concept = CONTAINERS.get(scene.objects[b[0]], "in")
        return [(concept, (x, b[0])) for x in a]
    if kind == "insert":
        return [("inserted", (a[0], scene.the("hole", f"insert {a[0]} (into which hole?)")))]
    simple = {
        "table": "ontable",
        "reach": "reachable",
        "hold": "holding",
        "open": "drawer-open",
        "close": "drawer-closed",
        "clear": "clear",
    }
    if kind == "on":
        return [("on", (a[0], b[0]))]
    if kind == "handempty":
        return [("handempty", ())]
    return [(simple[kind], (x,)) for x in a]


def _match(clause: str, prev_verb: str | None) -> tuple[re.Match, str, str] | None:
    """The first template matching at the start of ``clause``; a clause that starts with an
    object ("... and b2 on b3") borrows the previous clause's verb."""
    tries = [clause] + ([f"{prev_verb} {clause}"] if prev_verb and clause.startswith("<") else [])
    for text in tries:
        for regex, kind in _COMPILED:
            m = regex.match(text)
            if m:
                return m, kind, text
    return None


def _parse(instruction: str, scene: _Scene) -> list[tuple[str, tuple[str, ...]]]:
    rest, facts, verb = scene.normalize(), [], None
    while rest:
        sep = _SEPARATOR.match(rest)
        rest = rest[sep.end() :] if sep else rest
        found = _match(rest, verb)
        if found is None:
            raise LanguageError(
                f"cannot understand {scene.text(rest)!r} in {instruction!r}; supported: {TEMPLATES_HELP}"
            )
        m, kind, text = found
        facts += _facts(kind, m, scene, m.group(0))
        verb, rest = m.group("verb"), text[m.end() :].lstrip()
        if rest and not _SEPARATOR.match(rest):
            raise LanguageError(
                f"cannot understand {scene.text(rest)!r} after {scene.text(m.group(0))!r} in "
                f"{instruction!r}; supported: {TEMPLATES_HELP}"
            )
    if not facts:
        raise LanguageError(f"no goal in instruction {instruction!r}; supported: {TEMPLATES_HELP}")
    return facts


def _final(facts: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, tuple[str, ...]]]:
    """Later clauses win: re-placing an object (or re-opening a drawer) drops its earlier fact."""
    kept: list[tuple[str, tuple[str, ...]]] = []
    for concept, args in facts:
        group = next((g for g in EXCLUSIVE if concept in g), None)
        if group is not None:
            kept = [(c, a) for c, a in kept if not (c in group and a[:1] == args[:1])]
        kept.append((concept, args))
    return kept


def _predicate_for(
    concepts: tuple[str, ...], arity: int, predicates: Sequence[Predicate], resolve: Resolve | None, cache: dict
) -> str:
    """The caller's predicate for the first concept that has one: exact name, else ``resolve``."""
    preds = {p.name: p for p in predicates}
    for c in concepts:
        if c in preds and len(preds[c].params) == arity:
            return c
    for c in concepts if resolve is not None else ():
        if (c, arity) not in cache:
            cache[c, arity] = resolve(c, arity)
        name = cache[c, arity]
        if name is None:
            continue
        if name not in preds or len(preds[name].params) != arity:
            raise LanguageError(
                f"resolve({c!r}, {arity}) gave {name!r}, which is not a predicate with "
                f"{arity} argument(s) among: {', '.join(sorted(preds))}"
            )
        return name
    hint = "" if resolve is not None else "; pass resolve= to map concepts to your predicate names"
    raise LanguageError(
        f"no predicate for concept {concepts[0]!r} ({arity} argument(s)) among: "
        f"{', '.join(sorted(preds)) or '(none)'}{hint}"
    )


def rule_goal(
    instruction: str, objects: dict[str, str], predicates: Sequence[Predicate], resolve: Resolve | None = None
) -> frozenset[Atom]:
    """The goal of a templated English instruction (``TEMPLATES_HELP``), with no endpoint.

    Objects are named as in ``objects`` (any case), as 'the T' when exactly one object has type
    T, as 'all Ts', or as 'it' (the object named last). Towers are listed top to bottom. The
    goal is the state after the whole instruction: a later clause that places an object again
    ("pick up b1, then put it on b2") replaces the earlier fact. Concepts carry the tabletop
    reference domain's names (``on``, ``ontable``, ``in-drawer``, ``inserted``, ``reachable``,
    ``holding``, ``drawer-open`` ...; a peg's ``holding-peg``/``peg-on-table`` before the generic
    one); each maps to the predicate of that name and arity, else to ``resolve(concept, arity)``.
    Raises ``LanguageError`` for an instruction it cannot parse, an ambiguous reference, a
    concept without a predicate, or an atom whose argument types do not fit.
    """
    scene = _Scene(instruction, objects)
    cache: dict = {}
    goal = set()
    for concept, args in _final(_parse(instruction, scene)):
        types = [objects[a] for a in args]
        concepts = tuple(TYPED_CONCEPTS[concept, t] for t in types[:1] if (concept, t) in TYPED_CONCEPTS) + (concept,)
        atom = Atom(_predicate_for(concepts, len(args), predicates, resolve, cache), args)
        goal.add(_checked(atom, predicates, objects, f"instruction {instruction!r}: goal {atom}"))
    return frozenset(goal)


def goal_from_instruction(
    instruction: str,
    objects: dict[str, str],
    predicates: Sequence[Predicate],
    client: ChatClient | None = None,
    resolve: Resolve | None = None,
) -> frozenset[Atom]:
    """``llm_goal`` with ``client``, else ``rule_goal`` (``resolve`` is used by the rules only)."""
    if client is not None:
        return llm_goal(instruction, objects, predicates, client)
    return rule_goal(instruction, objects, predicates, resolve)
