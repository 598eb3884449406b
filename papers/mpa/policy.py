"""The three agents MPA compares, each driving its plan through the trajectory follower
(waypoints → [acc, steering]):

  base           the behavior-cloned plan, replanned every control step
  base+adapter   the mean of K adapter samples (base plan + sampled residuals)
  base+adapter+Q the adapter sample with the highest Q value among the K; the Q model predicts a
                 plan's advantage over the base plan (train.py: q_targets), so with ``include_base``
                 (our addition) the base plan, whose advantage is 0 by definition, is driven unless a
                 proposal's predicted advantage exceeds ``q_margin_rmse`` × the Q model's validation RMSE

The adapter agents commit to a proposal for ``replan_every`` steps (made absolute when chosen), as
the counterfactual branches they learned from did (tiny: 5), or replan every step (paper: with the
end-to-end base, committing for 1 s left the road in 20 of 50 base+adapter episodes, replanning in 3).
The base plan (the base agent's, or the Q agent's when it keeps it) is replanned every step: followed
open-loop it drifts.

Each is a driving policy: ``act(obs)`` → action (2,), ``plan(obs)`` → (H, 4), ``reset()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from embody.policies.diffusion import DiffusionModel, sample_plans
from embody.policies.trajectory import TrajectoryMLP
from embody.policies.value import QModel
from embody.sims.driving import Observation
from embody.sims.driving.control import TrajectoryFollower

from .config import AgentConfig
from .data import ego_state, plan_trajectory, policy_obs

AGENTS = ("base", "base+adapter", "base+adapter+Q")


@dataclass
class Models:
    """The trained models an agent uses: base BC, and the diffusion adapter and Q model (None for agents without
    them)."""

    bc: TrajectoryMLP
    adapter: DiffusionModel | None = None
    q: QModel | None = None


class MPAAgent:
    """One of AGENTS (module docstring). ``seed`` fixes the adapter's sampling noise (reset restarts it)."""

    def __init__(self, kind: str, models: Models, cfg: AgentConfig, dt: float, seed: int = 0):
        if kind not in AGENTS:
            raise ValueError(f"unknown agent {kind!r}; valid: {', '.join(AGENTS)}")
        if kind != "base" and (models.adapter is None or (kind.endswith("Q") and models.q is None)):
            raise ValueError(f"agent {kind!r} needs the adapter{' and the Q model' if kind.endswith('Q') else ''}")
        self.kind, self.models, self.cfg, self.dt, self.seed = kind, models, cfg, dt, seed
        self.follower = TrajectoryFollower()
        self.generator = torch.Generator().manual_seed(seed)
        self.last_candidates: np.ndarray | None = None  # (K, H, 4) of the latest plan() (adapter agents)
        self.trajectory = None  # the absolute Trajectory being followed
        self.base_plan: np.ndarray | None = None  # the base policy's plan at the latest plan()
        self.hold = 0  # control steps left before replanning

    def reset(self) -> None:
        """Start an episode: restart the sampling noise and forget the current trajectory."""
        self.generator = torch.Generator().manual_seed(self.seed)
        self.trajectory, self.hold = None, 0

    def condition(self, obs: Observation) -> np.ndarray:
        """(F,): what the adapter and the Q model see of ``obs``: the base policy's ``features`` of it."""
        return self.models.bc.features(policy_obs(obs)[None])[0]

    def candidates(self, o: np.ndarray, base: np.ndarray) -> np.ndarray:
        """o (F,) (``condition``), base (H, 4) → K adapter proposals (K, H, 4)."""
        c = self.cfg
        return sample_plans(
            self.models.adapter, o[None], base[None], c.candidates, c.ddim_steps, c.eta, self.generator
        )[0]

    def plan(self, obs: Observation) -> np.ndarray:
        """The plan (H, 4) this agent drives now (relative to the ego, data.py's frame)."""
        o = policy_obs(obs)
        base = self.base_plan = self.models.bc.predict(o[None])[0]
        if self.kind == "base":
            return base
        o = self.models.bc.features(o[None])[0]  # ``condition``, from the observation already built
        cands = self.candidates(o, base)
        self.last_candidates = cands
        if self.kind == "base+adapter":
            return cands.mean(0)
        q = self.models.q.score(o[None], cands[None], self.cfg.q_pessimism)[0]  # predicted advantage over base
        best = int(np.argmax(q))
        if not self.cfg.include_base:
            return cands[best]
        margin = self.cfg.q_margin_rmse * float(self.models.q.summary.get("val_rmse", 0.0))
        return cands[best] if q[best] > margin else base

    def act(self, obs: Observation) -> np.ndarray:
        """The continuous action (2,): follow the current plan's trajectory, replanning every ``replan_every`` steps
        (every step for the base agent or when the base plan was kept)."""
        if self.trajectory is None or self.hold <= 0:
            plan = self.plan(obs)
            self.trajectory = plan_trajectory(plan, ego_state(obs), obs.t, self.dt)
            self.hold = 1 if self.kind == "base" or plan is self.base_plan else max(1, self.cfg.replan_every)
        self.hold -= 1
        return self.follower.action(obs.ego, self.trajectory, obs.t)
