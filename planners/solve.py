"""Plan with unified-planning engines; every returned plan has been validated.

``solve(domain, problem)`` runs Fast Downward (``up-fast-downward``, a compiled planner shipped
in the wheel) by default, or pyperplan (``up-pyperplan``, pure Python: slower, but runs anywhere).
If Fast Downward cannot run at all (binary missing or not executable on this platform, internal
error) ``solve`` logs a warning and falls back to pyperplan. ``timeout_s`` bounds Fast Downward
only: up-pyperplan has no way to stop its search. Unsolvable problems and timeouts
raise ``NoPlan``; a plan the validator rejects raises ``PlanningError`` (a planner bug, or a
domain the planner misread).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from embody.extras import require

from .pddl import Atom, Domain, Problem, to_up_problem, up_environment

log = logging.getLogger(__name__)

PLANNERS = ("fast-downward", "pyperplan")
DEFAULT_PLANNER = "fast-downward"
FALLBACK_PLANNER = "pyperplan"


class PlanningError(RuntimeError):
    """The planner failed or produced an invalid plan."""


class NoPlan(PlanningError):
    """No plan was found: the problem is unsolvable (or the planner ran out of time)."""


@dataclass(frozen=True)
class Plan:
    steps: tuple[Atom, ...]  # (action, args) in order; Atom reused as a name + arguments pair
    planner: str
    time_s: float  # wall time of planning + validation

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def to_text(self) -> str:
        """One ``(action arg...)`` per line, the usual plan-file format."""
        return "".join(f"{s}\n" for s in self.steps)


class _PlannerUnavailable(Exception):
    """The engine could not run (as opposed to: it ran and found no plan)."""


def _run(planner: str, up_problem, timeout_s: float):
    """One planner call; returns the UP plan, raises NoPlan or _PlannerUnavailable."""
    engines = require("unified_planning.engines", "planning")
    shortcuts = require("unified_planning.shortcuts", "planning")
    status = engines.PlanGenerationResultStatus
    try:
        with up_environment(), shortcuts.OneshotPlanner(name=planner) as engine:
            # up-pyperplan cannot stop its search (it only warns about a timeout), so none is passed.
            result = engine.solve(up_problem, timeout=None if planner == "pyperplan" else timeout_s)
    except Exception as e:  # noqa: BLE001 - missing binary, exec format error, engine not installed...
        raise _PlannerUnavailable(f"{planner} could not run: {type(e).__name__}: {e}") from e
    if result.status in (status.SOLVED_SATISFICING, status.SOLVED_OPTIMALLY) and result.plan is not None:
        return result.plan
    if result.status in (status.UNSOLVABLE_PROVEN, status.UNSOLVABLE_INCOMPLETELY):
        proven = "proved" if result.status == status.UNSOLVABLE_PROVEN else "found"
        raise NoPlan(f"{planner} {proven} no plan for problem {up_problem.name!r}")
    if result.status == status.TIMEOUT:
        raise NoPlan(f"{planner} found no plan for problem {up_problem.name!r} within {timeout_s:g} s")
    logs = " ".join(str(m.message) for m in (result.log_messages or []))[-500:]
    raise _PlannerUnavailable(f"{planner} ended with {result.status.name}{': ' + logs if logs else ''}")


def _validate(up_problem, up_plan, planner: str) -> None:
    engines = require("unified_planning.engines", "planning")
    shortcuts = require("unified_planning.shortcuts", "planning")
    with up_environment(), shortcuts.PlanValidator(name="sequential_plan_validator") as validator:
        result = validator.validate(up_problem, up_plan)
    if result.status != engines.ValidationResultStatus.VALID:
        why = result.reason.name if result.reason is not None else result.status.name
        if result.inapplicable_action is not None:
            why += f": {result.inapplicable_action}"
        raise PlanningError(f"{planner} returned a plan the validator rejects ({why}):\n{up_plan}")


def solve(domain: Domain, problem: Problem, planner: str = DEFAULT_PLANNER, timeout_s: float = 60.0) -> Plan:
    """Find and validate a plan for ``problem`` in ``domain``.

    Raises ``ValueError`` for an unknown planner, ``NoPlan`` when no plan exists (or none was
    found in ``timeout_s``), ``PlanningError`` when the planner fails or its plan is invalid.
    """
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r}; valid planners: {', '.join(PLANNERS)}")
    start = time.perf_counter()
    up_problem = to_up_problem(domain, problem)
    try:
        up_plan = _run(planner, up_problem, timeout_s)
    except _PlannerUnavailable as e:
        if planner == FALLBACK_PLANNER:
            raise PlanningError(str(e)) from e
        log.warning("%s; falling back to %s", e, FALLBACK_PLANNER)
        planner = FALLBACK_PLANNER
        try:
            up_plan = _run(planner, up_problem, max(1.0, timeout_s - (time.perf_counter() - start)))
        except _PlannerUnavailable as e2:
            raise PlanningError(str(e2)) from e2
    _validate(up_problem, up_plan, planner)
    steps = tuple(Atom(a.action.name, tuple(str(p) for p in a.actual_parameters)) for a in up_plan.actions)
    return Plan(steps, planner, time.perf_counter() - start)
