"""Demonstrations: (observation, action) pairs in time order, the one demonstrations type.

Rows are ``N`` consecutive steps of episodes laid end to end; ``episode_starts`` marks the first
step of every episode (or of every segment, where rollouts were cut), so that a recurrent policy
knows where its state must be zeroed and ``episodes()`` / ``first(m)`` know where one ends.
Observations may be named parts laid side by side (``obs_parts``: name → per-step shape and the
dtype each is given back as), so that an image and a heading, or a dataset's features, travel in
one float32 row. Sources: rollouts (``from_rollouts``), arrays (``from_arrays``, ``from_episodes``),
a dataset in our LeRobot layout (``from_dataset``: what ``embody record``, deploy ``--record`` and
teleop write), a file (``load``). Saved as one safetensors file whose header metadata holds the
JSON description. Never pickle.

Shapes: N steps, E episodes, o = sum of the obs parts' sizes, a the action size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from embody import exits
from embody.files import write_atomic

FORMAT, FORMAT_VERSION = "embody.demonstrations", 1  # obs_parts / action_part: optional header keys of version 1


class DatasetError(ValueError):
    """A demonstrations file is missing, damaged, foreign or too new."""

    exit_code = exits.INPUT


@dataclass(frozen=True)
class Part:
    """A named piece of a row: ``shape`` per step (``()`` a scalar), given back as ``dtype``.

    Rows hold float32, which is exact for float32 and for integers up to 2**24 (uint8 images,
    int8 headings, discrete actions); a float64 part comes back rounded to float32.
    """

    shape: tuple[int, ...] = ()
    dtype: str = "float32"

    @property
    def size(self) -> int:
        """Values per step: the product of ``shape`` (1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def to_json(self) -> dict:
        """The form kept in a demonstrations file's header: ``{"shape": [...], "dtype": "..."}``."""
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, obj) -> Part:
        return cls(tuple(int(s) for s in obj["shape"]), str(np.dtype(obj["dtype"])))

    @classmethod
    def of(cls, array: np.ndarray) -> Part:
        """The per-step part of ``array`` (N, *shape)."""
        return cls(tuple(int(s) for s in array.shape[1:]), str(array.dtype))


@dataclass
class Demonstrations:
    """(observation, action) rows in time order with episode boundaries; see the module docstring.

    obs (N, o) float32, actions (N, a) float32, episode_starts (N,) bool (row 0 is always made a
    start). Construction raises ValueError when the shapes disagree or ``obs_parts`` /
    ``action_part`` do not add up to o / a.
    """

    obs: torch.Tensor  # (N, o) float32
    actions: torch.Tensor  # (N, a) float32
    episode_starts: torch.Tensor  # (N,) bool
    meta: dict = field(default_factory=dict)
    obs_parts: dict[str, Part] = field(default_factory=dict)  # name → part, side by side along o; {}: one unnamed
    action_part: Part | None = None  # the actions' own per-step shape and dtype; None: (a,) float32

    def __post_init__(self) -> None:
        self.obs = torch.as_tensor(self.obs, dtype=torch.float32)
        self.actions = torch.as_tensor(self.actions, dtype=torch.float32)
        self.episode_starts = torch.as_tensor(self.episode_starts, dtype=torch.bool)
        n = self.obs.shape[0]
        if (
            self.obs.ndim != 2
            or self.actions.ndim != 2
            or self.actions.shape[0] != n
            or self.episode_starts.shape != (n,)
        ):
            raise ValueError(
                f"inconsistent shapes: obs {tuple(self.obs.shape)}, actions "
                f"{tuple(self.actions.shape)}, episode_starts {tuple(self.episode_starts.shape)}"
            )
        if self.obs_parts and sum(p.size for p in self.obs_parts.values()) != self.obs.shape[1]:
            raise ValueError(f"observation parts {self.parts_spec()} do not add up to the obs size {self.obs.shape[1]}")
        if self.action_part is not None and self.action_part.size != self.actions.shape[1]:
            raise ValueError(
                f"action part {self.action_part.shape} does not match the action size {self.actions.shape[1]}"
            )
        if n and not self.episode_starts[0]:  # a segment always starts the data
            self.episode_starts = self.episode_starts.clone()
            self.episode_starts[0] = True

    def __len__(self) -> int:
        return self.obs.shape[0]

    @property
    def obs_size(self) -> int:
        return self.obs.shape[1]

    @property
    def action_size(self) -> int:
        return self.actions.shape[1]

    @staticmethod
    def concat(parts: list[Demonstrations]) -> Demonstrations:
        """Segments of every part, in order (the first row of each part starts a segment); the first
        part's meta; the observation/action parts where all agree (else unnamed)."""
        if not parts:
            return Demonstrations(torch.zeros(0, 0), torch.zeros(0, 0), torch.zeros(0, dtype=torch.bool))
        same = all((p.obs_parts, p.action_part) == (parts[0].obs_parts, parts[0].action_part) for p in parts)
        return Demonstrations(
            torch.cat([p.obs for p in parts]),
            torch.cat([p.actions for p in parts]),
            torch.cat([p.episode_starts for p in parts]),
            dict(parts[0].meta),
            dict(parts[0].obs_parts) if same else {},
            parts[0].action_part if same else None,
        )

    # -- episodes ----------------------------------------------------------------------------
    @property
    def episode_lengths(self) -> np.ndarray:
        """(E,) int64 steps of each episode (segment), in order."""
        starts = np.flatnonzero(self.episode_starts.numpy())
        return np.diff(np.r_[starts, len(self)]).astype(np.int64)

    def _rows(self, lo: int, hi: int, meta: dict) -> Demonstrations:
        return Demonstrations(
            self.obs[lo:hi],
            self.actions[lo:hi],
            self.episode_starts[lo:hi],
            meta,
            dict(self.obs_parts),
            self.action_part,
        )

    def episodes(self) -> Iterator[Demonstrations]:
        """Each episode as its own Demonstrations (views of these rows; meta empty)."""
        ends = np.cumsum(self.episode_lengths)
        for lo, hi in zip(ends - self.episode_lengths, ends):
            yield self._rows(int(lo), int(hi), {})

    def first(self, m: int) -> Demonstrations:
        """The first ``m`` episodes (views of these rows; a shallow copy of meta)."""
        lengths = self.episode_lengths
        if not 1 <= m <= len(lengths):
            raise ValueError(f"asked for {m} episodes, the demonstrations hold {len(lengths)}")
        return self._rows(0, int(lengths[:m].sum()), dict(self.meta))

    # -- named parts -------------------------------------------------------------------------
    def parts_spec(self) -> dict[str, tuple[int, ...]]:
        """{name: per-step shape} of the observation parts ({"obs": (o,)} when unnamed)."""
        return {k: p.shape for k, p in self.obs_parts.items()} or {"obs": (self.obs_size,)}

    def obs_arrays(self) -> dict[str, np.ndarray]:
        """{name: (N, *shape)} in each part's dtype ({"obs": (N, o) float32} when unnamed)."""
        flat = self.obs.numpy()
        if not self.obs_parts:
            return {"obs": flat.copy()}
        out, lo = {}, 0
        for name, p in self.obs_parts.items():
            out[name] = flat[:, lo : lo + p.size].reshape(len(self), *p.shape).astype(p.dtype)
            lo += p.size
        return out

    def action_array(self) -> np.ndarray:
        """(N, *shape) in the action part's dtype ((N, a) float32 without one)."""
        a = self.actions.numpy()
        p = self.action_part
        return a.copy() if p is None else a.reshape(len(self), *p.shape).astype(p.dtype)

    # -- collection --------------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        obs: Mapping[str, np.ndarray] | np.ndarray,
        actions: np.ndarray,
        episode_lengths: Sequence[int] | np.ndarray | None = None,
        meta: dict | None = None,
    ) -> Demonstrations:
        """Named observation arrays {name: (N, *shape)} (side by side, in that order; a plain (N, o)
        array is one unnamed part), actions (N, *shape), ``episode_lengths`` (E,) adding up to N
        (default one episode). ``meta`` is kept as given (not copied)."""
        named = isinstance(obs, Mapping)
        arrays = {k: np.asarray(v) for k, v in (obs.items() if named else [("obs", obs)])}
        actions = np.asarray(actions)
        n = len(actions)
        if any(len(v) != n for v in arrays.values()):
            raise ValueError(f"observations have {[len(v) for v in arrays.values()]} steps, actions {n}")
        lengths = np.asarray([n] if episode_lengths is None else episode_lengths, dtype=np.int64)
        if lengths.ndim != 1 or (lengths <= 0).any() or int(lengths.sum()) != n:
            raise ValueError(f"episode lengths {lengths.tolist()[:10]} must be positive and add up to {n} steps")
        starts = np.zeros(n, dtype=bool)
        starts[np.r_[0, np.cumsum(lengths)[:-1]]] = True
        flat = (
            np.concatenate([v.reshape(n, -1).astype(np.float32) for v in arrays.values()], axis=1)
            if arrays
            else np.zeros((n, 0), np.float32)
        )
        parts = {k: Part.of(v) for k, v in arrays.items()} if named else {}
        a_part = Part.of(actions)
        return cls(
            torch.from_numpy(flat),
            torch.from_numpy(actions.reshape(n, -1).astype(np.float32)),
            torch.from_numpy(starts),
            {} if meta is None else meta,
            parts,
            None if a_part == Part((a_part.size,)) else a_part,
        )

    @classmethod
    def from_episodes(
        cls,
        obs_episodes: Sequence[Mapping[str, np.ndarray] | np.ndarray],
        action_episodes: Sequence[np.ndarray],
        meta: dict | None = None,
    ) -> Demonstrations:
        """Per episode: its observations ({name: (T, *shape)} or (T, o)) and actions (T, *shape)."""
        if not obs_episodes or len(obs_episodes) != len(action_episodes):
            raise ValueError(
                f"{len(obs_episodes)} observation and {len(action_episodes)} action episodes: "
                "need the same number, at least one"
            )
        first = obs_episodes[0]
        obs = (
            {k: np.concatenate([e[k] for e in obs_episodes]) for k in first}
            if isinstance(first, Mapping)
            else np.concatenate(obs_episodes)
        )
        return cls.from_arrays(obs, np.concatenate(action_episodes), [len(a) for a in action_episodes], meta)

    @classmethod
    def from_dataset(
        cls,
        dataset,
        obs_keys: Sequence[str] | Mapping[str, str] = ("observation.state",),
        action_key: str = "action",
        episodes: Sequence[int] | None = None,
    ) -> Demonstrations:
        """Episodes of a dataset in our LeRobot layout (a root folder or a loaded
        ``embody.datasets.Dataset``), one segment each: obs = the ``obs_keys`` features side by side,
        each a named part ({part name: feature key} renames them), actions = ``action_key``'s, exact
        as recorded (float32). ``episodes``: dataset episode indices, in that order (default all).
        ``embody record`` datasets: the policy's own observation is ``embody.observation``.
        meta: dataset (its resolved path), dataset_episodes, fps, obs_keys, action_key.

        Raises ``DatasetFormatError`` naming the dataset for a folder that is not one, a feature it
        lacks or a video feature; ValueError naming it for an episode out of range or none at all."""
        from embody.datasets.format import Dataset, DatasetFormatError, load

        ds = dataset if isinstance(dataset, Dataset) else load(dataset)
        keys = dict(obs_keys) if isinstance(obs_keys, Mapping) else {k: k for k in obs_keys}
        for k in [*keys.values(), action_key]:
            ft = ds.features.get(k)
            if ft is None or ft["dtype"] == "video":
                what = "is a video (demonstrations hold state features only)" if ft else "is not one of its features"
                raise DatasetFormatError(ds.root, f"{k!r} {what}; features: {sorted(ds.features)}")
        selected = list(range(ds.num_episodes)) if episodes is None else [int(i) for i in episodes]
        bad = [i for i in selected if not 0 <= i < ds.num_episodes]
        if bad or not selected:
            raise ValueError(
                f"{ds.root}: "
                + (
                    f"episode {bad[0]} out of range (the dataset has {ds.num_episodes})"
                    if bad
                    else "no episodes to read"
                )
            )
        lo, hi = ds.episode_bounds
        rows = np.concatenate([np.arange(lo[i], hi[i]) for i in selected])
        meta = {
            "dataset": str(Path(ds.root).resolve()),
            "dataset_episodes": selected,
            "fps": ds.fps,
            "obs_keys": keys,
            "action_key": action_key,
        }
        return cls.from_arrays(
            {name: ds.column(k)[rows] for name, k in keys.items()},
            ds.column(action_key)[rows],
            [int(hi[i] - lo[i]) for i in selected],
            meta,
        )

    # -- collection (rollouts) ----------------------------------------------------------------
    @classmethod
    def from_rollouts(
        cls, env, expert, steps: int, expert_obs: str = "obs", noise_std: float = 0.0, seed: int = 0
    ) -> Demonstrations:
        """Roll out ``expert`` for ``steps`` steps in each of ``env``'s n envs (N = n * steps).

        ``expert`` is a Policy (its deterministic ``act``) or a callable (n, e) → (n, a) on
        torch tensors; ``expert_obs`` is "obs" or "privileged" (obs concatenated with the
        privileged obs). Labels are the expert's actions; with ``noise_std`` > 0 the env is
        driven by the labels plus Gaussian noise, to visit states the expert would not.
        """
        act = as_action_fn(expert)
        gen = torch.Generator().manual_seed(seed)
        obs, priv = env.reset()
        reset_policy(expert, None)
        rows: dict[str, list] = {"obs": [], "actions": [], "starts": []}
        starts = np.ones(env.n_envs, dtype=bool)
        returns: list[float] = []
        for _ in range(steps):
            label = act(expert_input(obs, priv, expert_obs))
            rows["obs"].append(torch.as_tensor(obs, dtype=torch.float32))
            rows["actions"].append(label)
            rows["starts"].append(torch.as_tensor(starts))
            action = label + noise_std * torch.randn(label.shape, generator=gen) if noise_std else label
            obs, _, terminated, truncated, info = env.step(action.numpy())
            priv, starts = info.privileged_obs, terminated | truncated
            reset_policy(expert, starts)
            returns.extend(info.episode_return.tolist())
        return cls.from_time_major(
            torch.stack(rows["obs"]),
            torch.stack(rows["actions"]),
            torch.stack(rows["starts"]),
            {"episode_returns": returns},
        )

    @classmethod
    def from_time_major(
        cls, obs: torch.Tensor, actions: torch.Tensor, starts: torch.Tensor, meta: dict | None = None
    ) -> Demonstrations:
        """obs (T, n, o), actions (T, n, a), starts (T, n) → env-major rows (N = n * T),
        each env's T steps one segment."""
        starts = starts.clone()
        starts[0] = True
        flat = lambda x: x.transpose(0, 1).reshape(-1, *x.shape[2:])  # noqa: E731
        return cls(flat(obs), flat(actions), flat(starts), meta or {})

    # -- files -------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write one safetensors file atomically (``embody.files.write_atomic``)."""
        from safetensors.torch import save

        header = {"format": FORMAT, "format_version": FORMAT_VERSION, "meta": self.meta}
        if self.obs_parts:
            header["obs_parts"] = {k: p.to_json() for k, p in self.obs_parts.items()}
        if self.action_part is not None:
            header["action_part"] = self.action_part.to_json()
        data = save(
            {
                "obs": self.obs.contiguous(),
                "actions": self.actions.contiguous(),
                "episode_starts": self.episode_starts.contiguous(),
            },
            metadata={"embody": json.dumps(header, default=str)},
        )
        return write_atomic(path, data)

    @classmethod
    def load(cls, path: str | Path) -> Demonstrations:
        """A file ``save`` wrote (any embody's: the parts are optional). A dataset folder is read
        with ``from_dataset``, which says which features are the observation."""
        from safetensors import SafetensorError, safe_open

        path = Path(path)
        if path.is_dir():
            raise DatasetError(
                f"{path} is a folder, not a demonstrations file (a dataset? read it with Demonstrations.from_dataset)"
            )
        if not path.is_file():
            raise DatasetError(f"{path}: no such demonstrations file")
        try:
            with safe_open(str(path), framework="pt") as f:
                header = json.loads((f.metadata() or {}).get("embody", "null"))
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except (SafetensorError, OSError, json.JSONDecodeError) as e:
            raise DatasetError(f"cannot read {path}: {e}") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise DatasetError(f"{path} is not an embody demonstrations file")
        if header.get("format_version") != FORMAT_VERSION:
            raise DatasetError(
                f"{path}: format version {header.get('format_version')!r} is not supported "
                f"(this embody reads version {FORMAT_VERSION})"
            )
        try:
            parts = {str(k): Part.from_json(v) for k, v in (header.get("obs_parts") or {}).items()}
            action = header.get("action_part")
            return cls(
                tensors["obs"],
                tensors["actions"],
                tensors["episode_starts"],
                header.get("meta", {}),
                parts,
                None if action is None else Part.from_json(action),
            )
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            raise DatasetError(f"{path}: {e}") from None


# -- helpers shared with distillation ---------------------------------------------------------
def as_action_fn(policy) -> Callable[[torch.Tensor], torch.Tensor]:
    """A Policy's deterministic ``act``, or the callable itself, under no_grad: CPU tensors
    (n, e) → CPU float32 (n, a), moving the input to the policy's device and back."""
    fn = (lambda x: policy.act(x, deterministic=True)) if hasattr(policy, "act") else policy
    param = next(policy.parameters(), None) if isinstance(policy, torch.nn.Module) else None
    device = param.device if param is not None else torch.device("cpu")

    @torch.no_grad()
    def act(x: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(fn(x.to(device))).float().cpu()

    return act


def reset_policy(policy, done: np.ndarray | None) -> None:
    """Zero a recurrent policy's state where ``done`` (n,) is set (all envs when None)."""
    if not hasattr(policy, "reset"):
        return
    if done is None:
        policy.reset(None)
    elif done.any():
        policy.reset(torch.as_tensor(np.flatnonzero(done)))


def expert_input(obs: np.ndarray, priv: np.ndarray, which: str) -> torch.Tensor:
    """obs (n, o) for "obs"; cat(obs, privileged) (n, o + p) for "privileged"."""
    if which not in ("obs", "privileged"):
        raise ValueError(f"expert/teacher obs must be 'obs' or 'privileged', not {which!r}")
    x = np.concatenate([obs, priv], axis=-1) if which == "privileged" else obs
    return torch.as_tensor(x, dtype=torch.float32)
