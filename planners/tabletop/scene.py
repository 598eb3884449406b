"""TabletopScene: the physical side of the planning pipeline's tabletop domain.

``setup`` builds a MuJoCo scene holding exactly the objects of a problem and places them so that
exactly its init holds; ``facts`` reads the reference domain's facts back from the physics;
``run`` executes one operator of the reference domain (assets/planning/tabletop.pddl) as a
scripted skill; ``perturb`` injects failures. See layout.py for the geometry, facts.py for what
each predicate means physically, skills.py for the skills and world.py for the weld grasp.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from embody.planners.pddl import Atom

from . import facts as F
from . import layout as L
from .motion import Z_SAFE, Arm
from .placement import check_init, realize
from .skills import SKILLS, SkillResult, free_table_slot
from .world import SceneError, World

PERTURBATIONS = ("drop", "knock", "far", "open-drawer", "close-drawer")


@dataclass(frozen=True)
class SceneConfig:
    """Rendering of the frames captured during skills (only with ``render=True``)."""

    fps: float = 20.0
    width: int = 320
    height: int = 240


class TabletopScene:
    """A 7-DoF arm with a parallel gripper at a table with blocks, a drawer, pegs and a peg board."""

    def __init__(self, config: SceneConfig = SceneConfig(), render: bool = False):
        self.config, self.render = config, render
        self._frames: list[np.ndarray] = []
        self._world: World | None = None
        self._arm: Arm | None = None
        self.skill_times: list[tuple[str, float, float]] = []  # (action, sim s, wall s) per run

    # -- state ---------------------------------------------------------------------------
    def setup(self, objects: dict[str, str], init: frozenset[Atom]) -> None:
        """Build the scene for ``objects`` (name → type) with exactly ``init`` true; SceneError if impossible."""
        init = frozenset(init)
        check_init(objects, init)
        if self._world is not None:
            self._world.close()
        c = self.config
        self._world = World(objects, self.render, c.fps, (c.width, c.height), self._frames)
        n = len(self._frames)
        self._arm = realize(self._world, Arm, init)
        del self._frames[n:]  # the objects settling in is not part of any skill
        observed = self.facts()
        if observed != init:
            raise SceneError(
                f"could not realize this init physically: missing {_fmt(init - observed)}, "
                f"extra {_fmt(observed - init)}"
            )
        self._world.capture()

    def objects(self) -> dict[str, str]:
        """The scene's objects, name → type (a copy); SceneError before ``setup``."""
        return dict(self._need().objects)

    def facts(self) -> frozenset[Atom]:
        """The reference domain's grounded facts that hold now (closed world)."""
        return F.observe(self._need())

    @property
    def frames(self) -> list[np.ndarray]:
        """RGB frames (H, W, 3) uint8 captured at ``config.fps`` of sim time while skills ran."""
        return self._frames

    def clear_frames(self) -> None:
        """Drop the captured frames (callers that stream them to video do this after each write)."""
        self._frames.clear()

    @property
    def world(self) -> World:
        """The physics (MuJoCo model and data) behind the scene."""
        return self._need()

    @property
    def arm(self) -> Arm:
        """The arm's motion interface the skills use (move, goto, fingers, wait)."""
        self._need()
        return self._arm

    # -- acting --------------------------------------------------------------------------
    def run(self, action: str, args: tuple[str, ...]) -> SkillResult:
        """Execute the skill of operator ``action``; a physical failure comes back as ok=False."""
        w = self._need()
        if action not in SKILLS:
            raise SceneError(f"unknown action {action!r}; skills: {', '.join(SKILLS)}")
        skill, types = SKILLS[action]
        args = tuple(args)
        got = tuple(w.objects.get(a, "?") for a in args)
        if got != types:
            raise SceneError(f"({action} {' '.join(args)}): expected arguments of types {types}, got {got}")
        t0, sim0 = time.perf_counter(), w.data.time
        result = skill(w, self._arm, *args)
        if not result.ok and self._arm.pos[2] < Z_SAFE - 0.01:
            self._arm.move((*self._arm.pos[:2], Z_SAFE))  # best effort: get clear of the table
        self.skill_times.append((action, w.data.time - sim0, time.perf_counter() - t0))
        return result

    def perturb(self, kind: str, obj: str) -> None:
        """Inject a failure: ``drop`` (open the gripper on the held object), ``knock`` (move a block
        to a free table slot), ``far`` (move a clear table block out of reach), ``open-drawer`` /
        ``close-drawer`` (slide the drawer, with its contents)."""
        w = self._need()
        if kind not in PERTURBATIONS:
            raise SceneError(f"unknown perturbation {kind!r}; known: {', '.join(PERTURBATIONS)}")
        if obj not in w.objects:
            raise SceneError(f"unknown object {obj!r}")
        if kind == "drop":
            if w.held() != obj:
                raise SceneError(f"cannot drop {obj}: the hand holds {w.held() or 'nothing'}")
            w.release()
            self._arm.fingers(L.FINGER_OPEN * 0.8, 1.0)
        elif kind in ("knock", "far"):
            self._teleport_block(obj, kind)
        else:
            if w.drawer != obj:
                raise SceneError(f"{obj} is not the drawer")
            w.set_drawer_q(L.DRAWER_TRAVEL if kind == "open-drawer" else 0.0)
            self._arm.wait(0.5)

    def _teleport_block(self, b: str, kind: str) -> None:
        w = self._need()
        if w.objects[b] != "block":
            raise SceneError(f"{kind} moves blocks; {b} is a {w.objects[b]}")
        if w.held() == b:
            w.release()
            self._arm.fingers(L.FINGER_OPEN * 0.8, 0.2)
        if kind == "knock":
            slot = free_table_slot(w, b)
        else:
            lanes = [(np.array(L.table_slots()[f"far{i}"]), a) for i, a in enumerate(L.LANES)]
            slot = next(
                (
                    (p, a)
                    for p, a in lanes
                    if all(np.linalg.norm(w.pos(o)[:2] - p[:2]) > 0.1 for o in w.blocks + w.pegs if o != b)
                ),
                None,
            )
        if slot is None:
            raise SceneError(f"no free place to move {b} to")
        w.set_pose(b, slot[0], slot[1])
        self._arm.wait(0.5)

    def close(self) -> None:
        """Free the renderer; safe to call twice or before ``setup``."""
        if self._world is not None:
            self._world.close()

    def _need(self) -> World:
        if self._world is None:
            raise SceneError("call setup(objects, init) first")
        return self._world


def _fmt(atoms) -> str:
    return " ".join(map(str, sorted(atoms))) or "nothing"


__all__ = ["PERTURBATIONS", "SceneConfig", "SceneError", "SkillResult", "TabletopScene"]
