"""A small typed STRIPS model of PDDL domains and problems, with a writer and a parser.

Supported fragment (what ``learn.py`` produces and ``solve.py`` plans with): ``:strips`` +
``:typing`` with a flat type list (every type a direct subtype of ``object``), Boolean
predicates, conjunctive *positive* preconditions, add/delete effects, and conjunctive positive
goals. Negative preconditions, type hierarchies, conditional effects, numeric fluents and the
like are rejected by the parser with a ``PDDLError`` rather than silently dropped (pyperplan
could not plan with most of them anyway).

Variables are strings starting with ``?``; ground atoms hold object names. The parser and the
writer are pure Python (PDDL is case-insensitive: names are lower-cased, except the domain's and
the problem's own); ``to_up_problem`` builds the unified-planning problem (needs the ``planning``
extra).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from embody import exits
from embody.extras import require
from embody.files import write_atomic


class PDDLError(ValueError):
    """Malformed or unsupported PDDL; the message names the file and, where known, the line."""

    exit_code = exits.INPUT


class Atom(NamedTuple):
    """``(predicate arg...)``; args are ``?vars`` (lifted) or object names (ground)."""

    predicate: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "(" + " ".join((self.predicate, *self.args)) + ")"


Params = tuple[tuple[str, str], ...]  # ((var, type), ...)


@dataclass(frozen=True)
class Predicate:
    """A predicate's name and its typed parameters ``((?var, type), ...)``."""

    name: str
    params: Params = ()


@dataclass(frozen=True)
class Operator:
    """A STRIPS action schema: typed parameters ``((?var, type), ...)``; preconditions, add and
    delete effects as atoms over those variables."""

    name: str
    params: Params
    preconditions: frozenset[Atom]
    add: frozenset[Atom]
    delete: frozenset[Atom]


@dataclass(frozen=True)
class Domain:
    """A typed STRIPS domain; ``types`` lists the declared types, each a direct subtype of ``object``."""

    name: str
    types: tuple[str, ...]
    predicates: tuple[Predicate, ...]
    operators: tuple[Operator, ...]

    def predicate(self, name: str) -> Predicate:
        """The predicate called ``name``; KeyError if there is none."""
        for p in self.predicates:
            if p.name == name:
                return p
        raise KeyError(name)

    def operator(self, name: str) -> Operator:
        """The operator called ``name``; KeyError if there is none."""
        for o in self.operators:
            if o.name == name:
                return o
        raise KeyError(name)


@dataclass(frozen=True)
class Problem:
    """Objects (name → type), the ground initial state (closed world) and the goal (ground atoms, a conjunction)."""

    name: str
    domain_name: str
    objects: dict[str, str] = field(hash=False)
    init: frozenset[Atom]
    goal: frozenset[Atom]


# ---------------------------------------------------------------- checks


def check_domain(domain: Domain) -> None:
    """Raise ``PDDLError`` if the domain is not self-consistent (unknown predicate, arity, type, var)."""
    types = set(domain.types) | {"object"}
    preds = {p.name: p for p in domain.predicates}
    for p in domain.predicates:
        for var, typ in p.params:
            if typ not in types:
                raise PDDLError(f"domain {domain.name}: predicate {p.name}: unknown type {typ!r} of {var}")
    for op in domain.operators:
        vtypes = dict(op.params)
        if len(vtypes) != len(op.params):
            raise PDDLError(f"domain {domain.name}: operator {op.name}: repeated parameter name")
        for part, atoms in (("precondition", op.preconditions), ("add", op.add), ("delete", op.delete)):
            for a in atoms:
                _check_atom(
                    f"domain {domain.name}: operator {op.name}: {part} {a}",
                    a,
                    preds,
                    vtypes,
                    "is not a parameter of the operator",
                )


def _check_atom(where: str, a: Atom, preds: dict, typed: dict[str, str], unknown: str) -> None:
    """``a`` names a known predicate with the right arity, its arguments are in ``typed`` (name → type)
    with the predicate's types; ``unknown`` says what an argument missing from ``typed`` is."""
    if a.predicate not in preds:
        raise PDDLError(f"{where}: unknown predicate {a.predicate!r}")
    sig = preds[a.predicate].params
    if len(sig) != len(a.args):
        raise PDDLError(f"{where}: {a.predicate} takes {len(sig)} arguments, got {len(a.args)}")
    for arg, (_, typ) in zip(a.args, sig):
        if arg not in typed:
            raise PDDLError(f"{where}: {arg!r} {unknown}")
        if typ != "object" and typed[arg] != typ:
            raise PDDLError(f"{where}: {arg} is a {typed[arg]}, {a.predicate} expects a {typ}")


def check_problem(domain: Domain, problem: Problem) -> None:
    """Raise ``PDDLError`` if the problem's atoms do not fit the domain's predicates and its objects."""
    preds = {p.name: p for p in domain.predicates}
    types = set(domain.types) | {"object"}
    for obj, typ in problem.objects.items():
        if typ not in types:
            raise PDDLError(f"problem {problem.name}: object {obj} has unknown type {typ!r}")
    for part, atoms in (("init", problem.init), ("goal", problem.goal)):
        for a in atoms:
            _check_atom(f"problem {problem.name}: {part} {a}", a, preds, problem.objects, "is an unknown object")


# ---------------------------------------------------------------- writer


def _params(params: Params) -> str:
    return " ".join(f"{v} - {t}" for v, t in params)


def _conj(atoms: frozenset[Atom], negated: frozenset[Atom] = frozenset()) -> str:
    # Sorted so that the same model always writes the same text (diffable, cacheable).
    parts = [str(a) for a in sorted(atoms)] + [f"(not {a})" for a in sorted(negated)]
    return "(and " + " ".join(parts) + ")" if parts else "(and)"


def domain_to_pddl(domain: Domain) -> str:
    """PDDL text of ``domain`` (checked first, so what is written can be parsed back)."""
    check_domain(domain)
    lines = [f"(define (domain {domain.name})", "  (:requirements :strips :typing)"]
    if domain.types:
        lines.append(f"  (:types {' '.join(domain.types)})")
    preds = " ".join(f"({p.name}{' ' + _params(p.params) if p.params else ''})" for p in domain.predicates)
    lines.append(f"  (:predicates {preds})")
    for op in domain.operators:
        lines += [
            f"  (:action {op.name}",
            f"    :parameters ({_params(op.params)})",
            f"    :precondition {_conj(op.preconditions)}",
            f"    :effect {_conj(op.add, op.delete)})",
        ]
    return "\n".join(lines) + ")\n"


def problem_to_pddl(problem: Problem) -> str:
    """PDDL text of ``problem``."""
    by_type: dict[str, list[str]] = {}
    for obj, typ in problem.objects.items():
        by_type.setdefault(typ, []).append(obj)
    objects = " ".join(f"{' '.join(objs)} - {t}" for t, objs in sorted(by_type.items()))
    init = " ".join(str(a) for a in sorted(problem.init))
    return (
        f"(define (problem {problem.name})\n  (:domain {problem.domain_name})\n"
        f"  (:objects {objects})\n  (:init {init})\n  (:goal {_conj(problem.goal)}))\n"
    )


# ---------------------------------------------------------------- unified-planning

_UP_LOCK = threading.RLock()


@contextmanager
def up_environment():
    """unified-planning's global environment, with two settings changed while the block runs.

    No credits banner on stdout, and objects may share a name with an action (legal PDDL, e.g. an
    object ``stack``; UP refuses by default). Scoped, not permanent, because the environment is
    global; and global, not private, because UP's grounder (used by its plan validator) builds
    actions in the global environment. Blocks hold a lock (reentrant): settings and warning
    filters are process-wide, so threads take turns.
    """
    env = require("unified_planning.environment", "planning").get_environment()
    with _UP_LOCK:
        saved = env.credits_stream, env.error_used_name
        env.credits_stream, env.error_used_name = None, False
        try:
            with warnings.catch_warnings():  # UP still warns about each name it now accepts
                warnings.filterwarnings("ignore", message=r"Name .* already defined", category=UserWarning)
                yield env
        finally:
            env.credits_stream, env.error_used_name = saved


class _UPDomain(NamedTuple):
    types: dict  # our type name -> UP type
    fluents: dict  # predicate name -> UP fluent
    actions: tuple  # UP actions, in the domain's order


@lru_cache(maxsize=32)
def _up_domain(domain: Domain) -> _UPDomain:
    """UP types, fluents and actions of ``domain``, built once per (equal) domain: problems share
    them, as nothing changes a UP action once built. (Hashing a domain takes microseconds.)"""
    check_domain(domain)
    model = require("unified_planning.model", "planning")
    with up_environment() as env:
        tm = env.type_manager
        # Every type is a direct subtype of ``object``; UP needs the root declared only where it is used.
        used = {t for p in domain.predicates for _, t in p.params} | {t for o in domain.operators for _, t in o.params}
        root = tm.UserType("object") if "object" in used else None
        types = {t: tm.UserType(t, root) for t in domain.types} | ({"object": root} if root else {})
        fluents = {
            p.name: model.Fluent(
                p.name, tm.BoolType(), [model.Parameter(v[1:], types[t], env) for v, t in p.params], env
            )
            for p in domain.predicates
        }
        actions = tuple(_up_action(op, types, fluents, env) for op in domain.operators)
    return _UPDomain(types, fluents, actions)


def _up_action(op: Operator, types: dict, fluents: dict, env):
    model = require("unified_planning.model", "planning")
    act = model.InstantaneousAction(op.name, OrderedDict((v[1:], types[t]) for v, t in op.params), env)
    params = {v: act.parameter(v[1:]) for v, _ in op.params}

    def exp(a: Atom):
        return env.expression_manager.FluentExp(fluents[a.predicate], [params[x] for x in a.args])

    for a in sorted(op.preconditions):
        act.add_precondition(exp(a))
    for atoms, value in ((op.add, True), (op.delete, False)):  # the order of our PDDL text
        for a in sorted(atoms):
            act.add_effect(exp(a), value)
    return act


def to_up_problem(domain: Domain, problem: Problem):
    """The unified-planning problem for ``domain`` + ``problem`` (both checked first), built through
    UP's Python API."""
    check_problem(domain, problem)
    model = require("unified_planning.model", "planning")
    up = _up_domain(domain)
    with up_environment() as env:
        em = env.expression_manager
        types = dict(up.types)
        if "object" not in types and "object" in problem.objects.values():  # untyped objects, unused by the domain
            types["object"] = env.type_manager.UserType("object")
        p = model.Problem(problem.name, env)
        for f in up.fluents.values():
            p.add_fluent(f, default_initial_value=False)
        p.add_actions(up.actions)
        objects = {o: model.Object(o, types[t], env) for o, t in problem.objects.items()}
        p.add_objects(objects.values())
        true = em.TRUE()
        for a in sorted(problem.init):
            p.set_initial_value(em.FluentExp(up.fluents[a.predicate], [objects[x] for x in a.args]), true)
        for a in sorted(problem.goal):
            p.add_goal(em.FluentExp(up.fluents[a.predicate], [objects[x] for x in a.args]))
    return p


# ---------------------------------------------------------------- parser


def read_text(path: str | Path) -> str:
    """The file's text; PDDLError naming the file when it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError as e:
        raise PDDLError(f"{path}: cannot read: {e.strerror or e}") from e


def _sexpr(text: str, source: str) -> list:
    """Nested lists of lower-cased tokens; each list starts with ``("@", line, col)`` of its
    opening parenthesis, for error messages."""
    text = re.sub(r";[^\n]*", "", text)
    stack: list[list] = [[]]
    line, col = 1, 0
    for m in re.finditer(r"\(|\)|[^\s()]+|\n", text):
        tok = m.group()
        if tok == "\n":
            line, col = line + 1, m.end()
            continue
        where = (line, m.start() - col + 1)
        if tok == "(":
            stack.append([("@", *where)])
        elif tok == ")":
            if len(stack) == 1:
                raise PDDLError(f"{source}: line {where[0]}, column {where[1]}: unbalanced ')'")
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok.lower())
    if len(stack) != 1:
        at = stack[-1][0]
        raise PDDLError(f"{source}: line {at[1]}, column {at[2]}: '(' is never closed")
    return stack[0]


def _where(lst: list) -> str:
    return f"line {lst[0][1]}, column {lst[0][2]}"


def _err(source: str, lst: list, msg: str) -> PDDLError:
    return PDDLError(f"{source}: {_where(lst)}: {msg}")


def _show(x, limit: int = 80) -> str:
    """PDDL text of a parsed expression, shortened, for messages."""

    def text(y) -> str:
        return "(" + " ".join(text(z) for z in y[1:]) + ")" if isinstance(y, list) else str(y)

    s = text(x)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _header_name(text: str, kind: str) -> str | None:
    m = re.search(rf"\(\s*{kind}\s+([^\s()]+)\s*\)", text, flags=re.IGNORECASE)
    return m.group(1) if m else None


def _raw_case(text: str, kind: str, name: str) -> str:
    """``name`` as the file spells it: the parser lower-cases, but domain and problem names keep their case."""
    raw = _header_name(text, kind)
    return raw if raw is not None and raw.lower() == name else name


# Heads that make a formula more than an atom: named in errors rather than read as unknown predicates.
# (Not the temporal "at"/"over": durative actions are rejected anyway, and "at" is a common predicate.)
_CONNECTIVES = frozenset(
    {
        "and",
        "not",
        "or",
        "imply",
        "forall",
        "exists",
        "when",
        "either",
        "=",
        "<",
        ">",
        "<=",
        ">=",
        "increase",
        "decrease",
        "assign",
        "scale-up",
        "scale-down",
        "preference",
    }
)
# Domain sections outside the typed STRIPS fragment, by what they declare.
_UNSUPPORTED = {
    ":functions": "numeric fluents (:functions)",
    ":constants": "domain constants (:constants)",
    ":durative-action": "durative actions",
    ":derived": "derived predicates",
    ":constraints": "constraints",
    ":process": "processes",
    ":event": "events",
}
_DOMAIN_SECTIONS = (":requirements", ":types", ":predicates", ":action")


def _typed(items: list, source: str, lst: list, what: str) -> list[tuple[str, str]]:
    """``a b - t c`` as [(a, t), (b, t), (c, object)]."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    it = iter(items)
    for tok in it:
        if isinstance(tok, list):
            raise _err(source, tok, f"{what}: unexpected {_show(tok)}")
        if tok != "-":
            pending.append(tok)
            continue
        typ = next(it, None)
        if isinstance(typ, list) and len(typ) > 1 and typ[1] == "either":
            raise _err(source, typ, f"{what}: 'either' types are not supported")
        if not isinstance(typ, str) or not pending:
            raise _err(source, lst, f"{what}: '-' must follow names and precede one type")
        out += [(x, typ) for x in pending]
        pending = []
    return out + [(x, "object") for x in pending]


def _var_list(items: list, source: str, lst: list, what: str, types: set[str]) -> Params:
    params = _typed(items, source, lst, what)
    for var, typ in params:
        if not var.startswith("?"):
            raise _err(source, lst, f"{what}: parameter {var!r} must start with '?'")
        if typ not in types:
            raise _err(source, lst, f"{what}: unknown type {typ!r} of {var}")
    if len({v for v, _ in params}) != len(params):
        raise _err(source, lst, f"{what}: repeated parameter name")
    return tuple(params)


def _literals(formula, source: str, parent: list, what: str, effect: bool = False) -> list[tuple[bool, Atom, list]]:
    """The conjuncts of ``formula`` (nested ``and`` flattened) as (positive, atom, its list);
    ``(not atom)`` only where ``effect``."""
    if not isinstance(formula, list):
        raise _err(source, parent, f"{what}: expected a formula, got {formula}")
    if len(formula) == 1:  # ()
        return []
    if formula[1] == "and":
        return [lit for f in formula[2:] for lit in _literals(f, source, formula, what, effect)]
    positive, x = True, formula
    if effect and len(x) == 3 and x[1] == "not" and isinstance(x[2], list):
        positive, x = False, x[2]
    if len(x) < 2 or not isinstance(x[1], str) or x[1] in _CONNECTIVES or any(isinstance(a, list) for a in x[2:]):
        allowed = "plain add/delete effects" if effect else "positive atoms"
        raise _err(source, formula, f"{what}: only {allowed} are supported, got {_show(formula)}")
    return [(positive, Atom(x[1], tuple(x[2:])), formula)]


def _types(sec: list, source: str) -> list[str]:
    out = []
    for t, parent in _typed(sec[2:], source, sec, "':types'"):
        if parent != "object":
            raise _err(source, sec, f"type hierarchies are not supported ({t} - {parent})")
        if t != "object":
            out.append(t)
    return out


def _predicate(p, source: str, sec: list, types: set[str]) -> Predicate:
    if not isinstance(p, list) or len(p) < 2 or not isinstance(p[1], str) or p[1] in _CONNECTIVES:
        raise _err(
            source, p if isinstance(p, list) else sec, f"':predicates' expects (name ?var - type ...), got {_show(p)}"
        )
    return Predicate(p[1], _var_list(p[2:], source, p, f"predicate {p[1]}", types))


def _action_fields(sec: list, source: str) -> tuple[str, dict]:
    if len(sec) < 3 or not isinstance(sec[2], str):
        raise _err(source, sec, "':action' needs a name")
    name, rest, fields = sec[2], sec[3:], {}
    for i in range(0, len(rest), 2):
        key = rest[i]
        if key not in (":parameters", ":precondition", ":effect"):
            raise _err(
                source, sec, f"action {name}: unsupported {_show(key)} (expected :parameters, :precondition, :effect)"
            )
        if i + 1 == len(rest):
            raise _err(source, sec, f"action {name}: {key} has no value")
        fields[key] = rest[i + 1]
    return name, fields


def _action(sec: list, source: str, types: set[str], preds: dict[str, Predicate]) -> Operator:
    name, fields = _action_fields(sec, source)
    plist = fields.get(":parameters", [sec[0]])
    if not isinstance(plist, list):
        raise _err(source, sec, f"action {name}: :parameters must be a list, got {plist}")
    params = _var_list(plist[1:], source, plist, f"action {name}", types)
    vtypes = dict(params)
    pre = _literals(fields.get(":precondition", [sec[0]]), source, sec, f"action {name} precondition")
    eff = _literals(fields.get(":effect", [sec[0]]), source, sec, f"action {name} effect", effect=True)
    for part, lits in (("precondition", pre), ("effect", eff)):
        for _, a, lst in lits:
            _check_atom(
                f"{source}: {_where(lst)}: action {name} {part} {a}",
                a,
                preds,
                vtypes,
                "is not a parameter of the operator",
            )
    return Operator(
        name,
        params,
        frozenset(a for _, a, _ in pre),
        frozenset(a for pos, a, _ in eff if pos),
        frozenset(a for pos, a, _ in eff if not pos),
    )


def _define(text: str, source: str, kind: str, header: str) -> tuple[str, list]:
    """``(define (KIND NAME) section...)``: NAME and the sections."""
    top = [x for x in _sexpr(text, source) if isinstance(x, list)]
    d = top[0] if len(top) == 1 else []
    if (
        len(d) < 3
        or d[1] != "define"
        or not isinstance(d[2], list)
        or len(d[2]) != 3
        or d[2][1] != kind
        or not isinstance(d[2][2], str)
    ):
        raise PDDLError(f"{source}: no '{header}' header")
    return d[2][2], d[3:]


def _domain_sections(sections: list, source: str) -> dict[str, list]:
    """Sections by head; anything outside the supported fragment is rejected by name."""
    out: dict[str, list] = {h: [] for h in _DOMAIN_SECTIONS}
    for sec in sections:
        if not isinstance(sec, list) or len(sec) < 2 or not isinstance(sec[1], str):
            raise PDDLError(
                f"{source}: {_where(sec) + ': ' if isinstance(sec, list) else ''}unexpected {_show(sec)} in the domain"
            )
        head = sec[1]
        if head in _UNSUPPORTED:
            raise _err(source, sec, f"{_UNSUPPORTED[head]} are not supported")
        if head not in out:
            raise _err(source, sec, f"unsupported section {head}")
        out[head].append(sec)
    return out


def _unique(items: list, key, source: str, lists: list, what: str) -> None:
    seen = set()
    for item, lst in zip(items, lists):
        if key(item) in seen:
            raise _err(source, lst, f"{what} {key(item)} is declared twice")
        seen.add(key(item))


def parse_domain(text: str, source: str = "<domain>") -> Domain:
    """Parse domain PDDL text; ``source`` names it in errors, which give its line and column."""
    name, sections = _define(text, source, "domain", "(define (domain NAME)")
    by = _domain_sections(sections, source)
    for sec in by[":requirements"]:
        for r in sec[2:]:
            if not isinstance(r, str) or not r.startswith(":"):
                raise _err(source, sec, f"':requirements': expected flags like :strips, got {_show(r)}")
    types = list(dict.fromkeys(t for sec in by[":types"] for t in _types(sec, source)))
    typeset = {*types, "object"}
    plists = [(p, sec) for sec in by[":predicates"] for p in sec[2:]]
    preds = [_predicate(p, source, sec, typeset) for p, sec in plists]
    _unique(preds, lambda p: p.name, source, [p for p, _ in plists], "predicate")
    pmap = {p.name: p for p in preds}
    ops = [_action(sec, source, typeset, pmap) for sec in by[":action"]]
    _unique(ops, lambda o: o.name, source, by[":action"], "action")
    domain = Domain(_raw_case(text, "domain", name), tuple(types), tuple(preds), tuple(ops))
    check_domain(domain)  # everything was checked above, with positions; this is the model's own rule
    return domain


def _problem_parts(text: str, source: str) -> tuple[Problem, dict[tuple[str, object], list]]:
    """The problem, and where each of its objects and init/goal atoms stands (its list)."""
    top = [x for x in _sexpr(text, source) if isinstance(x, list)]
    if len(top) != 1 or len(top[0]) < 3 or top[0][1] != "define":
        raise PDDLError(f"{source}: expected one '(define (problem NAME) ...)'")
    name = dname = None
    objects: dict[str, str] = {}
    init: list = []
    goal: list = []
    where: dict[tuple[str, object], list] = {}
    for sec in top[0][2:]:
        if not isinstance(sec, list) or len(sec) < 2:
            at = f"{_where(sec)}: " if isinstance(sec, list) else ""
            raise PDDLError(f"{source}: {at}unexpected {_show(sec)} in the problem")
        head, rest = sec[1], sec[2:]
        if head == "problem" and rest:
            name = rest[0]
        elif head == ":domain" and rest:
            dname = rest[0]
        elif head == ":objects":
            for obj, typ in _typed(rest, source, sec, "':objects'"):
                objects[obj] = typ
                where["object", obj] = sec
        elif head == ":init":
            init += _literals([sec[0], "and", *rest], source, sec, "init")
        elif head == ":goal":
            if len(rest) != 1 or not isinstance(rest[0], list):
                raise _err(source, sec, "':goal' must hold one formula")
            goal += _literals(rest[0], source, sec, "goal")
        elif head != ":requirements":
            raise _err(source, sec, f"unsupported section {head}")
    if not isinstance(name, str) or not isinstance(dname, str):
        raise PDDLError(f"{source}: no '(define (problem NAME) (:domain NAME)' header")
    for part, lits in (("init", init), ("goal", goal)):
        where.update(((part, a), lst) for _, a, lst in lits)
    problem = Problem(name, dname, objects, frozenset(a for _, a, _ in init), frozenset(a for _, a, _ in goal))
    return problem, where


def parse_problem_text(text: str, source: str = "<problem>") -> Problem:
    """Parse a typed STRIPS problem on its own (no domain needed, so names can be translated
    before it is checked against the domain it will be solved with)."""
    return _problem_parts(text, source)[0]


def parse_problem(
    domain_text: str, problem_text: str, domain_source: str = "<domain>", problem_source: str = "<problem>"
) -> Problem:
    """Parse problem PDDL text against its domain's text."""
    # The domain first, so that its errors are blamed on the domain file.
    domain = parse_domain(domain_text, domain_source)
    p, where = _problem_parts(problem_text, problem_source)
    dname = _raw_case(problem_text, ":domain", p.domain_name)
    if p.domain_name != domain.name.lower():
        raise PDDLError(f"{problem_source}: problem is for domain {dname!r}, not {domain.name!r}")
    types = set(domain.types) | {"object"}
    for obj, typ in p.objects.items():
        if typ not in types:
            raise _err(problem_source, where["object", obj], f"object {obj} has unknown type {typ!r}")
    preds = {q.name: q for q in domain.predicates}
    for (part, a), lst in where.items():
        if part != "object":
            _check_atom(f"{problem_source}: {_where(lst)}: {part} {a}", a, preds, p.objects, "is an unknown object")
    problem = Problem(_raw_case(problem_text, "problem", p.name), dname, p.objects, p.init, p.goal)
    check_problem(domain, problem)
    return problem


def read_domain(path: str | Path) -> Domain:
    """Parse a domain file."""
    return parse_domain(read_text(path), str(path))


def read_problem(domain_path: str | Path, problem_path: str | Path) -> Problem:
    """Parse a problem file against its domain file."""
    return parse_problem(read_text(domain_path), read_text(problem_path), str(domain_path), str(problem_path))


def write_domain(domain: Domain, path: str | Path) -> Path:
    """Write ``domain`` (atomically: an existing file is replaced whole or not at all)."""
    return write_atomic(path, domain_to_pddl(domain))


def write_problem(problem: Problem, path: str | Path) -> Path:
    """Write ``problem`` (atomically: an existing file is replaced whole or not at all)."""
    return write_atomic(path, problem_to_pddl(problem))
