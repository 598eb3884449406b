"""Minari (Farama's offline-RL dataset standard) export and import, HDF5 storage, h5py only.

A Minari dataset is a directory ``<dataset_dir>/data/`` holding (read from minari 0.5.4's
``dataset/minari_storage.py`` and ``dataset/_storages/hdf5_storage.py``; the non-image layout is
unchanged since 0.5.0)::

    metadata.json     dataset_id, minari_version, data_format "hdf5", total_episodes, total_steps,
                      observation_space / action_space (serialised gymnasium spaces, JSON strings),
                      optional env_spec, author, description, ...
    main_data.hdf5    group episode_<id> per episode (attrs id, total_steps, seed), each holding
                      observations (N+1, *obs), actions (N, *act), rewards (N,), terminations (N,),
                      truncations (N,) and an infos group

``minari.load_dataset(dataset_id)`` reads ``$MINARI_DATASETS_PATH/<dataset_id>/data`` (default
root ``~/.minari/datasets``); ``minari.MinariDataset(<dataset_dir>/data)`` reads any directory.

Step convention. Minari stores o_0..o_N and, per step t, a_t, r_t, terminated_t, truncated_t
(o_{t+1} follows a_t). An embody/LeRobot frame t holds o_t, a_t and next.reward/next.done of that
step, so an N-frame episode has no o_N: export repeats the last frame's observation as o_N, and
import drops the final o_N (the one value that does not survive a Minari -> embody trip).

Termination vs truncation. Datasets imported from Minari carry ``next.terminated`` beside
``next.done``, and export uses it (a step both terminated and truncated comes back terminated).
Without it (``embody record`` writes ``next.done`` only) export calls a done last step a
truncation when the episode is ``time_limit`` frames long (default: the longest episode in the
dataset, i.e. the time limit) and a termination when shorter; a last step that is not done at
all (recording stopped) is a truncation.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from .format import Dataset, DatasetFormatError, DatasetWriter, feature, load

LAYOUT_VERSION = "0.5.0"  # minari_version written: the oldest 0.5 reader that reads this layout
METADATA_FILE = "metadata.json"
MAIN_FILE = "main_data.hdf5"
OBSERVATION_KEYS = ("embody.observation", "observation.state")  # export's choice, in order of preference
# minari's DATASET_ID_RE with the version required (minari's parse_dataset_id fails without one)
_DATASET_ID = re.compile(r"^(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+$")
_ARRAY_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")


def _h5py():
    try:
        import h5py
    except ImportError:
        raise ImportError('Minari export/import needs h5py: pip install "embody[minari]"') from None
    return h5py


def minari_root() -> Path:
    """Where ``minari.load_dataset`` looks: $MINARI_DATASETS_PATH, else ~/.minari/datasets."""
    return Path(os.environ.get("MINARI_DATASETS_PATH") or Path.home() / ".minari" / "datasets")


# -- spaces -------------------------------------------------------------------------------------


def _box_space(dtype: np.dtype, shape: tuple) -> str:
    """A serialised unbounded gymnasium Box, as minari's ``serialize_space`` writes it."""
    if np.issubdtype(dtype, np.floating):
        low, high = -np.inf, np.inf
    elif np.issubdtype(dtype, np.integer):
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    else:
        raise ValueError(f"cannot export a {dtype} column as a Minari Box space")
    low, high = np.full(shape, low).tolist(), np.full(shape, high).tolist()
    return json.dumps({"type": "Box", "dtype": str(dtype), "shape": list(shape), "low": low, "high": high})


def _space_feature(serialized: str | dict, what: str, path: Path) -> dict:
    """A serialised Minari space -> our :func:`feature`; array-valued spaces only.

    Box keeps its dtype and shape ((1,) for scalars); Discrete is an int64 scalar; MultiDiscrete
    and MultiBinary are int64 / int8 vectors.
    """
    try:
        space = json.loads(serialized) if isinstance(serialized, str) else serialized
        kind = space["type"]
    except (TypeError, ValueError, KeyError) as e:
        raise DatasetFormatError(path, f"{what} is not a serialised gymnasium space ({e!r})") from None
    if kind not in _ARRAY_SPACES:
        raise DatasetFormatError(
            path,
            f"{what} is a {kind} space: import_minari supports {', '.join(_ARRAY_SPACES)} "
            "(flatten nested observations first, e.g. gymnasium's FlattenObservation)",
        )
    if kind == "Box":
        shape, dtype = tuple(space["shape"]), str(space["dtype"])
        if dtype == "uint8" and len(shape) in (2, 3) and min(shape[:2]) >= 32:
            raise DatasetFormatError(
                path,
                f"{what} is an image Box {shape}: image observations are not supported "
                "(Minari stores them JPEG-encoded)",
            )
        return feature(dtype, shape)
    if kind == "Discrete":
        return feature("int64", (1,))
    if kind == "MultiDiscrete":
        return feature("int64", (len(space["nvec"]),))
    n = space["n"]
    return feature("int8", tuple(n) if isinstance(n, list) else (n,))


# -- export -------------------------------------------------------------------------------------


def _observation_key(ds: Dataset) -> str:
    for key in OBSERVATION_KEYS:
        if key in ds.features and ds.features[key]["dtype"] != "video":
            return key
    raise DatasetFormatError(ds.root, f"no observation column to export: needs one of {OBSERVATION_KEYS}")


def _default_dataset_id(ds: Dataset) -> str:
    name = ds.tasks[0] if len(ds.tasks) == 1 else (ds.info.get("robot_type") or "dataset")
    return f"embody/{re.sub(r'[^-_A-Za-z0-9]+', '_', name).strip('_') or 'dataset'}-v0"


def end_flags(done: np.ndarray, time_limit: int, terminated: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(terminations, truncations), (N,) bool each, for one N-step episode.

    ``done`` (N,) is our next.done. With ``terminated`` (our next.terminated) the split is exact;
    without it the last step is a truncation when N >= ``time_limit`` or when it is not done (a
    recording cut short), else a termination; an earlier done step counts as a termination.
    """
    done = np.asarray(done, dtype=bool).reshape(-1)
    if terminated is not None:
        term = np.asarray(terminated, dtype=bool).reshape(-1) & done
        trunc = done & ~term
    else:
        term, trunc = done.copy(), np.zeros_like(done)
        if len(done) >= time_limit or not done[-1]:
            term[-1], trunc[-1] = False, True
    if not done[-1]:
        trunc[-1] = True  # Minari episodes end by termination or truncation
    return term, trunc


def export_minari(
    ds: Dataset | str | Path,
    out_dir: str | Path | None = None,
    dataset_id: str | None = None,
    time_limit: int | None = None,
    description: str | None = None,
) -> Path:
    """Write dataset ``ds`` as a Minari HDF5 dataset; returns its ``data/`` directory.

    ``out_dir`` is the Minari dataset directory (``data/`` is created in it); default
    ``minari_root() / dataset_id``, so ``minari.load_dataset(dataset_id)`` finds it.
    ``dataset_id`` defaults to ``embody/<task>-v0``. Observations are ``embody.observation`` if the
    dataset has it, else ``observation.state``, as unbounded Boxes (N+1 rows per episode, the last
    repeated; see the module doc); actions are ``action``; rewards ``next.reward`` (zeros when
    absent); terminations/truncations from ``next.done`` (and ``next.terminated``). Videos are not
    exported. metadata.json is written last: an interrupted export is not a Minari dataset.
    """
    h5py = _h5py()
    ds = ds if isinstance(ds, Dataset) else load(ds)
    dataset_id = dataset_id or _default_dataset_id(ds)
    if not _DATASET_ID.fullmatch(dataset_id):
        raise ValueError(f"malformed Minari dataset id {dataset_id!r}: use (namespace/)name-v<version>")
    data_dir = Path(out_dir if out_dir is not None else minari_root() / dataset_id) / "data"
    if (data_dir / METADATA_FILE).exists() or (data_dir / MAIN_FILE).exists():
        raise FileExistsError(f"{data_dir}: a Minari dataset is already there; delete it or choose another out_dir")
    if "action" not in ds.features:
        raise DatasetFormatError(ds.root, "no 'action' column to export")
    obs_key = _observation_key(ds)
    # column() gives shape-(1,) features as (N,): back to (N, 1), as declared
    obs = ds.column(obs_key).reshape(ds.num_frames, *ds.features[obs_key]["shape"])
    act = ds.column("action").reshape(ds.num_frames, *ds.features["action"]["shape"])
    rew = (
        ds.column("next.reward").reshape(-1).astype(np.float64)
        if "next.reward" in ds.features
        else np.zeros(ds.num_frames)
    )
    done = ds.column("next.done").reshape(-1) if "next.done" in ds.features else np.zeros(ds.num_frames, bool)
    terminated = ds.column("next.terminated").reshape(-1) if "next.terminated" in ds.features else None
    starts, ends = ds.episode_bounds
    time_limit = time_limit or int((ends - starts).max(initial=0))

    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / f".{MAIN_FILE}.tmp"
    with h5py.File(tmp, "w", track_order=True) as f:  # as minari's writer opens it (groups in creation order)
        for i, (a, b) in enumerate(zip(starts.tolist(), ends.tolist())):
            g = f.create_group(f"episode_{i}")
            g.attrs["id"], g.attrs["total_steps"] = i, b - a
            # o_0..o_{N-1} are the frames' observations; o_N repeats o_{N-1} (no frame holds it)
            g.create_dataset(
                "observations",
                data=np.concatenate([obs[a:b], obs[b - 1 : b]]),
                chunks=True,
                maxshape=(None, *obs.shape[1:]),
            )
            g.create_dataset("actions", data=act[a:b], chunks=True, maxshape=(None, *act.shape[1:]))
            g.create_dataset("rewards", data=rew[a:b], chunks=True, maxshape=(None,))
            term, trunc = end_flags(done[a:b], time_limit, None if terminated is None else terminated[a:b])
            g.create_dataset("terminations", data=term, chunks=True, maxshape=(None,))
            g.create_dataset("truncations", data=trunc, chunks=True, maxshape=(None,))
            g.create_group("infos")  # minari reads a present-but-empty infos group as {}
    os.replace(tmp, data_dir / MAIN_FILE)
    metadata = {
        "total_episodes": ds.num_episodes,
        "total_steps": ds.num_frames,
        "data_format": "hdf5",
        "jpeg_encoding": False,
        "observation_space": _box_space(obs.dtype, obs.shape[1:]),
        "action_space": _box_space(act.dtype, act.shape[1:]),
        "dataset_id": dataset_id,
        "description": description
        or f"Exported by embody from {ds.root} ({obs_key}, fps {ds.fps}, robot {ds.info.get('robot_type')}).",
        "minari_version": LAYOUT_VERSION,
        "dataset_size": round(sum(p.stat().st_size for p in data_dir.iterdir()) / 1e6, 1),  # MB, as minari's
    }
    tmp_meta = data_dir / f".{METADATA_FILE}.tmp"
    tmp_meta.write_text(json.dumps(metadata))
    os.replace(tmp_meta, data_dir / METADATA_FILE)
    return data_dir


# -- import -------------------------------------------------------------------------------------


def _data_dir(path: Path) -> Path:
    """The directory holding metadata.json: given it, its parent dataset dir, or main_data.hdf5."""
    for d in (path.parent if path.is_file() else path, path / "data"):
        if (d / METADATA_FILE).is_file():
            return d
    if not path.exists():
        raise DatasetFormatError(path, "missing: no Minari dataset there")
    if path.is_file():
        raise DatasetFormatError(path, f"not a Minari dataset: no {METADATA_FILE} beside it")
    raise DatasetFormatError(path, f"not a Minari dataset: no {METADATA_FILE} in it or in its data/")


def _read_metadata(data_dir: Path) -> dict:
    path = data_dir / METADATA_FILE
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetFormatError(path, f"unreadable ({e})") from None
    if not isinstance(meta, dict):
        raise DatasetFormatError(path, "not a JSON object")
    for key in ("observation_space", "action_space"):
        if key not in meta:
            raise DatasetFormatError(
                path, f"no {key!r}: datasets whose spaces come only from env_spec are not supported"
            )
    return meta


def _hdf5_episodes(data_dir: Path, total: int):
    """Yield (observations, actions, rewards, terminations, truncations) per episode, read with h5py."""
    h5py = _h5py()
    path = data_dir / MAIN_FILE
    if not path.is_file():
        raise DatasetFormatError(path, "missing (data_format is hdf5)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise DatasetFormatError(path, f"not an HDF5 file ({e})") from None
    with f:
        for i in range(total):
            g = f.get(f"episode_{i}")
            if not isinstance(g, h5py.Group):
                raise DatasetFormatError(path, f"no group episode_{i} (metadata says {total} episodes)")
            arrays = []
            for key in ("observations", "actions", "rewards", "terminations", "truncations"):
                d = g.get(key)
                if not isinstance(d, h5py.Dataset):
                    raise DatasetFormatError(
                        path,
                        f"episode_{i}/{key} is {'missing' if d is None else 'a group'}: "
                        "only array-valued spaces are supported",
                    )
                arrays.append(d[()])
            yield tuple(arrays)


def _minari_episodes(data_dir: Path):
    """Episodes of a non-HDF5 (arrow, parquet) Minari dataset, through minari itself."""
    try:
        from minari.dataset.minari_storage import MinariStorage
    except ImportError:
        raise ImportError(
            f'{data_dir}: reading non-HDF5 Minari storage needs minari: pip install "embody[minari]"'
        ) from None
    storage = MinariStorage.read(data_dir)
    for ep in storage.get_episodes(range(storage.total_episodes)):
        yield tuple(ep[k] for k in ("observations", "actions", "rewards", "terminations", "truncations"))


def import_minari(
    path: str | Path,
    out_root: str | Path,
    fps: int,
    robot_type: str | None = None,
    task: str | None = None,
    observation_key: str = "observation.state",
) -> Dataset:
    """Convert a Minari dataset into an embody dataset at ``out_root``; returns it loaded.

    ``path``: the Minari dataset directory, its ``data/`` directory or its main_data.hdf5.
    Columns: ``observation_key`` (o_0..o_{N-1}; the final o_N is dropped), ``action``,
    ``next.reward`` (float32), ``next.done`` (terminated or truncated) and ``next.terminated``.
    ``fps`` is ours to choose (Minari has no clock); ``robot_type`` defaults to the env id of the
    dataset's env_spec; ``task`` to the dataset_id. Appends when ``out_root`` already holds a
    dataset with the same features (DatasetWriter's rule). Dict/Tuple/Text and image spaces raise
    DatasetFormatError naming metadata.json.
    """
    data_dir = _data_dir(Path(path))
    meta = _read_metadata(data_dir)
    meta_path = data_dir / METADATA_FILE
    obs_ft = _space_feature(meta["observation_space"], "observation_space", meta_path)
    act_ft = _space_feature(meta["action_space"], "action_space", meta_path)
    total = int(meta.get("total_episodes", 0))
    fmt = meta.get("data_format", "hdf5")
    episodes = _hdf5_episodes(data_dir, total) if fmt == "hdf5" else _minari_episodes(data_dir)
    if robot_type is None:
        try:
            robot_type = json.loads(meta["env_spec"])["id"]
        except (KeyError, TypeError, ValueError):
            robot_type = "unknown"
    task = task or str(meta.get("dataset_id") or "minari")
    features = {
        observation_key: obs_ft,
        "action": act_ft,
        "next.reward": feature("float32", (1,)),
        "next.done": feature("bool", (1,)),
        "next.terminated": feature("bool", (1,)),
    }
    with DatasetWriter(out_root, fps=fps, features=features, robot_type=robot_type) as writer:
        for i, (obs, act, rew, term, trunc) in enumerate(episodes):
            n = len(rew)
            if n == 0:
                continue  # nothing to write; an embody episode has at least one frame
            if len(obs) not in (n, n + 1) or len(act) != n or len(term) != n or len(trunc) != n:
                raise DatasetFormatError(
                    data_dir / MAIN_FILE,
                    f"episode_{i}: {len(obs)} observations, {len(act)} "
                    f"actions, {n} rewards do not line up (expected N+1, N, N)",
                )
            obs = np.asarray(obs).reshape(len(obs), *obs_ft["shape"])
            act = np.asarray(act).reshape(n, *act_ft["shape"])
            term, trunc = np.asarray(term, dtype=bool), np.asarray(trunc, dtype=bool)
            done = term | trunc
            for t in range(n):
                writer.add_frame(
                    {
                        observation_key: obs[t],
                        "action": act[t],
                        "next.reward": np.float32(rew[t]),
                        "next.done": done[t],
                        "next.terminated": term[t],
                    },
                    task=task,
                )
            writer.save_episode()
    return load(out_root)
