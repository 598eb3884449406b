"""The study's demonstrations: a view of the core ``Demonstrations``, and its ``.npz`` file format.

``Demos`` holds an ``embody.policies.datasets.Demonstrations`` (``.data``; its named observation
parts are the study's observation spec) and shows it as the study reads it: ``obs`` {name: (N, *shape)}
in the recorded dtypes, ``actions`` (N, ...), ``episode_lengths`` (E,), ``meta``. Episode bookkeeping
(``episodes``, ``first``) and reading a recorded dataset (``Demonstrations.from_dataset``) are the core's.

File fields (``.npz``, what ``save`` writes and every earlier study wrote): ``obs/<name>`` arrays (all
steps of all episodes concatenated, leading axis N), ``actions`` (N, ...), ``episode_lengths`` (E,) and
``meta`` (a JSON string: domain, level, information bits, tasks, the observation spec ``{name: per-step
shape}``). Loading refuses a file with a missing field, an observation shape that differs from the spec
expected (or the one the file states), an empty episode, no episodes, or lengths that do not add up, with
one ``DatasetFormatError`` naming the file and problem. ``load`` also reads a core demonstrations file
(``.safetensors``, ``Demonstrations.save``'s).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from embody.datasets.format import DatasetFormatError
from embody.files import write_atomic
from embody.policies.datasets import DatasetError, Demonstrations

REQUIRED = ("actions", "episode_lengths", "meta")


class Demos:
    """A view of core ``Demonstrations`` (``data``; shared, not copied) in the study's terms."""

    def __init__(
        self, obs: dict[str, np.ndarray], actions: np.ndarray, episode_lengths: np.ndarray, meta: dict | None = None
    ):
        """obs {name: (N, *shape)}, actions (N, ...), episode_lengths (E,) int; ``meta`` kept as given."""
        self.data = Demonstrations.from_arrays(obs, actions, episode_lengths, {} if meta is None else meta)

    @classmethod
    def from_demonstrations(cls, data: Demonstrations) -> Demos:
        """The study's view of ``data``; its meta gains the ``obs_spec`` the file format states."""
        view = cls.__new__(cls)
        view.data = data
        data.meta.setdefault("obs_spec", {k: list(v) for k, v in view.obs_spec.items()})
        return view

    def to_demonstrations(self) -> Demonstrations:
        return self.data

    @property
    def obs(self) -> dict[str, np.ndarray]:  # name → (N, *shape)
        return self.data.obs_arrays()

    @property
    def actions(self) -> np.ndarray:  # (N, ...)
        return self.data.action_array()

    @property
    def episode_lengths(self) -> np.ndarray:  # (E,) int64
        return self.data.episode_lengths

    @property
    def meta(self) -> dict:
        return self.data.meta

    @property
    def obs_spec(self) -> dict[str, tuple[int, ...]]:
        return self.data.parts_spec()

    def episodes(self) -> list[tuple[dict[str, np.ndarray], np.ndarray]]:
        """Per episode: its observation arrays and actions."""
        return [(e.obs_arrays(), e.action_array()) for e in self.data.episodes()]

    def first(self, m: int) -> Demos:
        """The first ``m`` episodes (the first m demonstrated tasks; ``meta.tasks`` cut to match)."""
        view = Demos.from_demonstrations(self.data.first(m))
        if "tasks" in view.meta:
            view.meta["tasks"] = list(view.meta["tasks"])[:m]
        return view


def from_episodes(
    obs_episodes: list[dict[str, np.ndarray]], action_episodes: list[np.ndarray], meta: dict | None = None
) -> Demos:
    """Demos of per-episode {name: (T, *shape)} observations and (T, ...) actions (names sorted)."""
    if not obs_episodes:
        raise ValueError("no episodes to store")
    names = sorted(obs_episodes[0])
    data = Demonstrations.from_episodes(
        [{k: e[k] for k in names} for e in obs_episodes], action_episodes, dict(meta or {})
    )
    return Demos.from_demonstrations(data)


def save(demos: Demos, path: str | Path) -> Path:
    """Write ``demos`` as a compressed ``.npz`` (``obs/<name>``, ``actions``, ``episode_lengths``, JSON ``meta``),
    atomically; returns the path."""
    arrays = {f"obs/{k}": v for k, v in demos.obs.items()}
    arrays.update(
        actions=demos.actions,
        episode_lengths=demos.episode_lengths,
        meta=np.array(json.dumps(demos.meta, default=float)),
    )
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return write_atomic(path, buf.getvalue())


def load(path: str | Path, obs_spec: dict[str, tuple[int, ...]] | None = None) -> Demos:
    """Read and validate; ``obs_spec`` (name → per-step shape) is what the caller's domain produces."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such demonstrations file")
    if path.suffix == ".safetensors":
        try:
            demos = Demos.from_demonstrations(Demonstrations.load(path))
        except DatasetError as e:
            raise DatasetFormatError(path, str(e).replace(f"{path}: ", "")) from None
        _check_spec(path, demos, obs_spec, "the expected spec")
        return demos
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
        raise DatasetFormatError(
            path,
            f"missing field(s) {', '.join(missing)}; a demonstrations file holds "
            f"obs/<name>, actions, episode_lengths and meta",
        )
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
    try:
        demos = Demos(obs, data["actions"], lengths.astype(np.int64), meta)
    except (ValueError, TypeError) as e:  # e.g. a field that is not numbers
        raise DatasetFormatError(path, str(e)) from None
    stated = {k: tuple(v) for k, v in meta.get("obs_spec", {}).items()}
    _check_spec(path, demos, stated, "the spec the file states")
    _check_spec(path, demos, obs_spec, "the expected spec")
    return demos


def _check_spec(path: Path, demos: Demos, expected: dict | None, what: str) -> None:
    if not expected:
        return
    expected = {k: tuple(v) for k, v in expected.items()}
    if demos.obs_spec != expected:
        raise DatasetFormatError(
            path, f"observation spec mismatch: the file holds {demos.obs_spec}, {what} is {expected}"
        )
