"""Learn a STRIPS domain from symbolic demonstration traces (the "atomic domain" step of UniDomain).

A trace is what a perception/annotation pipeline reports for one demonstration: the objects and
their types, and for each step the action, its arguments and the ground facts true before and
after it. Per action, ``learn_domain`` lifts the arguments to typed variables and induces

* preconditions: lifted facts true before the action, mentioning only its arguments, that hold
  in (at least ``min_support`` of) all its occurrences -- with the default 1.0, the intersection;
* add / delete effects: lifted facts that became true / false, kept when they happen in (at least
  ``min_support`` of) the occurrences.

Anything noisy or contradictory is *reported*, never merged silently: an argument whose type
differs from the action's other occurrences (the step is then ignored), occurrences whose
effects differ from the learned ones (and effects that one demonstration adds and another
deletes), effects on objects that are not arguments, states that do not chain from one step to
the next, and predicates used with inconsistent types. ``strict=True`` raises on any issue.

Trace file format (JSON; ``load_traces`` / ``save_traces``)::

    {"traces": [                                  # or just the list itself
      {"name": "demo-1",                          # optional; defaults to "trace<i>"
       "objects": {"a": "block", "b": "block"},   # object -> type, for every object in the trace
       "steps": [
         {"action": "unstack", "args": ["a", "b"],
          "before": [["on", "a", "b"], ["clear", "a"], ["handempty"]],   # [predicate, *objects]
          "after":  [["holding", "a"], ["clear", "b"]]},
         ...]},
      ...]}

Facts are complete states (closed world): a fact absent from ``before`` was false before.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embody import exits
from embody.files import write_atomic

from .pddl import Atom, Domain, Operator, Predicate, check_domain


class TraceFormatError(ValueError):
    """A malformed trace file; the message names the file and the trace/step."""

    exit_code = exits.INPUT


class LearningError(ValueError):
    """Raised by ``learn_domain(strict=True)`` when the traces have any issue."""

    exit_code = exits.INPUT


@dataclass(frozen=True)
class Step:
    """One demonstrated step: the action, its object arguments and the complete ground states before and after it."""

    action: str
    args: tuple[str, ...]
    before: frozenset[Atom]
    after: frozenset[Atom]


@dataclass
class Trace:
    """One demonstration: its objects (name → type) and its steps in order."""

    name: str
    objects: dict[str, str]  # object -> type
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Issue:
    """One problem found in the traces; ``step`` is the index in the trace's ``steps`` list."""

    trace: str
    step: int | None
    kind: str  # "type", "effect", "precondition", "state", "predicate", "action"
    message: str

    def __str__(self) -> str:
        where = self.trace if self.step is None else f"{self.trace} step {self.step}"
        return f"{where}: {self.message}"


# ---------------------------------------------------------------- trace files


def _fact(obj: Any, where: str) -> Atom:
    if not (isinstance(obj, list) and obj and all(isinstance(x, str) for x in obj)):
        raise TraceFormatError(f"{where}: a fact must be a list [predicate, *objects] of strings, got {obj!r}")
    return Atom(obj[0], tuple(obj[1:]))


def _step(obj: Any, where: str) -> Step:
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{where}: a step must be an object, got {type(obj).__name__}")
    missing = [k for k in ("action", "args", "before", "after") if k not in obj]
    if missing:
        raise TraceFormatError(f"{where}: missing key(s) {', '.join(missing)}")
    if not isinstance(obj["action"], str) or not obj["action"]:
        raise TraceFormatError(f"{where}: 'action' must be a non-empty string")
    if not (isinstance(obj["args"], list) and all(isinstance(a, str) for a in obj["args"])):
        raise TraceFormatError(f"{where}: 'args' must be a list of object names")
    states = []
    for key in ("before", "after"):
        if not isinstance(obj[key], list):
            raise TraceFormatError(f"{where}: '{key}' must be a list of facts")
        states.append(frozenset(_fact(f, f"{where} '{key}'") for f in obj[key]))
    return Step(obj["action"], tuple(obj["args"]), states[0], states[1])


def _trace(obj: Any, i: int, source: str) -> Trace:
    where = f"{source}: trace {i}"
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{where}: a trace must be an object, got {type(obj).__name__}")
    name = obj.get("name", f"trace{i}")
    where = f"{source}: trace {i} ({name!r})"
    objects = obj.get("objects")
    if not (isinstance(objects, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in objects.items())):
        raise TraceFormatError(f"{where}: 'objects' must map object names to type names")
    steps = obj.get("steps")
    if not isinstance(steps, list):
        raise TraceFormatError(f"{where}: 'steps' must be a list")
    return Trace(str(name), dict(objects), [_step(s, f"{where} step {j}") for j, s in enumerate(steps)])


def load_traces(path: str | Path) -> list[Trace]:
    """Read a trace file (format in the module docstring)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"{path}: line {e.lineno}, column {e.colno}: invalid JSON: {e.msg}") from e
    if isinstance(data, dict):
        if "traces" not in data:
            raise TraceFormatError(f'{path}: expected {{"traces": [...]}} or a list of traces')
        data = data["traces"]
    if not isinstance(data, list):
        raise TraceFormatError(f"{path}: 'traces' must be a list")
    return [_trace(t, i, str(path)) for i, t in enumerate(data)]


def save_traces(traces: Iterable[Trace], path: str | Path) -> Path:
    """Write traces in the format ``load_traces`` reads."""

    def facts(s: frozenset[Atom]) -> list[list[str]]:
        return [[a.predicate, *a.args] for a in sorted(s)]

    data = {
        "traces": [
            {
                "name": t.name,
                "objects": t.objects,
                "steps": [
                    {"action": s.action, "args": list(s.args), "before": facts(s.before), "after": facts(s.after)}
                    for s in t.steps
                ],
            }
            for t in traces
        ]
    }
    return write_atomic(path, json.dumps(data, indent=1))


# ---------------------------------------------------------------- learning


@dataclass
class _Occurrence:
    trace: str
    step: int
    call: str  # "stack(a, b)", for messages
    types: tuple[str, ...]
    pre: frozenset[Atom]
    add: frozenset[Atom]
    delete: frozenset[Atom]


def _lift(atoms: Iterable[Atom], var: dict[str, str]) -> frozenset[Atom]:
    """Lift the atoms that mention only the action's arguments (others are not about this action)."""
    return frozenset(Atom(a.predicate, tuple(var[x] for x in a.args)) for a in atoms if all(x in var for x in a.args))


def _show(atoms: Iterable[Atom]) -> str:
    return " ".join(str(a) for a in sorted(atoms))


def _occurrence(trace: Trace, j: int, step: Step, issues: list[Issue]) -> _Occurrence | None:
    """Lift one step, or report why it cannot be used (and return None)."""
    call = f"{step.action}({', '.join(step.args)})"

    def issue(kind: str, msg: str) -> None:
        issues.append(Issue(trace.name, j, kind, f"{call}: {msg}"))

    untyped = [a for a in step.args if a not in trace.objects]
    if untyped:
        issue("type", f"argument(s) {', '.join(untyped)} have no type in 'objects'; step ignored")
        return None
    if len(set(step.args)) != len(step.args):
        # Lifting would merge two parameters into one variable; a learned operator could not express it.
        issue("type", "the same object is passed twice; step ignored")
        return None
    types = tuple(trace.objects[a] for a in step.args)
    var = {a: f"?{t}{k + 1}" for k, (a, t) in enumerate(zip(step.args, types))}
    added, deleted = step.after - step.before, step.before - step.after
    stray = sorted(a for a in added | deleted if not all(x in var for x in a.args))
    if stray:
        issue("effect", f"effect(s) on objects that are not arguments are dropped: {_show(stray)}")
    return _Occurrence(trace.name, j, call, types, _lift(step.before, var), _lift(added, var), _lift(deleted, var))


def _check_chain(trace: Trace, issues: list[Issue]) -> None:
    """Consecutive steps should share their state; a mismatch means a missed action or sensing noise."""
    for j in range(1, len(trace.steps)):
        prev, cur = trace.steps[j - 1].after, trace.steps[j].before
        if prev != cur:
            parts = []
            if prev - cur:
                parts.append(f"missing {_show(prev - cur)}")
            if cur - prev:
                parts.append(f"unexpected {_show(cur - prev)}")
            issues.append(
                Issue(
                    trace.name,
                    j,
                    "state",
                    f"state before differs from the state after step {j - 1}: {'; '.join(parts)}",
                )
            )


def _predicates(traces: list[Trace], issues: list[Issue]) -> dict[str, tuple[str, ...]]:
    """Predicate name -> argument types, by majority over all facts; disagreements are reported."""
    seen: dict[str, Counter] = {}
    first: dict[tuple[str, tuple[str, ...]], tuple[str, int]] = {}
    for t in traces:
        for j, s in enumerate(t.steps):
            for a in s.before | s.after:
                if not all(x in t.objects for x in a.args):
                    continue  # reported by the step checks when it matters; cannot be typed here
                sig = tuple(t.objects[x] for x in a.args)
                seen.setdefault(a.predicate, Counter())[sig] += 1
                first.setdefault((a.predicate, sig), (t.name, j))
    out = {}
    for name, counts in seen.items():
        (sig, _), *others = counts.most_common()
        out[name] = sig
        for other, n in others:
            tname, j = first[(name, other)]
            issues.append(
                Issue(
                    tname,
                    j,
                    "predicate",
                    f"predicate {name} used with types ({', '.join(other)}) in {n} fact(s); "
                    f"({', '.join(sig)}) is used elsewhere and kept",
                )
            )
    return out


def _learn_operator(action: str, occs: list[_Occurrence], min_support: float, issues: list[Issue]) -> Operator:
    sigs = Counter(o.types for o in occs)
    types, _ = sigs.most_common(1)[0]
    for o in occs:
        if o.types != types:
            issues.append(
                Issue(
                    o.trace,
                    o.step,
                    "type",
                    f"{o.call}: argument types ({', '.join(o.types)}) differ from "
                    f"({', '.join(types)}) in {sigs[types]} other occurrence(s); step ignored",
                )
            )
    occs = [o for o in occs if o.types == types]
    need = max(1, math.ceil(min_support * len(occs) - 1e-9))

    def supported(part: str) -> frozenset[Atom]:
        counts = Counter(a for o in occs for a in getattr(o, part))
        return frozenset(a for a, n in counts.items() if n >= need)

    pre, add, delete = supported("pre"), supported("add"), supported("delete")
    for a in add & delete:  # only possible with min_support <= 0.5
        issues.append(
            Issue(
                occs[0].trace,
                occs[0].step,
                "effect",
                f"{action}: {a} is both added and deleted by as many demonstrations; dropped",
            )
        )
    add, delete = add - delete, delete - add
    # Report each occurrence against the most common effect set, so one bad demonstration gives
    # one issue (comparing with the learned effects would blame every good one under min_support=1).
    effect_sets = Counter((o.add, o.delete) for o in occs)
    (m_add, m_del), n_modal = effect_sets.most_common(1)[0]
    for o in occs:
        eff: list[str] = []
        for mine, mine_opp, theirs, verb, opposite in (
            (o.add, o.delete, m_add, "adds", m_del),
            (o.delete, o.add, m_del, "deletes", m_add),
        ):
            if mine & opposite:
                other = "delete" if verb == "adds" else "add"
                eff.append(f"{verb} {_show(mine & opposite)}, which they {other}")
            if mine - theirs - opposite:
                eff.append(f"also {verb} {_show(mine - theirs - opposite)}")
            if theirs - mine - mine_opp:  # (the opposite case was reported just above)
                eff.append(f"does not {verb[:-1]} {_show(theirs - mine - mine_opp)}")
        if eff:
            issues.append(
                Issue(
                    o.trace,
                    o.step,
                    "effect",
                    f"{o.call}: effects contradict the {n_modal} other demonstration(s) of {action}: " + "; ".join(eff),
                )
            )
        if pre - o.pre:
            issues.append(
                Issue(
                    o.trace,
                    o.step,
                    "precondition",
                    f"{o.call}: kept precondition(s) were false before this step: {_show(pre - o.pre)}",
                )
            )
    params = tuple((f"?{t}{k + 1}", t) for k, t in enumerate(types))
    return Operator(action, params, pre, add, delete)


def learn_domain(
    traces: Iterable[Trace], name: str = "learned", *, min_support: float = 1.0, strict: bool = False
) -> tuple[Domain, list[Issue]]:
    """Learn a typed STRIPS domain from traces; return it and the list of issues found.

    ``min_support`` (0 < s <= 1): fraction of an action's occurrences in which a precondition must
    hold / an effect must happen to be kept (1.0: all of them). ``strict``: raise ``LearningError``
    listing every issue instead of returning a domain learned around them.
    """
    if not 0 < min_support <= 1:
        raise ValueError(f"min_support must be in (0, 1], got {min_support}")
    traces = list(traces)
    issues: list[Issue] = []
    occs: dict[str, list[_Occurrence]] = {}
    for t in traces:
        _check_chain(t, issues)
        for j, s in enumerate(t.steps):
            o = _occurrence(t, j, s, issues)
            if o is not None:
                occs.setdefault(s.action, []).append(o)
    pred_types = _predicates(traces, issues)
    operators = []
    for action, action_occs in occs.items():
        op = _learn_operator(action, action_occs, min_support, issues)
        operators.append(_fit_predicates(op, pred_types, action_occs[0], issues))
    predicates = tuple(
        Predicate(p, tuple((f"?{t}{k + 1}", t) for k, t in enumerate(sig))) for p, sig in sorted(pred_types.items())
    )
    types = tuple(sorted({t for tr in traces for t in tr.objects.values()}))
    domain = Domain(name, types, predicates, tuple(operators))
    # Sort issues by where they are, so the report reads like the traces.
    issues.sort(key=lambda i: ([t.name for t in traces].index(i.trace), -1 if i.step is None else i.step))
    if strict and issues:
        raise LearningError(f"{len(issues)} issue(s) in the traces:\n" + "\n".join(f"  {i}" for i in issues))
    check_domain(domain)  # a bug here, not bad input: everything above should yield a valid domain
    return domain, issues


def _fit_predicates(
    op: Operator, pred_types: dict[str, tuple[str, ...]], where: _Occurrence, issues: list[Issue]
) -> Operator:
    """Drop atoms whose argument types disagree with the predicate's (kept) types; reported."""
    vtype = dict(op.params)

    def fit(atoms: frozenset[Atom]) -> frozenset[Atom]:
        ok = frozenset(a for a in atoms if tuple(vtype[x] for x in a.args) == pred_types.get(a.predicate))
        if atoms - ok:
            issues.append(
                Issue(
                    where.trace,
                    where.step,
                    "predicate",
                    f"{op.name}: dropped atoms with mistyped arguments: {_show(atoms - ok)}",
                )
            )
        return ok

    return Operator(op.name, op.params, fit(op.preconditions), fit(op.add), fit(op.delete))
