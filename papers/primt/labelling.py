"""A person as the teacher: a local web page showing the two segments of each query as videos side by side.

``LabelServer`` serves the page on 127.0.0.1 with a small JSON API (standard library only):

    GET  /                     the page (keys: ← or 1 left better, → or 2 right better, = or 0 equal, s unsure,
                               u or Backspace undo; progress shown)
    GET  /api/pairs            {"task", "pairs": [{"id", "a", "b"}], "labels": {id: label}}
    GET  /video/ID/0.mp4|1.mp4 a segment's video
    POST /api/label            {"pair": ID, "label": "first"|"second"|"equal"|"skip"} → {"done": n}
    POST /api/undo             → {"pair": ID} (409 when there is nothing to undo)

An unknown pair or video is 404, a malformed request 400. ``PersonTeacher`` renders each query's segments
(``frames.SceneRenderer``, every step) to MP4, publishes them and waits until all are labelled (or ``timeout_s``
passes). "skip", and a pair left unlabelled, is B-Pref's skip: the pair is not trained on.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

LABELS = {"first": 0.0, "second": 1.0, "equal": 0.5, "skip": float("nan")}
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>embody: which segment is better?</title>
<style>body{font-family:sans-serif;background:#111;color:#eee;text-align:center}
video{width:45vw;max-width:480px;margin:8px;border:3px solid #444}.keys{color:#aaa}</style></head><body>
<h2 id="task"></h2><div id="progress">loading</div>
<div><video id="a" autoplay loop muted playsinline></video><video id="b" autoplay loop muted playsinline></video></div>
<div class="keys">&larr; or 1: left is better &middot; &rarr; or 2: right is better &middot; = or 0: equal &middot;
s: unsure &middot; u or Backspace: undo</div><div id="status"></div>
<script>
let pairs = [], labels = {}, current = null;
async function refresh() {
  const d = await (await fetch('/api/pairs')).json();
  pairs = d.pairs; labels = d.labels; document.getElementById('task').textContent = d.task; show();
}
function show() {
  const next = pairs.find(p => !(p.id in labels));
  document.getElementById('progress').textContent = `${Object.keys(labels).length} / ${pairs.length} labelled`;
  const status = document.getElementById('status');
  if (!next) { current = null; status.textContent = pairs.length ? 'All labelled.' : 'Waiting for queries'; return; }
  if (!current || current.id !== next.id) {
    current = next; document.getElementById('a').src = next.a; document.getElementById('b').src = next.b;
  }
  status.textContent = `pair ${next.id}`;
}
async function send(label) {
  if (!current) return;
  const r = await fetch('/api/label', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                       body: JSON.stringify({pair: current.id, label})});
  if (r.ok) { labels[current.id] = label; show(); }
}
async function undo() {
  const r = await fetch('/api/undo', {method: 'POST'});
  if (r.ok) { delete labels[(await r.json()).pair]; current = null; show(); }
}
const keys = {ArrowLeft: 'first', '1': 'first', ArrowRight: 'second', '2': 'second', '=': 'equal', '0': 'equal',
              s: 'skip'};
document.addEventListener('keydown', e => {
  if (e.key in keys) send(keys[e.key]); else if (e.key === 'u' || e.key === 'Backspace') undo();
});
refresh(); setInterval(refresh, 1000);
</script></body></html>"""


@dataclass
class LabelServer:
    """The page and its API on 127.0.0.1:``port`` (0: a free port); ``publish`` adds pairs, ``labels`` reads them."""

    task: str
    port: int = 0
    _pairs: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    _labels: dict[str, str] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list)  # labelled ids, newest last (undo)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def publish(self, pairs: dict[str, tuple[Path, Path]]) -> None:
        with self._changed:
            self._pairs.update(pairs)
            self._changed.notify_all()

    def wait(self, ids: list[str], timeout_s: float) -> dict[str, str]:
        """The labels of ``ids`` once all are given or ``timeout_s`` has passed (those missing are absent)."""
        end = time.monotonic() + timeout_s
        with self._changed:
            while not all(i in self._labels for i in ids) and (left := end - time.monotonic()) > 0:
                self._changed.wait(left)
            return {i: self._labels[i] for i in ids if i in self._labels}

    # -- the API ----------------------------------------------------------------------------
    def _state(self) -> dict:
        pairs = [{"id": i, "a": f"/video/{i}/0.mp4", "b": f"/video/{i}/1.mp4"} for i in self._pairs]
        return {"task": self.task, "pairs": pairs, "labels": dict(self._labels)}

    def _label(self, body: dict) -> tuple[int, dict]:
        pair, label = body.get("pair"), body.get("label")
        if pair not in self._pairs:
            return 404, {"error": f"unknown pair {pair!r}"}
        if label not in LABELS:
            return 400, {"error": f"label must be one of {sorted(LABELS)}, got {label!r}"}
        with self._changed:
            self._labels[pair] = label
            self._order = [i for i in self._order if i != pair] + [pair]
            self._changed.notify_all()
            return 200, {"done": len(self._labels)}

    def _undo(self) -> tuple[int, dict]:
        with self._changed:
            if not self._order:
                return 409, {"error": "nothing to undo"}
            pair = self._order.pop()
            del self._labels[pair]
            return 200, {"pair": pair}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _json(self, status: int, doc: dict) -> None:
                self._send(status, json.dumps(doc).encode())

            def do_GET(self):
                if self.path == "/":
                    return self._send(200, PAGE.encode(), "text/html; charset=utf-8")
                if self.path == "/api/pairs":
                    return self._json(200, server._state())
                m = re.fullmatch(r"/video/([\w.-]+)/([01])\.mp4", self.path)
                if m and m[1] in server._pairs:
                    return self._send(200, server._pairs[m[1]][int(m[2])].read_bytes(), "video/mp4")
                self._json(404, {"error": f"no such page {self.path!r}"})

            def do_POST(self):
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                except ValueError:
                    return self._json(400, {"error": "the body is not JSON"})
                if self.path == "/api/label":
                    if not isinstance(body, dict):
                        return self._json(400, {"error": "the body must be a JSON object"})
                    return self._json(*server._label(body))
                if self.path == "/api/undo":
                    return self._json(*server._undo())
                self._json(404, {"error": f"no such endpoint {self.path!r}"})

            def log_message(self, *args):
                pass

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class PersonTeacher:
    """A person answers through ``server``'s page; each query's segments are rendered by ``renderer`` at ``fps``."""

    server: LabelServer
    renderer: object  # frames.SceneRenderer
    pose: object  # the brief's pose function
    task: object = None
    timeout_s: float = 3600.0
    fps: float = 25.0
    asked: int = 0
    _dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="embody-label-")))

    def videos(self, obs: np.ndarray, name: str) -> tuple[Path, Path]:
        from embody.video import VideoWriter

        paths = []
        for j in (0, 1):
            path = self._dir / f"{name}-{j}.mp4"
            with VideoWriter(path, self.fps) as w:
                for frame in self.renderer.render(self.pose(obs[j], self.task), obs[j]):
                    w.write(frame)
            paths.append(path)
        return paths[0], paths[1]

    def label(self, pairs: dict[str, np.ndarray]) -> np.ndarray:
        ids = [f"q{self.asked + i}" for i in range(len(pairs["obs"]))]
        self.asked += len(ids)
        self.server.publish({i: self.videos(obs, i) for i, obs in zip(ids, pairs["obs"])})
        print(f"label {len(ids)} pairs at {self.server.url}", flush=True)
        given = self.server.wait(ids, self.timeout_s)
        return np.array([LABELS.get(given.get(i, "skip")) for i in ids])
