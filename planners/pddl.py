"""A small typed STRIPS model of PDDL domains and problems, with a writer and a parser.

Supported fragment (what ``learn.py`` produces and ``solve.py`` plans with): ``:strips`` +
``:typing`` with a flat type list (every type a direct subtype of ``object``), Boolean
predicates, conjunctive *positive* preconditions, add/delete effects, and conjunctive positive
goals. Negative preconditions, type hierarchies, conditional effects, numeric fluents and the
like are rejected by the parser with a ``PDDLError`` rather than silently dropped (pyperplan
could not plan with most of them anyway).

Variables are strings starting with ``?``; ground atoms hold object names. Parsing goes through
unified-planning's ``PDDLReader`` (needs the ``planning`` extra); the writer is pure Python.
"""

from __future__ import annotations

import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from embody.extras import require


class PDDLError(ValueError):
    """Malformed or unsupported PDDL; the message names the file and, where known, the line."""


class Atom(NamedTuple):
    """``(predicate arg...)``; args are ``?vars`` (lifted) or object names (ground)."""

    predicate: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "(" + " ".join((self.predicate, *self.args)) + ")"


Params = tuple[tuple[str, str], ...]  # ((var, type), ...)


@dataclass(frozen=True)
class Predicate:
    name: str
    params: Params = ()


@dataclass(frozen=True)
class Operator:
    name: str
    params: Params
    preconditions: frozenset[Atom]
    add: frozenset[Atom]
    delete: frozenset[Atom]


@dataclass(frozen=True)
class Domain:
    name: str
    types: tuple[str, ...]
    predicates: tuple[Predicate, ...]
    operators: tuple[Operator, ...]

    def predicate(self, name: str) -> Predicate:
        for p in self.predicates:
            if p.name == name:
                return p
        raise KeyError(name)

    def operator(self, name: str) -> Operator:
        for o in self.operators:
            if o.name == name:
                return o
        raise KeyError(name)


@dataclass(frozen=True)
class Problem:
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
                _check_atom(f"domain {domain.name}: operator {op.name}: {part} {a}", a, preds, vtypes,
                            "is not a parameter of the operator")


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


# ---------------------------------------------------------------- parser (via unified-planning)

@contextmanager
def up_environment():
    """unified-planning's global environment, with two settings changed while the block runs.

    No credits banner on stdout, and objects may share a name with an action (legal PDDL, e.g. an
    object ``stack``; UP refuses by default). Scoped, not permanent, because the environment is
    global; and global, not private, because UP's grounder (used by its plan validator) builds
    actions in the global environment. Not thread-safe.
    """
    env = require("unified_planning.environment", "planning").get_environment()
    saved = env.credits_stream, env.error_used_name
    env.credits_stream, env.error_used_name = None, False
    try:
        with warnings.catch_warnings():  # UP still warns about each name it now accepts
            warnings.filterwarnings("ignore", message=r"Name .* already defined", category=UserWarning)
            yield env
    finally:
        env.credits_stream, env.error_used_name = saved


def _header_name(text: str, kind: str) -> str | None:
    m = re.search(rf"\(\s*{kind}\s+([^\s()]+)\s*\)", text, flags=re.IGNORECASE)
    return m.group(1) if m else None


def _parse_error(source: str, e: Exception) -> PDDLError:
    """One readable message: file, line/column when the parser gave one, and what is wrong."""
    lineno = getattr(e, "lineno", None)
    col = getattr(e, "col", None)
    msg = " ".join(str(getattr(e, "msg", None) or e).split())  # UP messages span lines
    if type(e).__name__ == "ParseException" and lineno is not None:  # pyparsing: syntax error
        return PDDLError(f"{source}: line {lineno}, column {col}: {msg}")
    return PDDLError(f"{source}: {msg}")


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise PDDLError(f"{path}: cannot read: {e.strerror or e}") from e


def _parse_up(domain_text: str, problem_text: str | None, source: str):
    io = require("unified_planning.io", "planning")
    try:
        with up_environment() as env:
            reader = io.PDDLReader(environment=env)
            if problem_text is None:
                return reader.parse_problem_string(domain_text)
            return reader.parse_problem_string(domain_text, problem_text)
    except Exception as e:  # pyparsing, SyntaxError, UP errors: all mean "this file is wrong"
        raise _parse_error(source, e) from e


def _atom(fnode, source: str, what: str) -> Atom:
    if not fnode.is_fluent_exp():
        raise PDDLError(f"{source}: {what}: only positive atoms are supported, got {fnode}")
    return Atom(fnode.fluent().name, tuple(str(a) for a in fnode.args))


def _conjuncts(fnode) -> list:
    return list(fnode.args) if fnode.is_and() else [fnode]


def _type_name(t, source: str) -> str:
    if t.father is not None:
        raise PDDLError(f"{source}: type hierarchies are not supported ({t.name} - {t.father.name})")
    return t.name


def _domain_from_up(up_problem, name: str, source: str) -> Domain:
    types = tuple(_type_name(t, source) for t in up_problem.user_types)
    preds = []
    for f in up_problem.fluents:
        if not f.type.is_bool_type():
            raise PDDLError(f"{source}: function {f.name} is not supported (only Boolean predicates)")
        preds.append(Predicate(f.name, tuple((f"?{p.name}", p.type.name) for p in f.signature)))
    ops = []
    for a in up_problem.actions:
        where = f"action {a.name}"
        if not hasattr(a, "preconditions") or not hasattr(a, "effects"):
            raise PDDLError(f"{source}: {where}: only instantaneous actions are supported")
        pre = [_atom(c, source, f"{where} precondition") for p in a.preconditions for c in _conjuncts(p)]
        add, delete = [], []
        for eff in a.effects:
            if eff.is_conditional() or not eff.is_assignment():
                raise PDDLError(f"{source}: {where}: only plain add/delete effects are supported, got {eff}")
            atom = _atom(eff.fluent, source, f"{where} effect")
            if eff.value.is_true():
                add.append(atom)
            elif eff.value.is_false():
                delete.append(atom)
            else:
                raise PDDLError(f"{source}: {where}: unsupported effect {eff}")
        ops.append(
            Operator(
                a.name,
                tuple((f"?{p.name}", _type_name(p.type, source)) for p in a.parameters),
                frozenset(pre),
                frozenset(add),
                frozenset(delete),
            )
        )
    # UP names variables without "?"; atoms print them bare too, so re-prefix atom args that are params.
    ops = [_prefix_vars(o) for o in ops]
    return Domain(name, types, tuple(preds), tuple(ops))


def _prefix_vars(op: Operator) -> Operator:
    names = {v[1:] for v, _ in op.params}

    def fix(atoms: frozenset[Atom]) -> frozenset[Atom]:
        return frozenset(Atom(a.predicate, tuple(f"?{x}" if x in names else x for x in a.args)) for a in atoms)

    return Operator(op.name, op.params, fix(op.preconditions), fix(op.add), fix(op.delete))


def parse_domain(text: str, source: str = "<domain>") -> Domain:
    """Parse domain PDDL text; ``source`` names it in errors."""
    name = _header_name(text, "domain")
    if name is None:
        raise PDDLError(f"{source}: no '(define (domain NAME)' header")
    domain = _domain_from_up(_parse_up(text, None, source), name, source)
    check_domain(domain)
    return domain


def parse_problem(domain_text: str, problem_text: str, domain_source: str = "<domain>",
                  problem_source: str = "<problem>") -> Problem:
    """Parse problem PDDL text against its domain's text."""
    # Parse the domain alone first so that its errors are blamed on the domain file.
    domain = parse_domain(domain_text, domain_source)
    name = _header_name(problem_text, "problem")
    dname = _header_name(problem_text, ":domain")
    if name is None or dname is None:
        raise PDDLError(f"{problem_source}: no '(define (problem NAME) (:domain NAME)' header")
    if dname.lower() != domain.name.lower():
        raise PDDLError(f"{problem_source}: problem is for domain {dname!r}, not {domain.name!r}")
    up_problem = _parse_up(domain_text, problem_text, problem_source)
    objects = {o.name: _type_name(o.type, problem_source) for o in up_problem.all_objects}
    init = []
    for fl, val in up_problem.explicit_initial_values.items():
        if val.is_true():
            init.append(_atom(fl, problem_source, "init"))
    goal = [_atom(c, problem_source, "goal") for g in up_problem.goals for c in _conjuncts(g)]
    problem = Problem(name, dname, objects, frozenset(init), frozenset(goal))
    check_problem(domain, problem)
    return problem


def read_domain(path: str | Path) -> Domain:
    """Parse a domain file."""
    return parse_domain(read_text(path), str(path))


def read_problem(domain_path: str | Path, problem_path: str | Path) -> Problem:
    """Parse a problem file against its domain file."""
    return parse_problem(read_text(domain_path), read_text(problem_path), str(domain_path), str(problem_path))


def write_domain(domain: Domain, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(domain_to_pddl(domain))
    return path


def write_problem(problem: Problem, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(problem_to_pddl(problem))
    return path


def to_up_problem(domain: Domain, problem: Problem):
    """The unified-planning problem for ``domain`` + ``problem`` (via our own PDDL text, so the
    planners see exactly what ``domain_to_pddl``/``problem_to_pddl`` would write)."""
    check_problem(domain, problem)
    return _parse_up(domain_to_pddl(domain), problem_to_pddl(problem), f"problem {problem.name}")


# ---------------------------------------------------------------- problems without their domain


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


def _ground_atoms(lst: list, source: str, what: str) -> frozenset[Atom]:
    body = lst[1:]
    if body and body[0] == "and":
        body = body[1:]
    elif body:  # a single atom
        body = [lst]
    out = []
    for a in body:
        if not isinstance(a, list) or len(a) < 2 or any(isinstance(x, list) for x in a[1:]):
            at = _where(a) if isinstance(a, list) else _where(lst)
            raise PDDLError(f"{source}: {at}: {what}: only positive ground atoms are supported")
        out.append(Atom(a[1], tuple(a[2:])))
    return frozenset(out)


def parse_problem_text(text: str, source: str = "<problem>") -> Problem:
    """Parse a typed STRIPS problem on its own (no domain needed, so names can be translated
    before it is checked against the domain it will be solved with)."""
    top = [x for x in _sexpr(text, source) if isinstance(x, list)]
    if len(top) != 1 or len(top[0]) < 3 or top[0][1] != "define":
        raise PDDLError(f"{source}: expected one '(define (problem NAME) ...)'")
    name = dname = None
    objects: dict[str, str] = {}
    init = goal = frozenset()
    for sec in top[0][2:]:
        if not isinstance(sec, list) or len(sec) < 2:
            raise PDDLError(f"{source}: unexpected {sec!r} in the problem")
        head, rest = sec[1], sec[2:]
        if head == "problem" and rest:
            name = rest[0]
        elif head == ":domain" and rest:
            dname = rest[0]
        elif head == ":objects":
            pending: list[str] = []
            it = iter(rest)
            for tok in it:
                if tok == "-":
                    typ = next(it, None)
                    if not isinstance(typ, str):
                        raise PDDLError(f"{source}: {_where(sec)}: ':objects' has '-' without a type")
                    objects.update((o, typ) for o in pending)
                    pending = []
                elif isinstance(tok, str):
                    pending.append(tok)
            objects.update((o, "object") for o in pending)
        elif head == ":init":
            init = _ground_atoms([sec[0], "and", *rest], source, "init")
        elif head == ":goal":
            if len(rest) != 1 or not isinstance(rest[0], list):
                raise PDDLError(f"{source}: {_where(sec)}: ':goal' must hold one formula")
            goal = _ground_atoms(rest[0], source, "goal")
        elif head != ":requirements":
            raise PDDLError(f"{source}: {_where(sec)}: unsupported section {head}")
    if name is None or dname is None:
        raise PDDLError(f"{source}: no '(define (problem NAME) (:domain NAME)' header")
    return Problem(name, dname, objects, init, goal)
