"""Trigger specifications: signal temporal logic over the trajectories of named attacker vehicles.

A spec file (YAML or JSON) a person writes by hand::

    name: close-cut-in
    actors: [cutter]                      # attacker vehicles, named as in the scenario / actors CSV
    formula:
      and:
        - reach: {actor: cutter, region: {dx: [5, 15], dy: [-1.5, 1.5]}, within: [2, 8]}
        - avoid: {actor: cutter, region: {dx: [-2, 5], dy: [-1.5, 1.5]}, within: [0, 10]}

Signals, per attacker and per control step, relative to the ego in the road frame: ``dx`` (its x − the ego's
[m], > 0 ahead), ``dy`` (its y − the ego's [m], > 0 to the left), ``speed`` [m/s] and ``dv`` (its speed − the
ego's [m/s]). A **region** bounds any of them (``[lo, hi]``; a bound may be null). Formulas:

* ``reach: {actor, region, within: [t0, t1]}`` — at some time in [t0, t1] s the actor is in the region;
* ``avoid: {actor, region, within: [t0, t1]}`` — at no time in [t0, t1] s is it in the region;
* ``and: [...]``, ``or: [...]`` (two or more), ``not: formula``;
* ``until: {left: formula, right: formula, within: [t0, t1]}`` — ``right`` holds at some time in [t0, t1]
  and ``left`` holds until then.

A spec file may also say how its attackers may behave, for trigger generation (``generate.py``)::

    attackers:
      cutter: {behavior: cut-in, lane: 0, dx: [-30, 0], speed: [25, 35], params: {trigger_ahead: [2, 10]}}

(a number is fixed, ``[lo, hi]`` is searched; ``behavior`` and ``params`` as in ``embody.sims.driving.behaviors``).

Robustness is rtamt's (a maintained STL library) discrete-time quantitative semantics at t = 0: a signed
margin in the signals' units, > 0 where the trace satisfies the spec. A region's margin is the smallest
distance to its bounds (negative outside), so robustness says how far a trace is from satisfying the spec.
Malformed specs raise ``SpecError`` naming the file and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import yaml

from embody import exits

SIGNALS = ("dx", "dy", "speed", "dv")
FORMULAS = ("reach", "avoid", "and", "or", "not", "until")


class SpecError(ValueError):
    """A trigger spec that cannot be read or does not make sense; names the file and the field."""

    exit_code = exits.INPUT


@dataclass
class Attacker:
    """How attacker ``name`` may behave: a behavior model, and its placement (``lane``, ``dx``, ``speed``) and
    parameters (``params.NAME``), each fixed or searched within [lo, hi]."""

    name: str
    behavior: str
    fixed: dict[str, float]
    ranges: dict[str, tuple[float, float]]

    def actor(self, theta: dict[str, float] | None = None):
        """The scenario ActorSpec at parameters ``theta`` (the searched ones; the rest fixed)."""
        from embody.sims.driving.scenario import ActorSpec

        values = {**self.fixed, **(theta or {})}
        params = {k[len("params.") :]: v for k, v in values.items() if k.startswith("params.")}
        return ActorSpec(
            self.name,
            lane=int(round(values.get("lane", 0))),
            dx=float(values.get("dx", 30.0)),
            speed=float(values.get("speed", 25.0)),
            behavior=self.behavior,
            params=params,
        )


@dataclass
class TriggerSpec:
    """A parsed spec: its ``name``, attacker ``actors``, the STL ``formula`` (rtamt syntax, bounds in steps of
    ``dt``, the control period the spec was compiled for) and the ``attackers``' search spaces (may be empty)."""

    name: str
    actors: tuple[str, ...]
    formula: str
    dt: float
    source: str = ""
    attackers: tuple[Attacker, ...] = ()

    def robustness(self, trace: dict[str, np.ndarray]) -> float:
        """The spec's robustness on ``trace`` ({``ACTOR_SIGNAL``: (T,)} at ``dt``, from ``Trace.signals``)."""
        missing = [v for v in self.variables() if v not in trace]
        if missing:
            raise SpecError(f"{self.source}: the trace has no signals {missing} (is each actor in the scene?)")
        n = len(next(iter(trace.values())))
        reps = 2 if n == 1 else 1  # rtamt needs two samples: one sample is a constant signal over two
        data = {"time": list(range(n * reps)), **{v: [float(x) for x in trace[v]] * reps for v in self.variables()}}
        return float(self._monitor.evaluate(data)[0][1])

    def satisfied_at(self, trace: dict[str, np.ndarray]) -> int | None:
        """The first step k at which the trace up to k satisfies the spec (robustness ≥ 0), or None: when a trigger
        has happened, as an agent living through it would know."""
        n = len(next(iter(trace.values())))
        for k in range(n):
            if self.robustness({name: x[: k + 1] for name, x in trace.items()}) >= 0:
                return k
        return None

    @cached_property
    def _monitor(self):
        """The formula parsed by rtamt, once (its offline evaluation keeps no state between traces)."""
        from embody.extras import require

        rtamt = require("rtamt", "backdoor")
        spec = rtamt.StlDiscreteTimeSpecification()
        for v in self.variables():
            spec.declare_var(v, "float")
        spec.declare_var("out", "float")
        spec.spec = f"out = {self.formula}"
        spec.parse()
        return spec

    def variables(self) -> list[str]:
        return [f"{a}_{s}" for a in self.actors for s in SIGNALS]


def load_spec(path: str | Path, dt: float) -> TriggerSpec:
    """Read a spec file (YAML or JSON) for a simulator stepping every ``dt`` seconds."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: trigger spec file is missing")
    try:
        doc = yaml.safe_load(path.read_text()) if path.suffix != ".json" else json.loads(path.read_text())
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: not a readable YAML/JSON spec: {e}") from None
    return parse_spec(doc, dt, str(path))


def parse_spec(doc, dt: float, source: str = "spec") -> TriggerSpec:
    """A TriggerSpec from a spec document (the dict a spec file holds)."""
    if not isinstance(doc, dict) or "formula" not in doc or "actors" not in doc:
        raise SpecError(f"{source}: a spec is a mapping with 'actors' and 'formula' (and optionally 'name')")
    actors = doc["actors"]
    if not isinstance(actors, list) or not actors or not all(isinstance(a, str) and a.isidentifier() for a in actors):
        raise SpecError(f"{source}: actors: a list of names (letters, digits, _), got {actors!r}")
    unknown = sorted(set(doc) - {"name", "actors", "formula", "attackers"})
    if unknown:
        raise SpecError(f"{source}: unknown fields {unknown}; valid: name, actors, formula, attackers")
    compiler = _Compiler(source, tuple(actors), dt)
    formula = compiler.formula(doc["formula"], "formula")
    attackers = tuple(compiler.attacker(n, a) for n, a in (doc.get("attackers") or {}).items())
    return TriggerSpec(str(doc.get("name", Path(source).stem)), tuple(actors), formula, dt, source, attackers)


class _Compiler:
    """Spec document → rtamt formula text, checking every field on the way."""

    def __init__(self, source: str, actors: tuple[str, ...], dt: float):
        self.source, self.actors, self.dt = source, actors, dt

    def error(self, where: str, problem: str) -> SpecError:
        return SpecError(f"{self.source}: {where}: {problem}")

    def formula(self, node, where: str) -> str:
        if not isinstance(node, dict) or len(node) != 1:
            raise self.error(where, f"a formula is one of {', '.join(FORMULAS)} (a one-key mapping), got {node!r}")
        ((kind, body),) = node.items()
        here = f"{where}.{kind}"
        if kind in ("reach", "avoid"):
            return self.temporal(kind, body, here)
        if kind in ("and", "or"):
            if not isinstance(body, list) or len(body) < 2:
                raise self.error(here, "needs a list of two or more formulas")
            parts = [self.formula(f, f"{here}[{i}]") for i, f in enumerate(body)]
            return "(" + f" {kind} ".join(parts) + ")"
        if kind == "not":
            return f"(not {self.formula(body, here)})"
        if kind == "until":
            if not isinstance(body, dict) or set(body) != {"left", "right", "within"}:
                raise self.error(here, "needs left, right and within")
            a, b = self.interval(body["within"], here)
            return f"({self.formula(body['left'], here + '.left')} until[{a}:{b}] {self.formula(body['right'], here + '.right')})"
        raise self.error(where, f"unknown formula {kind!r}; valid: {', '.join(FORMULAS)}")

    def temporal(self, kind: str, body, where: str) -> str:
        if not isinstance(body, dict) or set(body) - {"actor", "region", "within"} or "actor" not in body:
            raise self.error(where, "needs actor, region and within")
        actor = body["actor"]
        if actor not in self.actors:
            raise self.error(where, f"unknown actor {actor!r}; the spec's actors: {', '.join(self.actors)}")
        inside = self.region(actor, body.get("region"), where + ".region")
        a, b = self.interval(body.get("within"), where)
        return f"(eventually[{a}:{b}] {inside})" if kind == "reach" else f"(always[{a}:{b}] (not {inside}))"

    def region(self, actor: str, region, where: str) -> str:
        if not isinstance(region, dict) or not region:
            raise self.error(where, f"a region bounds some of {', '.join(SIGNALS)}: {{dx: [lo, hi], ...}}")
        terms = []
        for signal, bounds in region.items():
            if signal not in SIGNALS:
                raise self.error(where, f"unknown signal {signal!r}; valid: {', '.join(SIGNALS)}")
            lo, hi = self.bounds(bounds, f"{where}.{signal}")
            if lo is not None:
                terms.append(f"({actor}_{signal} >= {lo!r})")
            if hi is not None:
                terms.append(f"({actor}_{signal} <= {hi!r})")
        return "(" + " and ".join(terms) + ")" if len(terms) > 1 else terms[0]

    def bounds(self, bounds, where: str) -> tuple[float | None, float | None]:
        values = bounds if isinstance(bounds, list) and len(bounds) == 2 else []
        if not values or all(v is None for v in values) or not all(v is None or _finite(v) for v in values):
            raise self.error(where, f"bounds are [lo, hi] (numbers; one may be null), got {bounds!r}")
        lo, hi = (None if v is None else float(v) for v in values)
        if lo is not None and hi is not None and lo > hi:
            raise self.error(where, f"lo {lo:g} > hi {hi:g}")
        return lo, hi

    def attacker(self, name: str, doc) -> Attacker:
        where = f"attackers.{name}"
        if name not in self.actors:
            raise self.error(where, f"unknown actor {name!r}; the spec's actors: {', '.join(self.actors)}")
        if (
            not isinstance(doc, dict)
            or "behavior" not in doc
            or set(doc) - {"behavior", "lane", "dx", "speed", "params"}
        ):
            raise self.error(where, "needs behavior and optionally lane, dx, speed, params")
        flat = {k: v for k, v in doc.items() if k in ("lane", "dx", "speed")}
        flat.update({f"params.{k}": v for k, v in (doc.get("params") or {}).items()})
        fixed, ranges = {}, {}
        for key, v in flat.items():
            if _finite(v):
                fixed[key] = float(v)
            else:
                lo, hi = self.bounds(v, f"{where}.{key}")
                if lo is None or hi is None:
                    raise self.error(f"{where}.{key}", "a searched parameter needs both bounds")
                ranges[key] = (lo, hi)
        attacker = Attacker(name, str(doc["behavior"]), fixed, ranges)
        try:  # the behavior and its parameter names, checked now rather than mid-search
            from embody.sims.driving.behaviors import make_behavior

            make_behavior(attacker.behavior, attacker.actor({k: lo for k, (lo, _) in ranges.items()}).params)
        except ValueError as e:
            raise self.error(where, str(e)) from None
        return attacker

    def interval(self, within, where: str) -> tuple[int, int]:
        """[t0, t1] seconds → steps of dt."""
        if not (isinstance(within, list) and len(within) == 2 and all(_finite(v) and v >= 0 for v in within)):
            raise self.error(where, f"within: [t0, t1] seconds, 0 ≤ t0 ≤ t1, got {within!r}")
        t0, t1 = within
        if t0 > t1:
            raise self.error(where, f"within: t0 {t0:g} > t1 {t1:g}")
        return round(t0 / self.dt), round(t1 / self.dt)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
