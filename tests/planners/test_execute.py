"""Plan execution: expected-effect checks, re-planning after injected failures, video.

The first tests use a pure-Python scene that applies the domain's effects (fast, exact); the
rest run the MuJoCo tabletop scene."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from embody.assets import asset_path
from embody.planners.execute import execute_plan
from embody.planners.pddl import Atom, Problem, read_domain
from embody.planners.solve import solve


def A(text: str) -> Atom:
    name, *args = text.strip("()").split()
    return Atom(name, tuple(args))


def atoms(*texts: str) -> frozenset[Atom]:
    return frozenset(A(t) for t in texts)


def table(*blocks: str) -> list[str]:
    return [f"({p} {b})" for b in blocks for p in ("ontable", "clear", "reachable")]


@pytest.fixture(scope="module")
def domain():
    return read_domain(asset_path("planning/tabletop.pddl"))


def replanner(domain, problem: Problem):
    """Solve again from the observed facts, same objects and goal."""

    def replan(facts):
        return solve(domain, Problem(problem.name, problem.domain_name, problem.objects, facts, problem.goal)).steps

    return replan


def planned(domain, objects, init, goal):
    problem = Problem("t", "tabletop", objects, init, goal)
    return problem, solve(domain, problem).steps


@dataclass
class Result:
    ok: bool
    message: str


class SymbolicScene:
    """Applies each operator's effects; ``sabotage`` maps a step index to facts to force afterwards."""

    def __init__(self, domain, init, sabotage=None):
        self.domain, self.state, self.sabotage, self.calls = domain, frozenset(init), sabotage or {}, 0

    def facts(self):
        return self.state

    def run(self, action, args):
        from embody.planners.execute import expected_effects

        _, self.state, _ = expected_effects(self.domain, Atom(action, tuple(args)), self.state)
        remove, add = self.sabotage.get(self.calls, (frozenset(), frozenset()))
        self.state = (self.state - remove) | add
        self.calls += 1
        return Result(not remove and not add, "sabotaged" if remove or add else "ok")


def test_symbolic_plan_runs_clean(domain):
    objects = {"a": "block", "b": "block"}
    init = atoms("(handempty)", *table("a", "b"))
    problem, plan = planned(domain, objects, init, atoms("(on a b)"))
    report = execute_plan(SymbolicScene(domain, init), domain, problem, plan)
    assert report.success and report.goal_reached and report.replans == 0
    assert [s.ok for s in report.steps] == [True, True] and report.video is None


def test_wrong_effect_is_detected_and_replanned(domain):
    objects = {"a": "block", "b": "block"}
    init = atoms("(handempty)", *table("a", "b"))
    problem, plan = planned(domain, objects, init, atoms("(on a b)"))
    # the first pick-up "slips": the block is back on the table and the hand empty
    slip = (atoms("(holding a)"), atoms("(handempty)", "(ontable a)", "(clear a)"))
    scene = SymbolicScene(domain, init, {0: slip})
    report = execute_plan(scene, domain, problem, plan, replan=replanner(domain, problem))
    first = report.steps[0]
    assert not first.ok and not first.skill_ok
    assert first.expected_missing == atoms("(holding a)")
    assert first.unexpected == atoms("(handempty)", "(ontable a)", "(clear a)")
    assert report.success and report.replans == 1
    assert [(s.action, s.plan) for s in report.steps[1:]] == [("pick-up", 1), ("stack", 1)]


def test_without_replan_a_failure_ends_execution(domain):
    objects = {"a": "block", "b": "block"}
    init = atoms("(handempty)", *table("a", "b"))
    problem, plan = planned(domain, objects, init, atoms("(on a b)"))
    scene = SymbolicScene(domain, init, {0: (atoms("(holding a)"), atoms("(handempty)", "(ontable a)", "(clear a)"))})
    report = execute_plan(scene, domain, problem, plan)
    assert not report.success and not report.goal_reached and report.replans == 0 and len(report.steps) == 1
    assert "goal does not hold" in report.message


def test_replan_budget_is_respected(domain):
    objects = {"a": "block", "b": "block"}
    init = atoms("(handempty)", *table("a", "b"))
    problem, plan = planned(domain, objects, init, atoms("(on a b)"))
    slip = (atoms("(holding a)"), atoms("(handempty)", "(ontable a)", "(clear a)"))
    scene = SymbolicScene(domain, init, {i: slip for i in range(0, 20, 1)})
    report = execute_plan(scene, domain, problem, plan, replan=replanner(domain, problem), max_replans=2)
    assert not report.success and report.replans == 2 and len(report.steps) == 3


# ------------------------------------------------------------------------------- MuJoCo


@pytest.fixture(scope="module")
def mujoco_scene():
    pytest.importorskip("mujoco")
    from embody.planners.tabletop import TabletopScene

    return TabletopScene


def test_dropped_block_is_detected_and_replanned(domain, mujoco_scene):
    objects = {"b1": "block", "b2": "block", "b3": "block"}
    init = atoms("(handempty)", *table("b1", "b2", "b3"))
    problem, plan = planned(domain, objects, init, atoms("(on b1 b2)", "(on b2 b3)"))
    scene = mujoco_scene()
    scene.setup(objects, init)
    dropped = []

    def drop_first_pick(record):  # the gripper opens right after the first successful pick-up
        if record.action == "pick-up" and record.ok and not dropped:
            dropped.append(record.args[0])
            scene.perturb("drop", record.args[0])

    report = execute_plan(scene, domain, problem, plan, replan=replanner(domain, problem), on_step=drop_first_pick)
    assert dropped and report.success and report.goal_reached
    assert report.replans == 1
    refused = next(s for s in report.steps if not s.ok)
    assert refused.action == "stack" and not refused.skill_ok and "preconditions do not hold" in refused.message
    assert A(f"(holding {dropped[0]})") in refused.expected_missing
    assert report.final_facts == scene.facts() and problem.goal <= report.final_facts


def test_knocked_tower_is_rebuilt(domain, mujoco_scene):
    objects = {"b1": "block", "b2": "block", "b3": "block"}
    init = atoms("(handempty)", *table("b1", "b2", "b3"))
    problem, plan = planned(domain, objects, init, atoms("(on b1 b2)", "(on b2 b3)"))
    scene = mujoco_scene()
    scene.setup(objects, init)

    def knock(record):  # after the last stack, the block it placed is knocked to the table
        if record.index == len(plan) - 1:
            scene.perturb("knock", record.args[0])

    report = execute_plan(scene, domain, problem, plan, replan=replanner(domain, problem), on_step=knock)
    assert report.success and report.replans == 1 and len(report.steps) == len(plan) + 2


def test_video_is_written(domain, mujoco_scene, tmp_path):
    from embody.video import read_frames

    objects = {"b1": "block", "d1": "drawer"}
    init = atoms("(handempty)", "(drawer-closed d1)", *table("b1"))
    problem, plan = planned(domain, objects, init, atoms("(drawer-open d1)"))
    scene = mujoco_scene(render=True)
    scene.setup(objects, init)
    sim_start = scene.world.data.time
    report = execute_plan(scene, domain, problem, plan, video=tmp_path / "run.mp4")
    assert report.success and report.video == tmp_path / "run.mp4"
    frames = read_frames(report.video)
    seconds = scene.world.data.time - sim_start
    assert frames.shape[1:] == (240, 320, 3)
    assert abs(len(frames) - 1 - seconds * scene.config.fps) <= 2  # one frame per 1/fps of sim time, plus the first
    assert frames.std() > 5  # not a blank picture
    assert scene.frames == []  # streamed into the file
