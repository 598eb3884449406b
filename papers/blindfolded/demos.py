"""Demonstrations on disk: one ``.npz`` per (information level, seed), validated on load.

Fields: ``obs/<name>`` arrays (all steps of all episodes concatenated, leading axis N), ``actions`` (N, ...),
``episode_lengths`` (E,) and ``meta`` (a JSON string: domain, level, information bits, tasks, the
observation spec ``{name: per-step shape}``). Loading refuses a file with a missing field, an
observation shape that differs from the spec expected (or the one the file states), an empty episode,
no episodes, or lengths that do not add up, with one ``DatasetFormatError`` naming the file and problem.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embody.datasets.format import DatasetFormatError
from embody.files import write_atomic

REQUIRED = ("actions", "episode_lengths", "meta")


@dataclass
class Demos:
    obs: dict[str, np.ndarray]  # name → (N, *shape)
    actions: np.ndarray  # (N, ...)
    episode_lengths: np.ndarray  # (E,) int
    meta: dict = field(default_factory=dict)

    @property
    def obs_spec(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(int(s) for s in v.shape[1:]) for k, v in self.obs.items()}

    def episodes(self) -> list[tuple[dict[str, np.ndarray], np.ndarray]]:
        """Per episode: its observation arrays and actions."""
        ends = np.cumsum(self.episode_lengths)
        starts = ends - self.episode_lengths
        return [({k: v[s:e] for k, v in self.obs.items()}, self.actions[s:e]) for s, e in zip(starts, ends)]

    def first(self, m: int) -> "Demos":
        """The first ``m`` episodes (the first m demonstrated tasks)."""
        if not 1 <= m <= len(self.episode_lengths):
            raise ValueError(f"asked for {m} episodes, the demonstrations hold {len(self.episode_lengths)}")
        n = int(self.episode_lengths[:m].sum())
        meta = dict(self.meta)
        if "tasks" in meta:
            meta["tasks"] = list(meta["tasks"])[:m]
        return Demos({k: v[:n] for k, v in self.obs.items()}, self.actions[:n], self.episode_lengths[:m], meta)


def from_episodes(obs_episodes: list[dict[str, np.ndarray]], action_episodes: list[np.ndarray],
                  meta: dict | None = None) -> Demos:
    if not obs_episodes:
        raise ValueError("no episodes to store")
    names = sorted(obs_episodes[0])
    obs = {k: np.concatenate([e[k] for e in obs_episodes]) for k in names}
    meta = dict(meta or {})
    lengths = np.array([len(a) for a in action_episodes], dtype=np.int64)
    demos = Demos(obs, np.concatenate(action_episodes), lengths, meta)
    demos.meta["obs_spec"] = {k: list(v) for k, v in demos.obs_spec.items()}
    return demos


def save(demos: Demos, path: str | Path) -> Path:
    arrays = {f"obs/{k}": v for k, v in demos.obs.items()}
    arrays.update(actions=demos.actions, episode_lengths=demos.episode_lengths,
                  meta=np.array(json.dumps(demos.meta, default=float)))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return write_atomic(path, buf.getvalue())


def load(path: str | Path, obs_spec: dict[str, tuple[int, ...]] | None = None) -> Demos:
    """Read and validate; ``obs_spec`` (name → per-step shape) is what the caller's domain produces."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such demonstrations file")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:  # a truncated or foreign file
        raise DatasetFormatError(path, f"not a readable .npz demonstrations file ({e})") from e
    missing = [k for k in REQUIRED if k not in data]
    obs = {k[4:]: v for k, v in data.items() if k.startswith("obs/")}
    if not obs:
        missing.append("obs/<name>")
    if missing:
        raise DatasetFormatError(path, f"missing field(s) {', '.join(missing)}; a demonstrations file holds "
                                 f"obs/<name>, actions, episode_lengths and meta")
    try:
        meta = json.loads(str(data["meta"]))
    except json.JSONDecodeError as e:
        raise DatasetFormatError(path, f"meta is not JSON ({e})") from e
    lengths = np.asarray(data["episode_lengths"])
    if lengths.ndim != 1 or len(lengths) == 0:
        raise DatasetFormatError(path, "no episodes (episode_lengths is empty)")
    if (lengths <= 0).any():
        bad = [int(i) for i in np.nonzero(lengths <= 0)[0]]
        raise DatasetFormatError(path, f"empty episode(s) {bad[:10]}: every episode needs at least one step")
    n = int(lengths.sum())
    for name, arr in [*(("obs/" + k, v) for k, v in obs.items()), ("actions", data["actions"])]:
        if len(arr) != n:
            raise DatasetFormatError(path, f"{name} has {len(arr)} steps, episode_lengths add up to {n}")
    demos = Demos(obs, data["actions"], lengths.astype(np.int64), meta)
    stated = {k: tuple(v) for k, v in meta.get("obs_spec", {}).items()}
    for expected, what in ((stated, "the spec the file states"), (obs_spec, "the expected spec")):
        if expected is None or not expected:
            continue
        expected = {k: tuple(v) for k, v in expected.items()}
        if demos.obs_spec != expected:
            raise DatasetFormatError(path, f"observation spec mismatch: the file holds {demos.obs_spec}, "
                                     f"{what} is {expected}")
    return demos
