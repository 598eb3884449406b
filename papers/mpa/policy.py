"""The three agents MPA compares, each driving its plan through the trajectory follower
(waypoints → [acc, steering]):

  base           the behavior-cloned plan, replanned every control step
  base+adapter   the mean of K adapter samples (base plan + sampled residuals)
  base+adapter+Q the adapter sample with the highest Q value among the K (plus the base plan itself
                 when ``include_base``, our addition: a proposal must beat the base plan's Q by
                 ``q_margin_rmse`` × the Q model's validation RMSE, else the base plan is driven)

The adapter agents replan every ``replan_every`` steps and follow the chosen plan (made absolute
when chosen) in between, as the counterfactual branches they learned from did; replanning a
relative lateral offset every step would compound it.

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
        self.trajectory = None  # the committed absolute Trajectory (adapter agents)
        self.steps = 0

    def reset(self) -> None:
        self.generator = torch.Generator().manual_seed(self.seed)
        self.trajectory, self.steps = None, 0

    def candidates(self, o: np.ndarray, base: np.ndarray) -> np.ndarray:
        """o (O,), base (H, 4) → K adapter proposals (K, H, 4)."""
        c = self.cfg
        return sample_plans(self.models.adapter, o[None], base[None], c.candidates, c.ddim_steps, c.eta,
                            self.generator)[0]

    def plan(self, obs: Observation) -> np.ndarray:
        """The plan (H, 4) this agent drives now (relative to the ego, data.py's frame)."""
        o = policy_obs(obs)
        base = self.models.bc.predict(o[None])[0]
        if self.kind == "base":
            return base
        cands = self.candidates(o, base)
        self.last_candidates = cands
        if self.kind == "base+adapter":
            return cands.mean(0)
        if not self.cfg.include_base:
            return cands[int(np.argmax(self.models.q.score(o[None], cands[None])[0]))]
        q = self.models.q.score(o[None], np.concatenate([base[None], cands])[None])[0]
        margin = self.cfg.q_margin_rmse * float(self.models.q.summary.get("val_rmse", 0.0))
        best = int(np.argmax(q[1:]))
        return cands[best] if q[1 + best] > q[0] + margin else base

    def act(self, obs: Observation) -> np.ndarray:
        every = 1 if self.kind == "base" else max(1, self.cfg.replan_every)
        if self.trajectory is None or self.steps % every == 0:
            self.trajectory = plan_trajectory(self.plan(obs), ego_state(obs), obs.t, self.dt)
        self.steps += 1
        return self.follower.action(obs.ego, self.trajectory, obs.t)
