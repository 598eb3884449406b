"""Execute held-out tasks' meta-domain plans with the scene's skills (the study's ``--execute N``).

Each task runs twice: as planned, and with the first grasped block dropped right after it was
picked (``scene.perturb("drop", ...)``), which the step checks must catch and re-planning repair.
"""

from __future__ import annotations

from pathlib import Path

from embody.planners.execute import execute_plan
from embody.planners.pddl import Problem, read_domain
from embody.planners.retrieve import Library

from .demos import REFERENCE
from .tasks import held_out_tasks


def execute_tasks(rows: list[dict], library: Library, out: Path, seed: int = 0) -> dict:
    """Run each row's task in the scene: plan with the library, check every step, re-plan on failure."""
    ref = read_domain(REFERENCE)
    tasks = {t.name: t for t in held_out_tasks(len(rows), seed)}
    videos = out / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    runs = []
    for row in rows:
        for drop in (False, True):
            runs.append(_run(tasks[row["task"]], library, ref, videos, drop))
    return {
        "runs": len(runs),
        "reached": sum(r["goal_reached"] for r in runs),
        "drops": sum(r["dropped"] is not None for r in runs),
        "replans": sum(r["replans"] for r in runs),
        "videos": str(videos),
        "per_task": runs,
    }


def _run(task, library: Library, ref, videos: Path, drop: bool) -> dict:
    from embody.planners.tabletop import SceneConfig, TabletopScene

    p = task.problem
    dropped = []

    def plan(facts):
        return library.plan_task(Problem(p.name, p.domain_name, p.objects, facts, p.goal), task.instruction).skills

    def on_step(record):
        if drop and not dropped and record.ok and record.action in ("pick-up", "unstack", "take-from-drawer"):
            dropped.append(record.args[0])
            scene.perturb("drop", record.args[0])

    scene = TabletopScene(SceneConfig(), render=True)
    scene.setup(p.objects, p.init)
    video = videos / f"{task.name}{'-drop' if drop else ''}.mp4"
    report = execute_plan(scene, ref, p, plan(scene.facts()), replan=plan, video=video, on_step=on_step)
    scene.close()
    return {
        "task": task.name,
        "dropped": dropped[0] if dropped else None,
        "goal_reached": report.goal_reached,
        "replans": report.replans,
        "steps": len(report.steps),
        "message": report.message,
    }
