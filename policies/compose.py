"""One policy from several: each part reads a block of the observation and writes a block of the action.

ALMI trains a lower-body (locomotion) and an upper-body (motion tracking) policy against each other; deployed,
they act as one whole-body policy. The parts and their column blocks are data, not functions, so the composite
is saved and loaded like any policy: ``checkpoint.json`` names each part's class, constructor arguments and
blocks, and the weights sit under ``parts.<i>.`` in ``model.safetensors``.
"""

from __future__ import annotations

import torch

from embody.policies.classes import POLICY_CLASSES


class CompositePolicy(torch.nn.Module):
    """``layout``: one dict per part, ``{"class": a POLICY_CLASSES name, "kwargs": its init_kwargs(), "obs": [start,
    stop], "actions": [start, stop]}``. Part i acts on ``obs[:, start:stop]`` (n, o_i) and fills ``action[:,
    start:stop]``; the action blocks must tile [0, a) exactly once. obs (n, o) → action (n, a)."""

    def __init__(self, layout: list[dict]):
        super().__init__()
        self.layout = [
            {"class": p["class"], "kwargs": p["kwargs"], "obs": list(p["obs"]), "actions": list(p["actions"])}
            for p in layout
        ]
        blocks = sorted(tuple(p["actions"]) for p in self.layout)
        edges = [0] + [b for _, b in blocks]
        if not blocks or any(start != edges[i] or stop <= start for i, (start, stop) in enumerate(blocks)):
            raise ValueError(f"the parts' action blocks {blocks} must tile [0, a) exactly once")
        self.parts = torch.nn.ModuleList(POLICY_CLASSES.get(p["class"]).from_kwargs(p["kwargs"]) for p in self.layout)
        self.obs_size = max(p["obs"][1] for p in self.layout)
        self.action_size = edges[-1]

    @classmethod
    def of(cls, parts: list[tuple[torch.nn.Module, tuple[int, int], tuple[int, int]]]) -> CompositePolicy:
        """A composite of trained policies: (policy, observation block, action block) per part, weights copied."""
        layout = [
            {"class": type(p).__name__, "kwargs": p.init_kwargs(), "obs": list(o), "actions": list(a)}
            for p, o, a in parts
        ]
        out = cls(layout)
        for mine, (policy, _, _) in zip(out.parts, parts):
            mine.load_state_dict(policy.state_dict())
        return out

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> CompositePolicy:
        return cls(kwargs["layout"])

    def init_kwargs(self) -> dict:
        return {"layout": self.layout}

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """obs (n, o) → action (n, a), each block from its part; same dtype and device as ``obs``."""
        action = torch.zeros(obs.shape[0], self.action_size, dtype=obs.dtype, device=obs.device)
        for part, p in zip(self.parts, self.layout):
            (o0, o1), (a0, a1) = p["obs"], p["actions"]
            action[:, a0:a1] = part.act(obs[:, o0:o1], deterministic=deterministic)
        return action

    def reset(self, env_ids: torch.Tensor | None = None) -> None:
        for part in self.parts:
            part.reset(env_ids)
