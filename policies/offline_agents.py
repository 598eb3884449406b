"""Five offline-RL agents on one interface: BC, TD3+BC, IQL, CQL and the Decision Transformer.

``train_agent(algo, data)`` learns from ``Transitions`` (arrays, or a dataset in our LeRobot layout through
``Transitions.from_dataset``) and returns a policy that is driven the same way whatever the algorithm::

    actions = policy.act(obs)       # obs (n, O) → actions (n, A), in the data's units
    policy.reward(rewards)          # rewards (n,) the actions earned (the Decision Transformer conditions on it)
    policy.reset(env_ids)           # where episodes ended (None: all)

``save_agent``/``load_agent`` write and read any of them as an embody checkpoint (safetensors + JSON). The
Decision Transformer is asked for ``target_return`` = the best episode return in its data unless told otherwise.

Shapes: ``N`` transitions, ``O`` observation size, ``A`` action size, ``n`` envs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .decision_transformer import (
    DecisionTransformer,
    DecisionTransformerConfig,
    episodes_from_transitions,
    train_decision_transformer,
)
from .offline import OfflineAgent, OfflineRLConfig, train_offline
from .trajectory import load_model, save_model

AGENTS = ("bc", "td3bc", "iql", "cql", "dt")


@dataclass
class Transitions:
    """Transitions in episode order: obs (N, O), actions (N, A), rewards (N,), next_obs (N, O), dones (N,) (a
    terminal: no value is bootstrapped past it) and timeouts (N,) (the episode was cut there, by a time limit or
    the end of a recording; None: none was). Both end an episode for the Decision Transformer."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    dones: np.ndarray
    timeouts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.obs)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """(obs, actions, rewards, next_obs, dones), as ``train_offline`` takes them."""
        return self.obs, self.actions, self.rewards, self.next_obs, self.dones

    def episodes(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(obs, actions, rewards) per episode, split at dones and timeouts."""
        ends = np.asarray(self.dones, bool) | (False if self.timeouts is None else np.asarray(self.timeouts, bool))
        return episodes_from_transitions(self.obs, self.actions, self.rewards, ends)

    def select(self, rows: np.ndarray) -> Transitions:
        """The transitions at ``rows`` (indices or a boolean mask)."""
        return Transitions(*(x[rows] for x in self.arrays()), None if self.timeouts is None else self.timeouts[rows])

    @classmethod
    def from_dataset(
        cls,
        dataset,
        obs_key: str = "observation.state",
        action_key: str = "action",
        reward_key: str = "next.reward",
        done_key: str = "next.done",
    ) -> Transitions:
        """Every episode of a dataset in our LeRobot layout (a folder or a loaded ``Dataset``). next_obs is the
        following frame's observation within the episode; an episode's last step repeats its obs as next_obs and
        is a timeout unless ``done_key`` marks it done. Raises ``DatasetFormatError`` naming the dataset and a
        missing key."""
        from embody.datasets.format import Dataset, DatasetFormatError, load

        ds = dataset if isinstance(dataset, Dataset) else load(dataset)
        for key in (obs_key, action_key, reward_key):
            if key not in ds.features or ds.features[key]["dtype"] == "video":
                raise DatasetFormatError(ds.root, f"{key!r} is not a state feature; features: {sorted(ds.features)}")
        obs = ds.column(obs_key).astype(np.float32).reshape(ds.num_frames, -1)
        last = np.zeros(len(obs), bool)
        last[ds.episode_bounds[1] - 1] = True
        dones = ds.column(done_key).reshape(-1).astype(bool) if done_key in ds.features else np.zeros(len(obs), bool)
        next_obs = np.where(last[:, None], obs, np.roll(obs, -1, axis=0))
        return cls(
            obs,
            ds.column(action_key).astype(np.float32).reshape(len(obs), -1),
            ds.column(reward_key).astype(np.float32).reshape(-1),
            next_obs,
            dones,
            last & ~dones,
        )


def agent_config(algo: str, overrides: dict | None = None):
    """The config of ``algo`` (``AGENTS``) with ``overrides`` (field → value) applied; an unknown field or a value
    of the wrong type raises ``ConfigError`` (a ValueError) naming it."""
    if algo not in AGENTS:
        raise ValueError(f"unknown offline agent {algo!r}; valid: {', '.join(AGENTS)}")
    from embody.config import ConfigError, apply_overrides

    cfg = DecisionTransformerConfig() if algo == "dt" else OfflineRLConfig(algo=algo)
    try:  # typed as the config's fields (a list for hidden, a float for lr)
        return apply_overrides(cfg, {k: v for k, v in (overrides or {}).items() if k != "algo"})
    except ConfigError as e:
        raise ConfigError(f"{algo}: {e}") from None


def train_agent(
    algo: str, data: Transitions, overrides: dict | None = None, action_low=None, action_high=None
) -> OfflineAgent | DecisionTransformer:
    """Train ``algo`` (one of ``AGENTS``) on ``data`` with its config's ``overrides`` (e.g. ``steps``, ``seed``).
    Actions are scaled from ``action_low``/``action_high`` (default: the data's bounds; the Decision Transformer
    always uses the data's)."""
    cfg = agent_config(algo, overrides)
    if algo != "dt":
        return train_offline(*data.arrays(), cfg, action_low=action_low, action_high=action_high)
    episodes = data.episodes()
    if "target_return" not in (overrides or {}):
        cfg.target_return = float(max(e[2].sum() for e in episodes))
    cfg.max_episode_steps = max(cfg.max_episode_steps, max(len(e[0]) for e in episodes))
    return train_decision_transformer(episodes, cfg)


def save_agent(directory: str | Path, agent, meta: dict | None = None) -> Path:
    """Write any agent of ``train_agent`` as an embody checkpoint directory, atomically."""
    return save_model(directory, agent, meta)


def load_agent(directory: str | Path, device: str = "cpu") -> OfflineAgent | DecisionTransformer:
    """Load an agent saved by ``save_agent`` (eval mode), whichever algorithm it is; anything else raises
    ``CheckpointError`` naming the file."""
    from .checkpoint import CheckpointError, load_checkpoint

    cls = type(load_checkpoint(directory, device=device).policy)
    if cls not in (OfflineAgent, DecisionTransformer):
        raise CheckpointError(f"{directory} is a checkpoint of {cls.__name__}, not of an offline agent ({AGENTS})")
    return load_model(directory, cls, device)


def algo_of(agent) -> str:
    """The ``AGENTS`` name of a trained agent."""
    return "dt" if isinstance(agent, DecisionTransformer) else agent.config.algo
