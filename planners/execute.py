"""Execute a symbolic plan on a scene, check every step's effects, re-plan when reality differs.

For each step the domain's operator is grounded on the facts *observed* before it: the step
is expected to leave ``(before - delete) | add``. The skill runs, the scene's facts are read
back and compared. A step fails when its preconditions do not hold before it (it is then not
run), when the skill reports failure, when an atom the operator adds or deletes came out
differently, or when a goal atom that should hold is lost. On failure, ``replan(observed)``
gives a new plan from the observed state (typically: solve a Problem with init = observed and
the same goal) and execution continues with it, at most ``max_replans`` times. A plan that
runs out before the goal holds is re-planned the same way.

Scenes are duck-typed: ``facts() -> frozenset[Atom]``, ``run(action, args) -> result`` with
``.ok`` and ``.message``, and, for video, ``frames`` (list of (H, W, 3) uint8) with
``clear_frames()`` and optionally ``config.fps`` (embody.planners.tabletop.TabletopScene).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .pddl import Atom, Domain, Problem
from .solve import PlanningError

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One executed (or refused) plan step. ``expected_missing``: atoms the step should have made
    (or left) true that are false; ``unexpected``: atoms the operator touches that came out true
    though they should be false. ``ok``: the skill succeeded and both sets are empty."""

    index: int  # position in the whole execution, over all plans
    action: str
    args: tuple[str, ...]
    ok: bool
    expected_missing: frozenset[Atom]
    unexpected: frozenset[Atom]
    message: str
    skill_ok: bool = True  # False also when the step was refused for unmet preconditions
    plan: int = 0  # 0: the given plan, k: the k-th re-plan
    facts_after: frozenset[Atom] = field(default=frozenset(), repr=False)


@dataclass
class ExecutionReport:
    """``success`` and ``goal_reached`` both mean: the goal holds in the final facts (two names for
    the same test, as callers read either). ``message`` says why not when it does not."""

    success: bool
    goal_reached: bool
    steps: list[StepRecord]
    replans: int
    final_facts: frozenset[Atom]
    video: Path | None
    message: str = ""


def ground(atoms: frozenset[Atom], binding: dict[str, str]) -> frozenset[Atom]:
    """``atoms`` with every variable in ``binding`` replaced by its object (other arguments unchanged)."""
    return frozenset(Atom(a.predicate, tuple(binding.get(x, x) for x in a.args)) for a in atoms)


def expected_effects(domain: Domain, step: Atom, before: frozenset[Atom]):
    """(preconditions, expected facts after, atoms the operator touches) of ``step`` from ``before``."""
    op = domain.operator(step.predicate)
    if len(op.params) != len(step.args):
        raise ValueError(f"{step}: {op.name} takes {len(op.params)} arguments")
    binding = {var: arg for (var, _), arg in zip(op.params, step.args)}
    add, delete = ground(op.add, binding), ground(op.delete, binding)
    return ground(op.preconditions, binding), (before - delete) | add, add | delete


class _Video:
    """Streams the scene's frames into an MP4 as execution goes (and clears them from the scene)."""

    def __init__(self, scene, path: Path | None):
        self.scene, self.path, self.writer, self.count = scene, path, None, 0
        if path is not None:
            from embody.video import VideoWriter

            fps = getattr(getattr(scene, "config", None), "fps", 20.0)
            self.writer = VideoWriter(path, fps=fps)

    def flush(self) -> None:
        """Write the scene's frames so far and clear them from the scene."""
        if self.writer is None:
            return
        for frame in self.scene.frames:
            self.writer.write(frame)
        self.count += len(self.scene.frames)
        self.scene.clear_frames()

    def close(self) -> Path | None:
        """Flush and close the file; returns its path, or None when no video was asked or no frame came."""
        if self.writer is None:
            return None
        self.flush()
        self.writer.close()
        if not self.count:
            log.warning("no frames to write to %s: was the scene made with render=True?", self.path)
            return None
        return self.path


def execute_plan(
    scene,
    domain: Domain,
    problem: Problem,
    plan_steps: Sequence[Atom],
    *,
    replan: Callable[[frozenset[Atom]], Sequence[Atom]] | None = None,
    max_replans: int = 3,
    video: Path | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> ExecutionReport:
    """Run ``plan_steps`` (Atom(action, args)) on ``scene``; see the module docstring.
    ``on_step(record)`` is called after every step (failure injection, progress output); the
    facts are read again after it. With ``video``, all frames go into that MP4."""
    goal, steps, replans, message = problem.goal, [], 0, ""
    out = _Video(scene, Path(video) if video is not None else None)
    plan, facts = list(plan_steps), scene.facts()
    try:
        while True:
            for step in plan:
                record = _run_step(scene, domain, step, facts, goal, len(steps), replans)
                steps.append(record)
                log.info("step %d %s: %s", record.index, step, "ok" if record.ok else record.message)
                if on_step is not None:
                    on_step(record)
                out.flush()
                facts = scene.facts()
                if not record.ok:
                    break
            if goal <= facts or replan is None or replans >= max_replans:
                if not goal <= facts:
                    message = "the goal does not hold" + ("" if replan is None else f" after {replans} re-plans")
                break
            replans += 1
            try:
                plan = list(replan(facts))
            except PlanningError as e:
                message = f"re-plan {replans} failed: {e}"
                break
    finally:
        path = out.close()
    reached = goal <= facts
    return ExecutionReport(
        success=reached,
        goal_reached=reached,
        steps=steps,
        replans=replans,
        final_facts=facts,
        video=path,
        message=message or ("goal reached" if reached else ""),
    )


def _run_step(
    scene, domain: Domain, step: Atom, before: frozenset[Atom], goal: frozenset[Atom], index: int, plan: int
) -> StepRecord:
    pre, expected, touched = expected_effects(domain, step, before)
    action, args = step.predicate, tuple(step.args)
    if not pre <= before:
        missing = pre - before
        return StepRecord(
            index,
            action,
            args,
            False,
            missing,
            frozenset(),
            f"preconditions do not hold: {' '.join(map(str, sorted(missing)))}",
            skill_ok=False,
            plan=plan,
            facts_after=before,
        )
    result = scene.run(action, args)
    observed = scene.facts()
    missing = (expected - observed) & (touched | goal)
    unexpected = (observed - expected) & touched
    message = result.message
    if result.ok and (missing or unexpected):
        message += "; effects differ: " + ", ".join(
            [f"missing {' '.join(map(str, sorted(missing)))}"] * bool(missing)
            + [f"unexpected {' '.join(map(str, sorted(unexpected)))}"] * bool(unexpected)
        )
    ok = bool(result.ok) and not missing and not unexpected
    return StepRecord(
        index, action, args, ok, missing, unexpected, message, skill_ok=bool(result.ok), plan=plan, facts_after=observed
    )
