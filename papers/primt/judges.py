"""Judges that compare two trajectory segments through an OpenAI-compatible chat endpoint (``embody.chat``).

Each pair is asked ``repeats`` times, the segments' order swapped on every other asking, and the answers voted:
a judge that always names the first position splits its votes and ends "unsure" (PRIMT's hierarchical fusion,
first level). A reply must be one JSON object ``{"better": 1 | 2 | 0}`` (0: equal or unsure), optionally in one
``` fence; anything else, and every timeout or HTTP error, counts as an unsure answer and is counted in
``JudgeStats``. Judges send text (and, the visual judge, images) only: they never receive or run code.

A verdict per pair: ``p_second`` (share of the decisive votes for the second segment; NaN with none) and
``confidence`` (|votes for second − votes for first| / repeats).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from embody.chat import ChatClient, ChatError

from .briefs import Brief

ANSWER = 'Answer with one JSON object and nothing else: {"better": 1} or {"better": 2}, or {"better": 0} if neither.'
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S)


@dataclass
class JudgeStats:
    """Counters for the report: askings, decisive answers (and those naming the segment shown first: a position
    bias shows as ``first`` far from half of ``decisive``), answers of 0, unparseable replies, endpoint errors."""

    asked: int = 0
    decisive: int = 0
    first: int = 0
    unsure: int = 0
    unparseable: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def strict_json(reply: str, key: str):
    """The value of ``key`` when the reply is exactly one JSON object holding that key alone (in one ``` fence at
    most), else None."""
    text = reply.strip()
    if m := _FENCE.fullmatch(text):
        text = m[1]
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc[key] if isinstance(doc, dict) and set(doc) == {key} else None


def parse_answer(reply: str) -> int | None:
    """1 or 2 (the better segment as shown), 0 (neither), or None when the reply is not exactly the JSON asked."""
    answer = strict_json(reply, "better")
    return answer if type(answer) is int and answer in (0, 1, 2) else None


@dataclass
class Verdicts:
    """Per pair (k,): ``p_second`` and ``confidence`` (see the module)."""

    p_second: np.ndarray
    confidence: np.ndarray

    def labels(self) -> np.ndarray:
        """0 (first better), 1 (second), 0.5 (unsure: no majority)."""
        p = np.nan_to_num(self.p_second, nan=0.5)
        return np.where(p > 0.5, 1.0, np.where(p < 0.5, 0.0, 0.5))


@dataclass
class ChatJudge:
    """Asks ``client`` about pairs; subclasses say how a pair becomes a message (``content``)."""

    client: ChatClient
    brief: Brief
    repeats: int = 3
    stats: JudgeStats = field(default_factory=JudgeStats)

    def content(self, first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> str | list[dict]:
        raise NotImplementedError

    def ask(self, first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> int:
        """One asking: 1 or 2 as shown, 0 for neither, unsure, unparseable or failed."""
        self.stats.asked += 1
        try:
            reply = self.client.chat([{"role": "user", "content": self.content(first, second)}])
        except ChatError:
            self.stats.errors += 1
            return 0
        answer = parse_answer(reply)
        if answer is None:
            self.stats.unparseable += 1
            return 0
        self.stats.decisive += answer != 0
        self.stats.first += answer == 1
        self.stats.unsure += answer == 0
        return answer

    def judge(self, pairs: dict[str, np.ndarray]) -> Verdicts:
        """Verdicts for pairs (``obs`` (k, 2, L, o), ``actions`` (k, 2, L, a); a visual judge also reads ``frames``)."""
        k = len(pairs["obs"])
        votes = np.zeros((k, 2))  # for the first, for the second segment
        for i in range(k):
            seg = [{key: v[i, j] for key, v in pairs.items() if key != "rewards"} for j in (0, 1)]
            for r in range(self.repeats):
                swap = r % 2 == 1
                answer = self.ask(*(seg[::-1] if swap else seg))
                if answer:
                    votes[i, (answer - 1) ^ swap] += 1
        decisive = votes.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p_second = np.where(decisive > 0, votes[:, 1] / decisive, np.nan)
        return Verdicts(p_second, np.abs(votes[:, 1] - votes[:, 0]) / self.repeats)


def downsample(x: np.ndarray, n: int) -> np.ndarray:
    """``n`` evenly spaced samples of a sequence (all of it when shorter), first and last included."""
    return x if len(x) <= n else x[np.linspace(0, len(x) - 1, n).round().astype(int)]


@dataclass
class TextJudge(ChatJudge):
    """The LLM judge: per-channel numeric sequences of both segments (``samples`` values each, 3 significant
    digits), the task's sentence and goals."""

    samples: int = 10

    def content(self, first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> str:
        b = self.brief
        lines = [f"Task: {b.text}", *(f"Goal: {verb} {expr}" for verb, expr in b.goals)]
        lines.append(f"Two trajectory segments follow, each channel as {self.samples} samples from start to end.")
        for n, seg in ((1, first), (2, second)):
            lines.append(f"Segment {n}:")
            for name, values in b.series(seg["obs"]).items():
                lines.append(f"  {name}: " + " ".join(f"{v:.3g}" for v in downsample(values, self.samples)))
        lines.append("Which segment makes more progress on the goals?")
        lines.append(ANSWER)
        return "\n".join(lines)


@dataclass
class VisualJudge(ChatJudge):
    """The VLM judge: each segment's keyframes (``frames.keyframes``, at most ``keyframes``) rendered from the
    task's model at ``size`` px (``frames.SceneRenderer``), with the colour key, the task's sentence and its visual
    goals. The images of a pair are rendered once for all its askings."""

    keyframes: int = 8
    size: int = 224
    task: object = None  # the task instance the brief's ``pose`` reads (e.g. arm-reach's home pose)

    def __post_init__(self):
        from .frames import SceneRenderer

        if self.brief.scene is None:
            raise ValueError(f"primt: task {self.brief.task!r} has no scene for the visual judge")
        self.renderer = SceneRenderer(self.brief.scene, self.size)

    def images(self, obs: np.ndarray) -> list[str]:
        """PNG data URLs of one segment's keyframes (obs (L, o))."""
        from .frames import keyframes, png_data_url

        o = obs[keyframes(obs, self.keyframes)]
        return [png_data_url(im) for im in self.renderer.render(self.brief.pose(o, self.task), o)]

    def judge(self, pairs: dict[str, np.ndarray]) -> Verdicts:
        k = len(pairs["obs"])
        images = np.empty((k, 2), dtype=object)
        for i in range(k):
            for j in (0, 1):
                images[i, j] = self.images(pairs["obs"][i, j])
        return super().judge(pairs | {"images": images})

    def content(self, first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> list[dict]:
        b = self.brief
        head = [f"Task: {b.text}", f"Colours: {b.scene.legend()}", *(f"Goal: {v} {e}" for v, e in b.visual_goals)]
        parts = [{"type": "text", "text": "\n".join(head)}]
        for n, seg in ((1, first), (2, second)):
            parts.append({"type": "text", "text": f"Segment {n}: its keyframes in time order."})
            parts += [{"type": "image_url", "image_url": {"url": url}} for url in seg["images"]]
        parts.append({"type": "text", "text": "Which segment makes more progress on the goals?\n" + ANSWER})
        return parts
