"""An OpenAI-compatible chat endpoint: the client every method that asks an LLM shares, and a
loopback stand-in server for their tests. Standard library only (urllib, http.server, json).

* ``ChatClient(base_url, model).chat(messages) -> str``: ``POST {base_url}/chat/completions`` at
  temperature 0, the first choice's content back; every failure is a ``ChatError`` that names
  the endpoint.
* ``LoopbackChatServer``: a real ``http.server`` on 127.0.0.1 (port 0) that answers scripted
  replies and records each request, so tests exercise the same sockets, headers and timeouts a
  real server would.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY_ENV = "EMBODY_LLM_API_KEY"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class ChatError(RuntimeError):
    """The chat endpoint could not be reached, failed, or answered something that is not a completion."""


def one_line(text: object, n: int = 300) -> str:
    """``text`` on one line, cut to ``n`` characters: for quoting replies in error messages."""
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


# ---------------------------------------------------------------- the client


@dataclass(frozen=True)
class ChatClient:
    """An OpenAI-compatible chat-completions client (``POST {base_url}/chat/completions``).

    ``base_url`` is the API root, e.g. ``http://127.0.0.1:8000/v1``. ``api_key`` is sent as
    ``Authorization: Bearer``; when not given it is read from ``$EMBODY_LLM_API_KEY`` (unset:
    no header, as local servers expect). ``timeout_s`` bounds connecting and each read. A
    connection reset before any answer is retried once (servers drop idle keep-alive
    sockets); every other failure raises ``ChatError`` at once. Proxies follow the usual
    ``*_proxy`` environment variables, as everywhere in urllib, except for a loopback host,
    which no proxy can reach.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)  # never in logs
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.api_key is None:
            object.__setattr__(self, "api_key", os.environ.get(API_KEY_ENV) or None)

    @property
    def url(self) -> str:
        """The chat-completions endpoint: ``base_url`` + ``/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def chat(self, messages: Sequence[dict]) -> str:
        """The first choice's message content for ``messages`` (``[{"role", "content"}, ...]``), temperature 0."""
        body = json.dumps({"model": self.model, "messages": list(messages), "temperature": 0}).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            text = self._post(body, headers)
        except ConnectionResetError:
            try:
                text = self._post(body, headers)  # the one retry (see the class doc)
            except ConnectionResetError:
                raise ChatError(f"LLM endpoint {self.url} closed the connection twice without answering") from None
        return self._content(text)

    def _opener(self) -> urllib.request.OpenerDirector:
        if urllib.parse.urlsplit(self.url).hostname in LOOPBACK_HOSTS:
            return urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return urllib.request.build_opener()

    def _post(self, body: bytes, headers: dict) -> str:
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with self._opener().open(request, timeout=self.timeout_s) as response:
                return response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as e:  # before URLError: it is one
            detail = e.read().decode("utf-8", errors="replace") if e.fp else ""
            raise ChatError(
                f"LLM endpoint {self.url} answered HTTP {e.code} {e.reason}: {one_line(detail) or '(empty body)'}"
            ) from None
        except urllib.error.URLError as e:
            raise self._network_error(e.reason) from e
        except ConnectionResetError:  # http.client.RemoteDisconnected too: retried once by chat()
            raise
        except (OSError, http.client.HTTPException) as e:  # timeouts and resets while reading the body
            raise self._network_error(e) from e

    def _network_error(self, reason) -> Exception:
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return ChatError(f"LLM endpoint {self.url} did not answer within timeout_s={self.timeout_s:g} s")
        if isinstance(reason, ConnectionResetError):
            return reason  # retried once by chat()
        if isinstance(reason, ConnectionRefusedError):
            return ChatError(f"cannot reach LLM endpoint {self.url}: connection refused (is the server running?)")
        return ChatError(f"cannot reach LLM endpoint {self.url}: {one_line(reason)}")

    def _content(self, text: str) -> str:
        try:
            reply = json.loads(text)
        except json.JSONDecodeError:
            raise ChatError(f"LLM endpoint {self.url} answered malformed JSON: {one_line(text)!r}") from None
        try:
            content = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise ChatError(f"LLM endpoint {self.url} answered without choices[0].message.content: {one_line(text)}")
        return content


# ---------------------------------------------------------------- a loopback stand-in

DROP = "drop"  # a scripted reply: close the connection without answering
Reply = tuple[int, bytes, float] | str  # (HTTP status, body, delay_s) or DROP


def completion(content: str) -> bytes:
    """A ``chat.completion`` response body whose first choice holds ``content``."""
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "loopback",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
    ).encode()


def _parsed(body: bytes):
    try:
        return json.loads(body)
    except ValueError:  # recorded as text: the test shows what the client sent
        return body.decode("utf-8", errors="replace")


class LoopbackChatServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 (a free port), for tests and offline demos.

    Each POST is recorded in ``requests`` as ``{"path", "headers", "body"}`` (body: the parsed
    JSON) and answered with the next of ``replies``: ``(status, body_bytes, delay_s)``, or
    ``DROP`` to close the connection unanswered. ``say``/``fail``/``drop`` append the usual ones.
    With none left it answers ``default`` as the content, or HTTP 500 when ``default`` is None, so
    a test that scripted too few replies fails loudly. ``respond(body) -> content`` instead computes
    each unscripted answer from the request (a stand-in model); ``record=False`` keeps no requests
    (long runs). ``url`` is the API root to give ``ChatClient``. A context manager; ``close()`` also
    ends replies still being delayed.
    """

    completion = staticmethod(completion)

    def __init__(self, default: str | None = None, respond: Callable[[dict], str] | None = None, record: bool = True):
        self.default, self.respond, self.record = default, respond, record
        self.requests: list[dict] = []
        self.replies: list[Reply] = []
        self._release = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.handle_error = lambda *a: None  # a client that timed out breaks the pipe: expected
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        # serve_forever polls every 0.02 s so that close() returns at once
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def say(self, content: str, delay_s: float = 0.0) -> None:
        """Script a completion whose content is ``content``, sent after ``delay_s``."""
        self.replies.append((200, completion(content), delay_s))

    def fail(self, status: int, body: bytes = b"", delay_s: float = 0.0) -> None:
        """Script an HTTP error (or any raw body: ``fail(200, b"not json")``)."""
        self.replies.append((status, body, delay_s))

    def drop(self) -> None:
        """Script a connection closed without an answer."""
        self.replies.append(DROP)

    def _next(self, body) -> Reply:
        if self.replies:
            return self.replies.pop(0)
        if self.respond is not None:
            try:
                return 200, completion(self.respond(body)), 0.0
            except Exception as e:  # noqa: BLE001 - a stand-in's bug is the client's HTTP 500, as a real server's
                return 500, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode(), 0.0
        if self.default is None:
            return 500, b'{"error": "LoopbackChatServer: no scripted reply left"}', 0.0
        return 200, completion(self.default), 0.0

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = _parsed(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if server.record:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                reply = server._next(body)
                if reply == DROP:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, data, delay = reply
                if delay:
                    server._release.wait(delay)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet: tests read .requests instead
                pass

        return Handler

    def close(self) -> None:
        """Release any delayed replies, stop serving and free the port."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackChatServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
