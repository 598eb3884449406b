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

from embody.extras import require

from .briefs import evaluate


def _parts(body: dict) -> list[dict]:
    content = body["messages"][-1]["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _user_text(body: dict) -> str:
    return "\n".join(p.get("text", "") for p in _parts(body))


PLAN = {"waypoints": [[0.5, 0.5, 1.0], [1.0, 1.0, 1.0]]}  # to the target's height halfway, then to the target


def text_standin(body: dict, tie: float = 1e-3) -> str:
    """The answer to one chat-completions request ``body`` (see the module); asked for a foresight plan
    (``foresight.plan_prompt``), the fixed ``PLAN``: the prompt holds no numbers to plan from."""
    goals, segments, current = [], {}, None
    if "\nPlan: " in _user_text(body):
        return json.dumps(PLAN)
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
    return _decide(score, tie)


def _decide(score: dict[int, float], tie: float) -> str:
    if abs(score[1] - score[2]) <= tie * (abs(score[1]) + abs(score[2])):
        return json.dumps({"better": 0})
    return json.dumps({"better": 1 if score[1] > score[2] else 2})


def _hue(rgb: tuple[int, int, int]) -> int:
    cv2 = require("cv2", "primt")

    return int(cv2.cvtColor(np.uint8([[rgb]]), cv2.COLOR_RGB2HSV)[0, 0, 0])


def blob_centroids(image: np.ndarray, hues: dict[str, int], tol: int = 8) -> dict[str, np.ndarray]:
    """{colour: (x, y) centroid in image heights} of the saturated pixels within ``tol`` of each hue."""
    cv2 = require("cv2", "primt")

    hsv = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_RGB2HSV).astype(int)
    vivid = (hsv[..., 1] > 120) & (hsv[..., 2] > 50)
    out = {}
    for name, hue in hues.items():
        d = np.abs(hsv[..., 0] - hue)
        ys, xs = np.nonzero(vivid & (np.minimum(d, 180 - d) <= tol))
        if xs.size:
            out[name] = np.array([xs.mean(), ys.mean()]) / image.shape[0]
    return out


def _visual_term(expression: str, blobs: dict[str, np.ndarray]) -> float | None:
    m = re.fullmatch(r"(above|distance)\((\w+),\s*(\w+)\)", expression)
    if m is None:
        raise ValueError(f"cannot evaluate visual goal {expression!r}")
    if m[2] not in blobs or m[3] not in blobs:
        return None
    a, b = blobs[m[2]], blobs[m[3]]
    return float(b[1] - a[1]) if m[1] == "above" else float(np.linalg.norm(a - b))


def visual_standin(body: dict, tie: float = 1e-3) -> str:
    """The answer to one request with keyframe images (see the module)."""
    from .frames import decode_data_url

    hues, goals, images, current = {}, [], {}, None
    for part in _parts(body):
        if part.get("type") == "image_url" and current is not None:
            images[current].append(decode_data_url(part["image_url"]["url"]))
            continue
        for line in part.get("text", "").splitlines():
            if line.startswith("Colours: "):
                for name, r, g, b in re.findall(r"(\w+) = RGB \((\d+), (\d+), (\d+)\)", line):
                    hues[name] = _hue((int(r), int(g), int(b)))
            elif m := re.fullmatch(r"Goal: (maximize|minimize) (.+)", line.strip()):
                goals.append((m[1], m[2]))
            elif m := re.match(r"Segment (\d):", line.strip()):
                current = int(m[1])
                images[current] = []
    if not goals or not hues or set(images) != {1, 2} or not all(images.values()):
        return "I cannot tell from these images."
    score = {}
    for n, frames in images.items():
        blobs = [blob_centroids(im, hues) for im in frames]
        score[n] = 0.0
        for verb, expr in goals:
            values = [v for b in blobs if (v := _visual_term(expr, b)) is not None]
            if not values:
                return json.dumps({"better": 0})  # the colours named are not in the images: unsure
            score[n] += (1 if verb == "maximize" else -1) * float(np.mean(values))
    return _decide(score, tie)
