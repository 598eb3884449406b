"""Plan with unified-planning engines; every returned plan has been validated.

``solve(domain, problem)`` runs Fast Downward (``up-fast-downward``, a compiled planner shipped
in the wheel; lama-first, satisficing) by default, ``fast-downward-opt`` (A* with LM-cut:
optimal plan lengths) or pyperplan (``up-pyperplan``, pure Python: slower, but runs anywhere).
If Fast Downward cannot run at all (binary missing or not executable on this platform, internal
error) ``solve`` logs a warning and falls back to pyperplan, unless ``fallback=False``, when it
raises ``PlannerUnavailable``. ``timeout_s`` bounds Fast Downward only: up-pyperplan has no way
to stop its search. Unsolvable problems raise ``NoPlan``, timeouts ``PlanTimeout`` (a
``NoPlan``); a plan the validator rejects raises ``PlanningError`` (a planner bug, or a domain
the planner misread).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from embody.extras import require

from .pddl import Atom, Domain, Problem, to_up_problem, up_environment

log = logging.getLogger(__name__)

PLANNERS = ("fast-downward", "fast-downward-opt", "pyperplan")
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
        """The IPC plan format: one ``(action arg...)`` per line, then ``; cost = N (unit cost)``."""
        return "".join(f"{s}\n" for s in self.steps) + f"; cost = {len(self.steps)} (unit cost)\n"


class PlanTimeout(NoPlan):
    """The planner ran out of time."""


class PlannerUnavailable(PlanningError):
    """The engine could not run (as opposed to: it ran and found no plan)."""


def fast_downward_files() -> list[Path]:
    """The driver and search binary shipped in up-fast-downward. When one is missing, the driver's
    failure would read as "no plan found" (exit code 2), so ``_run`` checks them first."""
    root = Path(require("up_fast_downward", "planning").__file__).parent / "downward"
    return [root / "fast-downward.py", root / "builds" / "release" / "bin" / "downward"]


def _run(planner: str, up_problem, timeout_s: float):
    """One planner call; returns the UP plan, raises NoPlan or PlannerUnavailable."""
    if planner.startswith("fast-downward"):
        missing = [str(f) for f in fast_downward_files() if not f.is_file()]
        if missing:
            raise PlannerUnavailable(f"{planner} could not run: missing {', '.join(missing)} "
                                     "(reinstall up-fast-downward)")
    engines = require("unified_planning.engines", "planning")
    shortcuts = require("unified_planning.shortcuts", "planning")
    status = engines.PlanGenerationResultStatus
    try:
        with up_environment(), shortcuts.OneshotPlanner(name=planner) as engine:
            # up-pyperplan cannot stop its search (it only warns about a timeout), so none is passed.
            result = engine.solve(up_problem, timeout=None if planner == "pyperplan" else timeout_s)
    except Exception as e:  # noqa: BLE001 - missing binary, exec format error, engine not installed...
        raise PlannerUnavailable(f"{planner} could not run: {type(e).__name__}: {e}") from e
    if result.status in (status.SOLVED_SATISFICING, status.SOLVED_OPTIMALLY) and result.plan is not None:
        return result.plan
    if result.status in (status.UNSOLVABLE_PROVEN, status.UNSOLVABLE_INCOMPLETELY):
        proven = "proved" if result.status == status.UNSOLVABLE_PROVEN else "found"
        raise NoPlan(f"{planner} {proven} no plan for problem {up_problem.name!r}")
    if result.status == status.TIMEOUT:
        raise PlanTimeout(f"{planner} found no plan for problem {up_problem.name!r} within {timeout_s:g} s")
    logs = " ".join(str(m.message) for m in (result.log_messages or []))[-500:]
    raise PlannerUnavailable(f"{planner} ended with {result.status.name}{': ' + logs if logs else ''}")


def _invalid(up_problem, up_plan) -> str | None:
    """None for a valid plan, else the validator's reason."""
    engines = require("unified_planning.engines", "planning")
    shortcuts = require("unified_planning.shortcuts", "planning")
    with up_environment(), shortcuts.PlanValidator(name="sequential_plan_validator") as validator:
        result = validator.validate(up_problem, up_plan)
    if result.status == engines.ValidationResultStatus.VALID:
        return None
    why = result.reason.name if result.reason is not None else result.status.name
    return why + (f": {result.inapplicable_action}" if result.inapplicable_action is not None else "")


def solve(domain: Domain, problem: Problem, planner: str = DEFAULT_PLANNER, timeout_s: float = 60.0,
          fallback: bool = True) -> Plan:
    """Find and validate a plan for ``problem`` in ``domain``.

    Raises ``ValueError`` for an unknown planner, ``NoPlan`` when no plan exists, ``PlanTimeout``
    when none was found in ``timeout_s``, ``PlannerUnavailable`` when the planner cannot run
    (and ``fallback`` is off or pyperplan cannot run either), ``PlanningError`` when its plan is
    invalid.
    """
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r}; valid planners: {', '.join(PLANNERS)}")
    start = time.perf_counter()
    up_problem = to_up_problem(domain, problem)
    try:
        up_plan = _run(planner, up_problem, timeout_s)
    except PlannerUnavailable as e:
        if planner == FALLBACK_PLANNER or not fallback:
            raise
        log.warning("%s; falling back to %s", e, FALLBACK_PLANNER)
        planner = FALLBACK_PLANNER
        up_plan = _run(planner, up_problem, max(1.0, timeout_s - (time.perf_counter() - start)))
    why = _invalid(up_problem, up_plan)
    if why:
        raise PlanningError(f"{planner} returned a plan the validator rejects ({why}):\n{up_plan}")
    steps = tuple(Atom(a.action.name, tuple(str(p) for p in a.actual_parameters)) for a in up_plan.actions)
    return Plan(steps, planner, time.perf_counter() - start)


def validate(domain: Domain, problem: Problem, steps: tuple[Atom, ...]) -> str | None:
    """None if ``steps`` (action, args) is a valid plan for ``problem`` in ``domain``, else why not."""
    io = require("unified_planning.io", "planning")
    up_problem = to_up_problem(domain, problem)
    text = "".join(f"{s}\n" for s in steps)
    try:
        with up_environment() as env:
            up_plan = io.PDDLReader(environment=env).parse_plan_string(up_problem, text)
    except Exception as e:  # noqa: BLE001 - unknown action or object: not a plan of this domain
        return f"not a plan of domain {domain.name}: {' '.join(str(e).split())}"
    return _invalid(up_problem, up_plan)
