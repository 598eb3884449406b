"""``embody plan demo``: plan a tabletop task, execute it with the scene's skills, re-plan on failure.

The problem is written in the reference vocabulary (assets/planning/tabletop.pddl: what the
scene's symbolic abstraction reports). Plans come from the reference domain, or, with a
library, from the meta-domain retrieved for the task (its actions mapped back to the skills
they were learned from). Every step's expected effects are checked against the observed facts
(``execute.py``); a failure re-plans from what is observed. ``perturb`` injects a failure
(e.g. ``7:drop:b1``: open the gripper on b1 after the 7th executed step) to show that loop at work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from embody.assets import asset_path

from .pddl import Atom, PDDLError, Problem, check_problem, parse_problem_text, read_domain, read_text

REFERENCE = asset_path("planning/tabletop.pddl")

DEFAULT_PROBLEM = """(define (problem demo) (:domain tabletop)
  (:objects b1 b2 b3 - block d1 - drawer p1 - peg h1 - hole)
  (:init (handempty) (drawer-closed d1) (peg-on-table p1) (hole-free h1)
         (ontable b1) (clear b1)
         (ontable b2) (clear b2) (reachable b2)
         (ontable b3) (clear b3) (reachable b3))
  (:goal (and (in-drawer b1 d1) (drawer-closed d1) (on b2 b3) (inserted p1 h1))))
"""


@dataclass(frozen=True)
class DemoConfig:
    """Settings of ``run_demo`` (``embody plan demo``): the problem, an optional instruction or
    library, video, an injected failure, the planner."""

    problem: str | None = None  # a problem file; None: DEFAULT_PROBLEM (far block into drawer, tower, peg)
    instruction: str | None = None  # the goal as an instruction (rule-based grounding) instead of the problem's
    library: str | None = None  # plan with domains retrieved from this library; None: the reference domain
    video: bool = True
    perturb: str | None = None  # "STEP:KIND:OBJ"
    planner: str = "fast-downward"
    timeout_s: float = 60.0


def _perturbation(spec: str | None) -> tuple[int, str, str] | None:
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) != 3 or not parts[0].isdigit():
        raise PDDLError(f"--perturb {spec!r}: expected STEP:KIND:OBJ, e.g. 2:drop:b1")
    return int(parts[0]), parts[1], parts[2]


def _problem(cfg: DemoConfig) -> Problem:
    text, source = (read_text(cfg.problem), cfg.problem) if cfg.problem else (DEFAULT_PROBLEM, "<demo problem>")
    problem = parse_problem_text(text, source)
    check_problem(read_domain(REFERENCE), problem)  # the scene speaks the reference vocabulary only
    if cfg.instruction:
        from .language import goal_from_instruction

        goal = goal_from_instruction(cfg.instruction, problem.objects, read_domain(REFERENCE).predicates)
        problem = Problem(problem.name, problem.domain_name, problem.objects, problem.init, goal)
    return problem


def _planner(cfg: DemoConfig, goal: frozenset[Atom], objects: dict[str, str], name: str):
    """facts (reference vocabulary) -> plan steps named by skills."""
    from .solve import solve

    ref = read_domain(REFERENCE)
    library = None
    if cfg.library:
        from .retrieve import Library

        library = Library.load(cfg.library)

    def plan(facts: frozenset[Atom]) -> tuple[Atom, ...]:
        problem = Problem(name, ref.name, objects, facts, goal)
        if library is None:
            return solve(ref, problem, cfg.planner, cfg.timeout_s).steps
        return library.plan_task(problem, cfg.instruction, cfg.planner, cfg.timeout_s).skills

    return plan


def run_demo(cfg: DemoConfig, out: Path) -> dict:
    """Set the scene up from the problem's init, plan, execute with checks and re-planning; write
    ``plan.txt``, ``report.json`` and (``cfg.video``) ``demo.mp4`` into ``out``."""
    from .execute import execute_plan
    from .tabletop import SceneConfig, TabletopScene

    problem, perturb = _problem(cfg), _perturbation(cfg.perturb)
    ref = read_domain(REFERENCE)
    plan = _planner(cfg, problem.goal, problem.objects, problem.name)
    scene = TabletopScene(SceneConfig(), render=cfg.video)
    scene.setup(problem.objects, problem.init)
    steps = plan(scene.facts())
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.txt").write_text("".join(f"{s}\n" for s in steps) + f"; cost = {len(steps)} (unit cost)\n")

    def on_step(record, scene_=scene) -> None:
        if perturb and record.index + 1 == perturb[0]:  # STEP counts executed steps from 1
            scene_.perturb(perturb[1], perturb[2])

    report = execute_plan(
        scene, ref, problem, steps, replan=plan, video=out / "demo.mp4" if cfg.video else None, on_step=on_step
    )
    summary = {
        "goal": [str(a) for a in sorted(problem.goal)],
        "goal_reached": report.goal_reached,
        "replans": report.replans,
        "steps": [
            {
                "step": f"({r.action} {' '.join(r.args)})",
                "ok": r.ok,
                "plan": r.plan,
                "message": r.message,
                "missing": [str(a) for a in sorted(r.expected_missing)],
                "unexpected": [str(a) for a in sorted(r.unexpected)],
            }
            for r in report.steps
        ],
        "video": str(report.video) if report.video else None,
        "message": report.message,
    }
    (out / "report.json").write_text(json.dumps(summary, indent=1))
    return summary
