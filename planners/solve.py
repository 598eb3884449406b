"""Plan with Fast Downward or unified-planning engines; every returned plan has been validated.

``solve(domain, problem)`` runs Fast Downward (``up-fast-downward``, a compiled planner shipped
in the wheel; lama-first, satisficing) by default, ``fast-downward-opt`` (A* with LM-cut:
optimal plan lengths) or pyperplan (``up-pyperplan``, pure Python: slower, but runs anywhere).
Fast Downward's driver runs directly, as a subprocess in a private temporary directory, on our
own PDDL text; pyperplan runs through unified-planning's ``OneshotPlanner``. Every plan is checked
by unified-planning's ``sequential_plan_validator``.
If Fast Downward cannot run at all (binary missing or not executable on this platform, internal
error) ``solve`` logs a warning and falls back to pyperplan, unless ``fallback=False``, when it
raises ``PlannerUnavailable``. ``timeout_s`` bounds Fast Downward only: up-pyperplan has no way
to stop its search. Unsolvable problems raise ``NoPlan``, timeouts ``PlanTimeout`` (a
``NoPlan``); a plan the validator rejects raises ``PlanningError`` (a planner bug, or a domain
the planner misread).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from embody import exits
from embody.extras import require

from .pddl import Atom, Domain, Problem, domain_to_pddl, problem_to_pddl, to_up_problem, up_environment

log = logging.getLogger(__name__)

PLANNERS = ("fast-downward", "fast-downward-opt", "pyperplan")
DEFAULT_PLANNER = "fast-downward"
FALLBACK_PLANNER = "pyperplan"


class PlanningError(RuntimeError):
    """The planner failed or produced an invalid plan."""


class NoPlan(PlanningError):
    """No plan was found: the problem is unsolvable (or the planner ran out of time)."""

    exit_code = exits.UNSOLVABLE
    exit_label = "unsolvable"


@dataclass(frozen=True)
class Plan:
    """A validated plan: steps as Atom(action, *args), the planner that found it, planning + validation time (s)."""

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

    exit_code = exits.TIMEOUT
    exit_label = "timeout"


class PlannerUnavailable(PlanningError):
    """The engine could not run (as opposed to: it ran and found no plan)."""

    exit_code = exits.NO_PLANNER
    exit_label = "planner not available"


def fast_downward_files() -> list[Path]:
    """The driver and search binary shipped in up-fast-downward, checked before each run so that a
    broken install says what is missing rather than how the driver failed."""
    root = Path(require("up_fast_downward", "planning").__file__).parent / "downward"
    return [root / "fast-downward.py", root / "builds" / "release" / "bin" / "downward"]


class _Task(NamedTuple):
    """One call's problem: our model (Fast Downward plans on its PDDL text) and its unified-planning
    form (pyperplan plans on it, the validator checks every plan against it)."""

    domain: Domain
    problem: Problem
    up: object


# The search of each Fast Downward planner, as up-fast-downward's engines run it (``_get_cmd``).
_FD_SEARCH = {
    "fast-downward": (["--alias", "lama-first"], []),
    "fast-downward-opt": ([], ["--search-options", "--search", "astar(lmcut())"]),
}
# Fast Downward's exit codes (fast-downward.org, "exit codes"), mapped as up-fast-downward's
# ``_result_status`` does, except that 0-3 without a plan file mean a failure (a Python traceback
# exits with 1, an argument error with 2), not "no plan".
_FD_PLAN_FOUND = {0, 1, 2, 3}
_FD_UNSOLVABLE = {10: "proved", 11: "proved", 12: "found", 13: "found"}
_FD_TIMEOUT = {21, 23}
_FD_FAILURE = {20: "MEMOUT", 22: "MEMOUT", 24: "MEMOUT", 34: "UNSUPPORTED_PROBLEM"}


def _fd_command(planner: str, driver: Path, timeout_s: float) -> list[str]:
    """The driver's command line, on ``domain.pddl`` and ``problem.pddl`` in its working directory."""
    before, after = _FD_SEARCH[planner]
    # The driver takes whole seconds (of CPU time); the subprocess timeout is the wall-clock limit.
    return [
        sys.executable,
        str(driver),
        "--plan-file",
        "plan",
        "--search-time-limit",
        f"{max(1, int(timeout_s))}s",
        "--log-level",
        "info",
        *before,
        "domain.pddl",
        "problem.pddl",
        *after,
    ]


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the driver and what it started (translator, search), which share its process group."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass


def _drive(cmd: list[str], cwd: Path, timeout_s: float) -> tuple[int | None, str]:
    """Run ``cmd`` in a new process group: its exit code (None when killed after ``timeout_s``) and
    its output."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, code = proc.communicate(timeout=timeout_s)[0], proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, code = proc.communicate()[0], None
    finally:
        if proc.poll() is None:  # an exception (Ctrl-C...) left it running
            _kill_group(proc)
            proc.wait()
    return code, out.decode(errors="replace")


def _read_plan(path: Path) -> tuple[Atom, ...]:
    """Steps of an IPC plan file: ``(action arg...)`` lines; ``;`` comments skipped."""
    lines = (ln.strip() for ln in path.read_text().splitlines())
    return tuple(Atom(w[0], tuple(w[1:])) for w in (ln.strip("()").split() for ln in lines if ln.startswith("(")))


def _fast_downward(planner: str, task: _Task, timeout_s: float):
    """Run Fast Downward's driver on our PDDL text; returns the UP plan, raises NoPlan or PlannerUnavailable."""
    files = fast_downward_files()
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise PlannerUnavailable(f"{planner} could not run: missing {', '.join(missing)} (reinstall up-fast-downward)")
    # A private working directory: the driver writes output.sas and the plan there, so two solves
    # started from one directory would otherwise read each other's translation.
    with tempfile.TemporaryDirectory(prefix="embody-fd-") as tmp:
        work = Path(tmp)
        (work / "domain.pddl").write_text(domain_to_pddl(task.domain))
        (work / "problem.pddl").write_text(problem_to_pddl(task.problem))
        try:
            code, log = _drive(_fd_command(planner, files[0], timeout_s), work, timeout_s)
        except OSError as e:  # exec format error, no interpreter...
            raise PlannerUnavailable(f"{planner} could not run: {type(e).__name__}: {e}") from e
        plan = work / "plan"
        steps = _read_plan(plan) if code in _FD_PLAN_FOUND and plan.is_file() else None
    if steps is not None:
        try:
            return _up_plan(task.up, steps)
        except ValueError as e:
            raise PlanningError(f"{planner} returned a plan that is not of domain {task.domain.name}: {e}") from e
    return _fd_failure(planner, task.problem.name, code, log, timeout_s)


def _fd_failure(planner: str, name: str, code: int | None, log: str, timeout_s: float):
    """Raise what a Fast Downward run that returned no plan means."""
    if code is None or code in _FD_TIMEOUT:
        raise PlanTimeout(f"{planner} found no plan for problem {name!r} within {timeout_s:g} s")
    if code in _FD_UNSOLVABLE:
        raise NoPlan(f"{planner} {_FD_UNSOLVABLE[code]} no plan for problem {name!r}")
    status = _FD_FAILURE.get(code, "INTERNAL_ERROR")
    tail = " ".join(log.split())[-500:]
    raise PlannerUnavailable(
        f"{planner} ended with {status} (exit code {code}"
        f"{', no plan file' if code in _FD_PLAN_FOUND else ''}){': ' + tail if tail else ''}"
    )


def _up_engine(planner: str, up_problem, timeout_s: float):
    """One call of a unified-planning engine; returns the UP plan, raises NoPlan or PlannerUnavailable."""
    engines = require("unified_planning.engines", "planning")
    shortcuts = require("unified_planning.shortcuts", "planning")
    status = engines.PlanGenerationResultStatus
    try:
        with up_environment(), shortcuts.OneshotPlanner(name=planner) as engine:
            # up-pyperplan cannot stop its search (it only warns about a timeout), so none is passed.
            result = engine.solve(up_problem, timeout=None if planner == "pyperplan" else timeout_s)
    except Exception as e:  # noqa: BLE001 - exec format error, engine not installed...
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


def _run(planner: str, task: _Task, timeout_s: float):
    """One planner call; returns the UP plan, raises NoPlan or PlannerUnavailable."""
    if planner.startswith("fast-downward"):
        return _fast_downward(planner, task, timeout_s)
    return _up_engine(planner, task.up, timeout_s)


def _up_plan(up_problem, steps: tuple[Atom, ...]):
    """The UP plan of ``steps`` (names matched case-insensitively, as PDDL is); ValueError when a
    step is not an action of the problem's domain applied to its objects."""
    plans = require("unified_planning.plans", "planning")
    actions = {a.name.lower(): a for a in up_problem.actions}
    objects = {o.name.lower(): o for o in up_problem.all_objects}
    out = []
    with up_environment():
        for name, args in steps:
            step = Atom(name, tuple(args))
            act = actions.get(name.lower())
            if act is None:
                raise ValueError(f"{step}: unknown action {name!r}")
            if len(args) != len(act.parameters):
                raise ValueError(f"{step}: {act.name} takes {len(act.parameters)} arguments, got {len(args)}")
            unknown = [x for x in args if x.lower() not in objects]
            if unknown:
                raise ValueError(f"{step}: unknown object {unknown[0]!r}")
            try:
                out.append(plans.ActionInstance(act, [objects[x.lower()] for x in args]))
            except Exception as e:  # noqa: BLE001 - UPTypeError: an object of the wrong type
                raise ValueError(f"{step}: {' '.join(str(e).split())}") from e
    return plans.SequentialPlan(out)


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


def solve(
    domain: Domain, problem: Problem, planner: str = DEFAULT_PLANNER, timeout_s: float = 60.0, fallback: bool = True
) -> Plan:
    """Find and validate a plan for ``problem`` in ``domain``.

    Raises ``ValueError`` for an unknown planner, ``NoPlan`` when no plan exists, ``PlanTimeout``
    when none was found in ``timeout_s``, ``PlannerUnavailable`` when the planner cannot run
    (and ``fallback`` is off or pyperplan cannot run either), ``PlanningError`` when its plan is
    invalid.
    """
    if planner not in PLANNERS:
        raise ValueError(f"unknown planner {planner!r}; valid planners: {', '.join(PLANNERS)}")
    start = time.perf_counter()
    task = _Task(domain, problem, to_up_problem(domain, problem))  # checks both first
    try:
        up_plan = _run(planner, task, timeout_s)
    except PlannerUnavailable as e:
        if planner == FALLBACK_PLANNER or not fallback:
            raise
        log.warning("%s; falling back to %s", e, FALLBACK_PLANNER)
        planner = FALLBACK_PLANNER
        up_plan = _run(planner, task, max(1.0, timeout_s - (time.perf_counter() - start)))
    why = _invalid(task.up, up_plan)
    if why:
        raise PlanningError(f"{planner} returned a plan the validator rejects ({why}):\n{up_plan}")
    steps = tuple(Atom(a.action.name, tuple(str(p) for p in a.actual_parameters)) for a in up_plan.actions)
    return Plan(steps, planner, time.perf_counter() - start)


def validate(domain: Domain, problem: Problem, steps: tuple[Atom, ...]) -> str | None:
    """None if ``steps`` (action, args) is a valid plan for ``problem`` in ``domain``, else why not."""
    up_problem = to_up_problem(domain, problem)
    try:
        up_plan = _up_plan(up_problem, tuple(steps))
    except ValueError as e:  # unknown action or object: not a plan of this domain
        return f"not a plan of domain {domain.name}: {e}"
    return _invalid(up_problem, up_plan)
