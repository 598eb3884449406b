"""Checkpoints: safetensors for tensors + JSON for everything else. Never pickle.

A checkpoint is a directory holding ``model.safetensors`` (policy weights, normalizer
statistics, optionally the optimizer state under ``optim.*``) and ``checkpoint.json``
(format and version, the policy class and its constructor arguments, the observation/action
spec and its hash, the sha256 of the tensor file, and free-form metadata such as the run
config). Saving writes a temporary directory and renames it into place, so a crash never
leaves a half-written checkpoint where a good one was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from embody import exits
from embody.policies.classes import POLICY_CLASSES  # noqa: F401 - re-exported

FORMAT = "embody.policy"
FORMAT_VERSION = 1
MODEL_FILE, META_FILE = "model.safetensors", "checkpoint.json"


class CheckpointError(ValueError):
    """A checkpoint is missing, damaged, foreign, too new, or does not fit the task."""

    exit_code = exits.INPUT


def spec_hash(spec: dict) -> str:
    """A short hash of the observation/action spec a policy was trained for."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    sd = optimizer.state_dict()
    tensors = {}
    for idx, state in sd["state"].items():
        for k, v in state.items():
            tensors[f"optim.{idx}.{k}"] = torch.as_tensor(v).detach().clone()
    return tensors, sd["param_groups"]


def save_checkpoint(
    directory: str | Path,
    policy: torch.nn.Module,
    spec: dict,
    meta: dict | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> Path:
    """Write ``policy`` (with ``init_kwargs()``) to ``directory`` atomically; returns ``directory``.

    ``model.safetensors`` holds ``policy.<state_dict key>`` and, given ``optimizer``,
    ``optim.<param index>.<state key>`` tensors. ``checkpoint.json`` holds ``format``,
    ``format_version``, ``policy_class`` (a ``POLICY_CLASSES`` name, needed to load it back),
    ``policy_kwargs``, ``spec``, ``spec_hash``, ``model_sha256``, ``optimizer_param_groups`` (None
    without an optimizer) and ``meta``. ``spec`` must be JSON-serializable; ``meta`` values that
    are not are written as ``str``. A checkpoint already at ``directory`` is replaced.
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"policy.{k}": v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
    param_groups = None
    if optimizer is not None:
        opt, param_groups = _optimizer_tensors(optimizer)
        tensors.update({k: v.cpu().contiguous() for k, v in opt.items()})
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; a checkpoint is meant to be shared
        save_file(tensors, str(tmp / MODEL_FILE))
        (tmp / MODEL_FILE).chmod(0o644)
        doc = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "policy_class": type(policy).__name__,
            "policy_kwargs": policy.init_kwargs(),
            "spec": spec,
            "spec_hash": spec_hash(spec),
            "model_sha256": _sha256(tmp / MODEL_FILE),
            "optimizer_param_groups": param_groups,
            "meta": meta or {},
        }
        (tmp / META_FILE).write_text(json.dumps(doc, indent=2, default=str))
        old = directory.with_name(f".{directory.name}.old")
        shutil.rmtree(old, ignore_errors=True)  # left over by a save killed after its first rename
        if directory.exists():
            os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


@dataclass
class Checkpoint:
    """What ``load_checkpoint`` returns: the policy (on the requested device, weights and
    normalizer statistics loaded; not switched to eval mode), the spec it was trained for
    (``checkpoint.json`` "spec"), its free-form ``meta`` (e.g. the run config), and the
    optimizer's ``state_dict`` when one was saved, else None."""

    policy: torch.nn.Module
    spec: dict
    meta: dict
    optimizer_state: dict | None  # a torch optimizer state_dict, when saved


def read_meta(directory: str | Path) -> dict:
    """checkpoint.json, validated for format and version."""
    directory = Path(directory)
    path = directory / META_FILE
    if not path.is_file():
        raise CheckpointError(f"{directory} is not an embody checkpoint: {META_FILE} is missing")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON (truncated or foreign?): {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not an embody policy checkpoint (format {doc.get('format') if isinstance(doc, dict) else None!r})"
        )
    version = doc.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r} is not supported "
            f"(this embody reads versions 1..{FORMAT_VERSION}; upgrade embody)"
        )
    return doc


def load_checkpoint(directory: str | Path, expect_spec: dict | None = None, device: str = "cpu") -> Checkpoint:
    """Load and verify a checkpoint; ``expect_spec`` refuses one trained for another task.

    Raises ``CheckpointError`` when ``directory`` is not an embody checkpoint, is of a newer
    format version, its tensor file is missing or fails its sha256, its spec is not
    ``expect_spec``, or the weights do not fit the named policy class. Tensors load straight
    onto ``device``.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = Path(directory)
    doc = read_meta(directory)
    model = directory / MODEL_FILE
    if not model.is_file():
        raise CheckpointError(f"{directory}: {MODEL_FILE} is missing")
    if _sha256(model) != doc.get("model_sha256"):
        raise CheckpointError(f"{model} does not match the checksum in {META_FILE}: truncated or modified")
    if expect_spec is not None and spec_hash(expect_spec) != doc["spec_hash"]:
        raise CheckpointError(
            f"{directory} was trained for a different observation/action spec:\n"
            f"  checkpoint: {doc['spec']}\n  this task:  {expect_spec}"
        )
    try:
        tensors = load_file(str(model), device=device)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"cannot read {model}: {e}") from None
    try:
        policy = POLICY_CLASSES.get(doc["policy_class"]).from_kwargs(doc["policy_kwargs"])
        policy.load_state_dict({k[len("policy.") :]: v for k, v in tensors.items() if k.startswith("policy.")})
    except (KeyError, RuntimeError, TypeError) as e:
        raise CheckpointError(f"{directory}: the weights do not fit policy {doc.get('policy_class')!r}: {e}") from None
    return Checkpoint(policy.to(device), doc["spec"], doc.get("meta", {}), _optimizer_state(tensors, doc))


def _optimizer_state(tensors: dict[str, torch.Tensor], doc: dict[str, Any]) -> dict | None:
    groups = doc.get("optimizer_param_groups")
    if groups is None:
        return None
    state: dict[int, dict] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, idx, name = k.split(".", 2)
            state.setdefault(int(idx), {})[name] = v
    return {"state": state, "param_groups": groups}
