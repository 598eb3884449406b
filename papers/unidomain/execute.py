"""Execute held-out tasks' meta-domain plans with the scene's skills (the study's ``--execute N``)."""

from __future__ import annotations

from pathlib import Path

from embody.planners.execute import execute_plan
from embody.planners.pddl import Problem, read_domain
from embody.planners.retrieve import Library

from .demos import REFERENCE
from .tasks import held_out_tasks


def execute_tasks(rows: list[dict], library: Library, out: Path, seed: int = 0) -> dict:
    """Run each row's task in the scene: plan with the library, check every step, re-plan on failure."""
    from embody.planners.tabletop import SceneConfig, TabletopScene

    ref = read_domain(REFERENCE)
    tasks = {t.name: t for t in held_out_tasks(len(rows), seed)}
    videos = out / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    runs = []
    for row in rows:
        task = tasks[row["task"]]
        p = task.problem

        def plan(facts, p=p, task=task):
            return library.plan_task(Problem(p.name, p.domain_name, p.objects, facts, p.goal), task.instruction).skills

        scene = TabletopScene(SceneConfig(), render=True)
        scene.setup(p.objects, p.init)
        report = execute_plan(scene, ref, p, plan(scene.facts()), replan=plan, video=videos / f"{task.name}.mp4")
        scene.close()
        runs.append({"task": task.name, "goal_reached": report.goal_reached, "replans": report.replans,
                     "steps": len(report.steps), "message": report.message})
    return {"runs": len(runs), "reached": sum(r["goal_reached"] for r in runs),
            "replans": sum(r["replans"] for r in runs), "videos": str(videos), "per_task": runs}
