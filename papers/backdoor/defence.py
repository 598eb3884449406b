"""A backdoor defence baseline: spectral signatures (Tran, Li & Madry 2018) on an offline agent's learned features.

Poisoned transitions share one action (the target behaviour) and leave a strong trace in the features of a model
trained on them. The defender, who knows neither the trigger nor the target, groups the dataset's transitions by
action (k-means on the actions: the "labels" of a continuous-control dataset), centres each group's features
(the actor's last hidden layer), and scores every transition by its squared projection on the group's top
singular vector; the highest-scoring ``1.5 · expected_rate`` share of all transitions is flagged (not of each
group, as for image classes: a target action the clean data rarely takes makes a group that is mostly poison,
where a per-group share would flag a fraction of it). Measured against the
dataset's ``backdoor.poisoned`` column: the detection rate (poisoned transitions flagged), the false-positive rate
(clean ones flagged) and the scores' ROC AUC.
"""

from __future__ import annotations

import numpy as np


def kmeans(x: np.ndarray, k: int, seed: int = 0, iterations: int = 25) -> np.ndarray:
    """Cluster labels (N,) of the rows of ``x`` (N, D): Lloyd's algorithm from k-means++ seeding."""
    rng = np.random.default_rng(seed)
    centres = [x[rng.integers(len(x))]]
    for _ in range(1, min(k, len(x))):
        d = np.min([np.sum((x - c) ** 2, axis=1) for c in centres], axis=0)
        centres.append(x[rng.choice(len(x), p=d / d.sum())] if d.sum() > 0 else x[rng.integers(len(x))])
    c = np.array(centres)
    for _ in range(iterations):
        labels = np.argmin(((x[:, None] - c[None]) ** 2).sum(-1), axis=1)
        c = np.array([x[labels == j].mean(0) if np.any(labels == j) else c[j] for j in range(len(c))])
    return labels


def spectral_scores(features: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per transition: its centred feature's squared projection on its group's top singular vector (N,)."""
    scores = np.zeros(len(features))
    for g in np.unique(groups):
        rows = groups == g
        centred = features[rows] - features[rows].mean(0)
        if len(centred) < 2:
            continue
        top = np.linalg.svd(centred, full_matrices=False)[2][0]
        scores[rows] = (centred @ top) ** 2
    return scores


def flag(scores: np.ndarray, share: float) -> np.ndarray:
    """The highest-scoring ``share`` of the transitions (N,) bool."""
    out = np.zeros(len(scores), bool)
    n = int(round(share * len(scores)))
    if n:
        out[np.argsort(scores)[-n:]] = True
    return out


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The probability that a positive scores above a negative (ties count half); nan without both kinds."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    _, inverse, counts = np.unique(np.concatenate([pos, neg]), return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    ranks = ((ends - counts + 1 + ends) / 2)[inverse]  # 1-based, ties averaged
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def spectral_defence(
    agent,
    obs: np.ndarray,
    actions: np.ndarray,
    poisoned: np.ndarray,
    expected_rate: float = 0.1,
    clusters: int = 4,
    seed: int = 0,
) -> dict:
    """Run the defence on a dataset's obs (N, O) and actions (N, A) with ``agent``'s features; rates against the
    truth ``poisoned`` (N,) bool."""
    groups = kmeans(np.asarray(actions, np.float64), clusters, seed)
    scores = spectral_scores(agent.features(obs).cpu().numpy().astype(np.float64), groups)
    flagged = flag(scores, min(1.0, 1.5 * expected_rate))
    poisoned = np.asarray(poisoned, bool)
    return {
        "detection_rate": float(flagged[poisoned].mean()) if poisoned.any() else float("nan"),
        "false_positive_rate": float(flagged[~poisoned].mean()),
        "auc": roc_auc(scores, poisoned),
        "flagged": int(flagged.sum()),
        "poisoned": int(poisoned.sum()),
    }
