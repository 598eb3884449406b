"""``embody mpa diagnose``: how well argmax-Q chooses among the candidates of held-out branch points.

A Q model is trained (the run's Q settings) on all but a random ``holdout`` fraction of the branch
points and scores the candidates of the held-out ones; reported are the true advantages (return −
the base plan's return) and collision rates of its picks (argmax of the members' mean, argmax of the
pessimistic score, and the agent's rule: that pick unless it does not beat the base plan), of a random
candidate and of the oracle, and the mean within-point correlation of predicted and true advantage. This separates "the Q model
cannot rank" from "the agent's closed-loop states are unlike the branch data".
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .config import MPAConfig
from .data import CounterfactualData
from .train import q_targets

COLLIDED = -50.0  # a return below this had the collision penalty (100) in it


def q_pick(cf: CounterfactualData, cfg: MPAConfig, holdout: float = 0.2, seed: int = 0) -> dict:
    """Train a Q model on ``1 − holdout`` of the branch points; on the rest, the ``advantage`` over the base plan and
    the ``collision`` rate of its pick among the proposals, of a random proposal, the base plan and the oracle, and the
    ``within_point_correlation`` of Q with the advantage."""
    from embody.policies.value import train_q

    test = np.zeros(len(cf.obs), dtype=bool)
    test[np.random.default_rng(seed).permutation(len(cf.obs))[: max(1, int(holdout * len(cf.obs)))]] = True
    q = train_q(*q_targets(cf.where(~test)), replace(cfg.q, progress=False))
    t = cf.where(test)
    adv = t.returns - t.returns[:, :1]
    pred, pess = q.score(t.obs, t.plans, pessimism=0.0), q.score(t.obs, t.plans, cfg.agent.q_pessimism)
    rows = np.arange(len(adv))
    pick = pred[:, 1:].argmax(1) + 1  # among the proposals (index 0 is the base plan)
    pick_pess = pess[:, 1:].argmax(1) + 1
    margin = cfg.agent.q_margin_rmse * q.summary["val_rmse"]
    # the base+adapter+Q agent's rule (include_base): the pessimistic best unless it does not beat the base plan
    agent = np.where(pess[rows, pick_pess] > margin, pick_pess, 0) if cfg.agent.include_base else pick_pess
    within = [np.corrcoef(p, a)[0, 1] for p, a in zip(pred, adv) if a.std() > 0 and p.std() > 0]
    picks = {"q_pick": pick, "q_pick_pessimistic": pick_pess, "agent_rule": agent}
    return {
        "heldout_points": int(len(adv)),
        "q_members": q.config.members,
        "q_pessimism": cfg.agent.q_pessimism,
        "agent_rule_keeps_base": float(np.mean(agent == 0)),
        "advantage": {
            **{k: float(adv[rows, v].mean()) for k, v in picks.items()},
            "random": float(adv[:, 1:].mean()),
            "base": 0.0,
            "oracle": float(adv.max(1).mean()),
        },
        "collision": {
            **{k: float(np.mean(t.returns[rows, v] < COLLIDED)) for k, v in picks.items()},
            "random": float(np.mean(t.returns[:, 1:] < COLLIDED)),
            "base": float(np.mean(t.returns[:, 0] < COLLIDED)),
        },
        "within_point_correlation": float(np.mean(within)) if within else float("nan"),
    }
