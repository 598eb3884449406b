"""PRIMT's teacher for the core's preference learner: the judges' verdicts, fused when both modalities judge."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from embody.policies.preference import ScriptedTeacher

from .foresight import PlanStats
from .fusion import FusionWeights, fuse
from .hindsight import HindsightLoss
from .judges import ChatJudge


@dataclass
class PRIMTTeacher:
    """Labels pairs with ``text`` and/or ``visual`` judges (``embody.policies.preference.Teacher``): one judge's
    majority, or both fused (``fusion``); unsure → 0.5. With ``aux_loss``, the reward model also learns from
    hindsight counterfactuals; with ``foresight``, those trajectories warm-start the query buffer."""

    text: ChatJudge | None = None
    visual: ChatJudge | None = None
    fusion: FusionWeights = field(default_factory=FusionWeights)
    aux_loss: HindsightLoss | None = None  # hindsight's causal loss, picked up by the core's preference learner
    foresight: dict[str, np.ndarray] | None = None  # trajectories for the query buffer, picked up the same way
    plans: PlanStats | None = None  # the foresight plans asked of the text judge

    def __post_init__(self):
        if self.text is None and self.visual is None:
            raise ValueError("PRIMTTeacher needs a text judge, a visual judge, or both")

    def label(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        verdicts = [j.judge(pairs) if j is not None else None for j in (self.text, self.visual)]
        if None in verdicts:
            return next(v for v in verdicts if v is not None).labels()
        return fuse(*verdicts, self.fusion)

    def stats(self) -> dict[str, dict[str, int]]:
        out = {name: j.stats.as_dict() for name, j in (("text", self.text), ("visual", self.visual)) if j}
        if self.foresight is not None:
            out["foresight"] = {"trajectories": len(self.foresight["rewards"]), **asdict(self.plans or PlanStats())}
        return out


@dataclass
class ScriptedForesight:
    """The core's scripted teacher (B-Pref, from the env's reward) with foresight trajectories in the query buffer:
    what foresight's coverage does to the learned reward, apart from what the judges' labels do."""

    scripted: ScriptedTeacher
    foresight: dict[str, np.ndarray]  # picked up by the core's preference learner

    def label(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        return self.scripted.label(pairs)

    def stats(self) -> dict[str, dict[str, int]]:  # the scripted plan: no judge asked
        return {"foresight": {"trajectories": len(self.foresight["rewards"]), **asdict(PlanStats())}}
