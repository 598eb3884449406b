"""Driving policies: act(Observation) → action (a meta-action name or [acc, steering]), one ego at a time.

expert      highway-env's IDM (speed, car-following) and MOBIL (lane changes) for the ego, read from
            the simulator's privileged state (sim.expert_action); the demonstrator for behavior cloning
idle        the IDLE meta-action: keep the lane and the current target speed
constant    [0, 0]: no acceleration, wheels straight
RUN         an embody checkpoint (a run directory holding checkpoint/, or the checkpoint directory)
            whose policy maps Observation.flat() (obs_size 6 + 7K) to [-1, 1]² (denormalize_action)
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from .base import Action, DrivingError, DrivingSim, Observation, denormalize_action


class DrivingPolicy(Protocol):
    """What the episode runner drives with: ``act`` maps an Observation to an Action, ``reset`` starts an episode."""

    def act(self, obs: Observation) -> Action: ...

    def reset(self) -> None: ...


class ExpertPolicy:
    """The IDM/MOBIL expert as a policy; privileged: it reads ``sim``'s state, not ``obs``."""

    def __init__(self, sim: DrivingSim):
        self.sim = sim

    def act(self, obs: Observation) -> np.ndarray:
        """The sim's privileged expert action (2,)."""
        return self.sim.expert_action()

    def reset(self) -> None:
        pass


class ConstantPolicy:
    """The same action at every step (a meta-action name, an index, or a continuous (2,) action)."""

    def __init__(self, action: Action):
        self.action = action

    def act(self, obs: Observation) -> Action:
        return self.action

    def reset(self) -> None:
        pass


class CheckpointPolicy:
    """An embody checkpoint driving through the flat kinematic features, deterministic."""

    def __init__(self, path: str | Path, obs_size: int):
        import torch

        from embody.policies.checkpoint import CheckpointError, load_checkpoint

        path = Path(path)
        directory = path / "checkpoint" if (path / "checkpoint").is_dir() else path
        ckpt = load_checkpoint(directory)
        got = (ckpt.spec.get("obs_size"), ckpt.spec.get("action_size"))
        if got != (obs_size, 2):
            raise CheckpointError(
                f"{directory}: the policy takes {got[0]} observations and gives {got[1]} actions; "
                f"driving needs {obs_size} (Observation.flat) and 2 ([acc, steering] in [-1, 1])"
            )
        self.policy, self._torch = ckpt.policy.eval(), torch

    def act(self, obs: Observation) -> np.ndarray:
        """The policy's deterministic action on ``obs.flat()``, denormalized to a continuous action (2,)."""
        with self._torch.no_grad():
            a = self.policy.act(self._torch.as_tensor(obs.flat())[None], deterministic=True)
        return denormalize_action(np.asarray(a, dtype=np.float64).reshape(-1))

    def reset(self) -> None:
        """Clear the policy's recurrent state, if it has one."""
        if hasattr(self.policy, "reset"):
            self.policy.reset(None)


def make_policy(spec: str, sim: DrivingSim) -> DrivingPolicy:
    """``spec``: expert, idle, constant, or a checkpoint path (see the module docstring)."""
    if spec == "expert":
        return ExpertPolicy(sim)
    if spec == "idle":
        return ConstantPolicy("IDLE")
    if spec == "constant":
        return ConstantPolicy(np.zeros(2))
    if not Path(spec).exists():
        raise DrivingError(f"--policy {spec!r}: neither expert, idle, constant nor an existing run directory")
    return CheckpointPolicy(spec, len(sim.observe().flat()))
