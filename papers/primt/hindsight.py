"""Hindsight: counterfactual single-step edits of preferred segments and PRIMT's causal loss.

For each pair with a strict label, up to ``edits`` steps of the preferred segment get their action perturbed by
at most ``scale`` per dimension (actions in [-1, 1]; relative L1 ≤ ``scale``). The causal loss

    L = Σ_t [m_t · softplus(r̂(cf_t) − r̂(pref_t)) + (1 − m_t) · (r̂(pref_t) − r̂(cf_t))²]

asks an edited step (m_t = 1) to earn less than the step the teacher preferred, and an unedited one to earn the
same. Our reward model reads one step at a time, so an unedited step's inputs — and its two rewards — are equal
and only the edited steps carry loss. PRIMT's counterfactuals come from the LLM; ours are random edits: a prior
that a preferred segment's actions beat nearby ones, weighted by ``weight`` (λ = 0.05, the paper's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class HindsightLoss:
    edits: int = 5
    scale: float = 0.3
    weight: float = 0.05

    def __call__(self, model, obs: torch.Tensor, actions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The weighted causal loss over a batch (obs (B, 2, L, o), actions (B, 2, L, a), labels (B,))."""
        strict = (labels == 0) | (labels == 1)
        if not strict.any():
            return obs.new_zeros(())
        rows = torch.nonzero(strict).squeeze(1)
        side = labels[rows].long()  # the preferred segment of each pair
        o, a = obs[rows, side], actions[rows, side]  # (k, L, ·)
        steps = torch.randint(0, o.shape[1], (len(rows), self.edits))
        pick = torch.arange(len(rows))[:, None]
        s, a_pref = o[pick, steps], a[pick, steps]  # (k, edits, ·)
        a_cf = (a_pref + self.scale * (2 * torch.rand_like(a_pref) - 1)).clamp(-1, 1)
        gap = model(s, a_cf) - model(s, a_pref)  # (E, k, edits)
        return self.weight * nn.functional.softplus(gap).mean()
