"""Stand-in judges for machines without a model: OpenAI-compatible answers computed from the request alone.

No weights can be downloaded here, so the studies' text judge is a stand-in that decides only from the numbers in
the prompt it receives — the same prompt a real LLM gets — and never sees the simulator or the reward: it scores
each segment by its goal lines (``Goal: maximize|minimize EXPR``, evaluated on the sampled channels, averaged over
the samples) and names the higher, or 0 when they are within ``tie`` of each other. Every report names it a
stand-in. Serve it with ``embody.chat.LoopbackChatServer(respond=text_standin)``.
"""

from __future__ import annotations

import json
import re

import numpy as np

from .briefs import evaluate


def _user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def text_standin(body: dict, tie: float = 1e-3) -> str:
    """The answer to one chat-completions request ``body`` (see the module)."""
    goals, segments, current = [], {}, None
    for line in _user_text(body).splitlines():
        if m := re.fullmatch(r"Goal: (maximize|minimize) (.+)", line.strip()):
            goals.append((m[1], m[2]))
        elif m := re.fullmatch(r"Segment (\d):", line.strip()):
            current = segments.setdefault(int(m[1]), {})
        elif current is not None and (m := re.fullmatch(r"\s+(\w+): (.+)", line)):
            current[m[1]] = np.array([float(v) for v in m[2].split()])
    if not goals or set(segments) != {1, 2}:
        return "I cannot tell from this prompt."  # prose: the client counts it unparseable
    score = {
        n: sum((1 if verb == "maximize" else -1) * evaluate(e, s).mean() for verb, e in goals)
        for n, s in segments.items()
    }
    if abs(score[1] - score[2]) <= tie * (abs(score[1]) + abs(score[2])):
        return json.dumps({"better": 0})
    return json.dumps({"better": 1 if score[1] > score[2] else 2})
