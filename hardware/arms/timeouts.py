"""Deadlines for talking to arm controllers whose client libraries can block forever.

Both vendor libraries block without a deadline on a peer that accepts a TCP connection and
never answers: ur_rtde waits in its RTDE handshake forever, libfranka waits its 60 s TCP
timeout. Worse, their constructors hold the GIL while they wait (measured with ur-rtde 1.6.5
and pylibfranka 0.21.3: a daemon thread constructing ``RTDEReceiveInterface`` or ``Robot``
against a silent server stops every other Python thread, so a ``Thread.join(timeout)`` in
the caller never returns). A Python-side timeout around the constructor therefore cannot work.

So connecting is two steps, both in plain Python with socket timeouts, before the library is
touched:

1. ``probe`` opens a TCP connection to host:port: unreachable or refused fails at once;
2. it then says hello in the controller's own protocol (or waits for the greeting a server
   sends first) and needs an answer in time: a silent peer fails with "did not answer".

Only a controller that has just answered is handed to the library. What remains unbounded is a
controller that answers the hello and then stalls inside the library's own handshake (ur_rtde,
for one, waits for the first data package without a deadline). ``BlockingCaller`` bounds
later blocking calls for libraries whose methods release the GIL (ur_rtde's do; pylibfranka's
do not, so the Franka driver relies on libfranka's own network timeouts and on ``state_age``).
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..interface import RobotConnectionError


def endpoint(host: str, port: int) -> str:
    """``host:port`` as in messages ([v6]:port for IPv6 literals)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def probe(
    host: str, port: int, timeout_s: float, hello: bytes = b"", what: str = "robot controller", reply_bytes: int = 3
) -> bytes:
    """Connect to host:port and return the peer's first ``reply_bytes`` bytes (fewer if it closes
    after some), all within ``timeout_s`` seconds.

    hello: sent right after connecting (empty: the server speaks first, e.g. a greeting).
    Raises RobotConnectionError naming host:port: unreachable or refused (at once), no TCP
    connection within the timeout, accepted but silent ("did not answer"), or closed at once.
    """
    where = endpoint(host, port)
    deadline = time.monotonic() + timeout_s
    try:
        # getaddrinfo has no timeout of its own (a hostname can stall in DNS); it releases the GIL
        family, kind, proto, _, address = call_with_timeout(
            lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0], timeout_s, f"resolving {host!r}"
        )
        sock = socket.socket(family, kind, proto)
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        try:
            sock.connect(address)
        except BaseException:
            sock.close()
            raise
    except TimeoutError:
        raise RobotConnectionError(
            f"cannot reach the {what} at {where}: no TCP connection within {timeout_s:g} s "
            f"(host down, wrong address or a firewall dropping packets)"
        ) from None
    except RobotConnectionError as e:  # DNS did not answer in time
        raise RobotConnectionError(f"cannot reach the {what} at {where}: {e}") from e
    except OSError as e:  # refused, unreachable, unknown host: fail now, with the OS's reason
        reason = e.strerror or str(e)
        raise RobotConnectionError(f"cannot reach the {what} at {where}: {reason}") from e
    with sock:
        reply = b""
        try:
            if hello:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                sock.sendall(hello)
            while len(reply) < reply_bytes:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                chunk = sock.recv(reply_bytes - len(reply))
                if not chunk:
                    break
                reply += chunk
        except TimeoutError:
            if not reply:
                raise RobotConnectionError(
                    f"the {what} at {where} accepted the connection but did not answer within {timeout_s:g} s "
                    f"(a controller still booting or hung, or a different service on that port)"
                ) from None
        except OSError as e:
            raise RobotConnectionError(f"the {what} at {where} dropped the connection: {e.strerror or e}") from e
    if not reply:
        raise RobotConnectionError(
            f"the {what} at {where} accepted the connection and closed it without answering "
            f"(another client connected, or the service is shutting down)"
        )
    return reply


class BlockingCaller:
    """Runs blocking library calls on one daemon worker thread with a deadline per call.

    A call that misses its deadline leaves the worker stuck inside the library; the caller gets
    RobotConnectionError, and every later call fails at once (the controller stopped answering;
    reconnect with a new driver). The worker is a daemon so that a stuck call never keeps the
    process from exiting. Effective only for calls that release the GIL while they block.
    """

    def __init__(self, name: str):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._stuck: str | None = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def stuck(self) -> str | None:
        """What the call that missed its deadline was, or None."""
        return self._stuck

    def call(self, fn: Callable[..., Any], *args: Any, timeout_s: float, what: str) -> Any:
        """``fn(*args)`` on the worker; its result, its exception, or RobotConnectionError after
        ``timeout_s`` naming ``what``."""
        if self._stuck is not None:
            raise RobotConnectionError(
                f"{self.name}: not sending {what}: an earlier call ({self._stuck}) is still "
                f"blocked in the library; the controller stopped answering"
            )
        done, box = threading.Event(), {}
        self._jobs.put((fn, args, box, done))
        if not done.wait(timeout_s):
            self._stuck = what
            where = "" if what == self.name else f" ({self.name})"
            raise RobotConnectionError(f"{what} did not answer within {timeout_s:g} s{where}")
        if "error" in box:
            raise box["error"]
        return box["result"]

    def close(self) -> None:
        """Let the worker exit once it is idle (a stuck worker stays; it is a daemon)."""
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, box, done = job
            try:
                box["result"] = fn(*args)
            except BaseException as e:  # handed to the caller, who decides
                box["error"] = e
            done.set()


def call_with_timeout(fn: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """One blocking call with a deadline, on a throwaway daemon thread (see BlockingCaller)."""
    caller = BlockingCaller(what)
    try:
        return caller.call(fn, timeout_s=timeout_s, what=what)
    finally:
        caller.close()


__all__ = ["BlockingCaller", "call_with_timeout", "endpoint", "probe"]
