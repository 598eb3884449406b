"""The tabletop scene of the planning pipeline: a 7-DoF arm with a parallel gripper, blocks, a
drawer, pegs and a peg board in MuJoCo; scripted skills named after the operators of the
reference domain (assets/planning/tabletop.pddl); and the symbolic abstraction that reads that
domain's facts from the physics.

    scene = TabletopScene(SceneConfig(), render=True)
    scene.setup({"b1": "block", "d1": "drawer"}, init)   # exactly ``init`` holds afterwards
    scene.run("pick-up", ("b1",))                         # SkillResult(ok, message)
    scene.facts()                                         # frozenset of Atoms

The grasp is a weld constraint: a skill closes the fingers on the object, checks both touch it,
then activates a weld between hand and object; ``holding`` means that weld is active.
"""

from .scene import PERTURBATIONS, SceneConfig, SceneError, SkillResult, TabletopScene

__all__ = ["PERTURBATIONS", "SceneConfig", "SceneError", "SkillResult", "TabletopScene"]
