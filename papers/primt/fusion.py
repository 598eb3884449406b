"""Hierarchical fusion, second level: the text and visual judges' verdicts combined by weighted logic rules.

Rules over y = P(the second segment is better), each grounded with a target t ∈ {0, 1} and a weight w:

* agreement — both decisive on the same side: that side, weight ``agree`` · each judge's confidence;
* disagreement — the side of the judge whose evidence (confidence) is larger, weight ``disagree`` · its margin;
* one decisive judge — its side, weight ``disagree`` · its confidence;
* always — unsure (t = 0.5), weight ``prior``: neither confident → unsure.

With squared-hinge potentials w·(y − t)² (probabilistic soft logic), MAP inference over y ∈ [0, 1] is the
weighted mean of the targets, solved exactly. The label is the side y leans to by more than ``margin``, else
0.5 (unsure: a 0.5/0.5 target in Bradley–Terry, as PRIMT trains with).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .judges import Verdicts


@dataclass
class FusionWeights:
    agree: float = 2.0
    disagree: float = 1.0
    prior: float = 0.5
    margin: float = 0.1


def fuse(text: Verdicts, visual: Verdicts, w: FusionWeights) -> np.ndarray:
    """Labels (k,) in {0, 0.5, 1} from two judges' verdicts on the same pairs."""
    sides = [np.sign(np.nan_to_num(v.p_second, nan=0.5) - 0.5) for v in (text, visual)]  # −1 first, +1 second
    conf = [v.confidence * (s != 0) for v, s in zip((text, visual), sides)]
    agree = (sides[0] == sides[1]) & (sides[0] != 0)
    strong = np.where(conf[0] >= conf[1], 0, 1)  # whose evidence is larger
    side = np.where(agree, sides[0], np.choose(strong, sides))
    weight = np.where(agree, w.agree * (conf[0] + conf[1]), w.disagree * np.abs(conf[0] - conf[1]))
    weight = np.where(side == 0, 0.0, weight)
    y = (weight * (side > 0) + w.prior * 0.5) / (weight + w.prior)
    return np.where(y > 0.5 + w.margin, 1.0, np.where(y < 0.5 - w.margin, 0.0, 0.5))
