"""Real-time scheduling for the threads that must keep a rate (the 500 Hz command writer).

On a loaded machine the kernel's fair scheduler lets a busy process (a training, a camera pipeline)
delay a sleeping writer by several milliseconds each time it wakes. ``SCHED_FIFO`` makes the thread
preempt every normal thread the moment its sleep ends. It needs root, ``CAP_SYS_NICE`` or an
``rtprio`` limit (``/etc/security/limits.conf``: ``USER - rtprio 90``) on the robot's computer;
without them the thread keeps running at normal priority and a warning says so.

Priority alone does not help a Python thread waiting for the GIL: the writer waits for whichever
thread holds it. ``shorten_gil_switch`` bounds that wait while a driver runs (a deploy's policy step
holds the GIL for milliseconds), and the session's step loop runs under SCHED_FIFO just below the
writer (``realtime_thread``), so that no training can preempt it while it holds the GIL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

log = logging.getLogger("embody.hardware.realtime")

DEFAULT_PRIORITY = 80  # the command writer: above the kernel's threaded IRQs (50), below its watchdogs (99)
POLICY_PRIORITY = 70  # a session's step loop: preempted by the writer, never by a training


def permitted(priority: int | None) -> bool:
    """Whether a thread of this process may take SCHED_FIFO at ``priority`` (probed on a short-lived
    thread, so the caller's own scheduling is untouched)."""
    if not priority or not hasattr(os, "sched_setscheduler"):
        return False
    result = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, name="embody-rt-probe")
    t.start()
    t.join()
    return result[0]


def make_realtime(priority: int | None, name: str) -> bool:
    """Put the calling thread under SCHED_FIFO at ``priority`` (1–99; None or 0: leave it as it is); the
    threads it starts do not inherit it. Returns whether it now runs real-time; logs a warning naming
    ``name`` when it could not."""
    if not priority:
        return False
    if not 1 <= priority <= 99:
        raise ValueError(f"real-time priority {priority} for {name}: must be in 1..99")
    if not hasattr(os, "sched_setscheduler"):
        log.warning("%s: no SCHED_FIFO on this platform; running at normal priority", name)
        return False
    # RESET_ON_FORK: threads and processes it starts (a torch pool, a video encoder) begin at normal priority
    policy = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0)
    try:
        os.sched_setscheduler(0, policy, os.sched_param(priority))  # 0: this thread (Linux)
    except OSError as e:
        log.warning(
            "%s: SCHED_FIFO %d refused (%s); running at normal priority (needs root, CAP_SYS_NICE or an rtprio limit)",
            name,
            priority,
            e.strerror,
        )
        return False
    return True


@contextlib.contextmanager
def scheduling_kept():
    """The calling thread's scheduling as it was before the block, also when the block raised (pylibfranka
    leaves a thread that failed to connect under SCHED_FIFO 99, measured)."""
    before = (os.sched_getscheduler(0), os.sched_getparam(0)) if hasattr(os, "sched_getscheduler") else None
    try:
        yield
    finally:
        if before is not None and (os.sched_getscheduler(0), os.sched_getparam(0)) != before:
            os.sched_setscheduler(0, *before)


@contextlib.contextmanager
def realtime_thread(priority: int | None, name: str):
    """The calling thread under SCHED_FIFO at ``priority`` for the ``with`` block (where permitted),
    its previous scheduling restored after; yields whether it ran real-time."""
    with scheduling_kept():
        yield make_realtime(priority, name)


# A thread waiting for the GIL asks its holder to drop it only after the switch interval (5 ms by
# default): a policy thread computing in Python would delay every writer tick by that much. The
# writer needs the GIL ~50 µs per 2 ms tick; 0.2 ms bounds its wait at little cost to the others.
GIL_SWITCH_S = 2e-4
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


def shorten_gil_switch() -> None:
    """While at least one caller holds it (paired with ``restore_gil_switch``): the interpreter's
    switch interval at most ``GIL_SWITCH_S``."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, GIL_SWITCH_S))
        _switch_users += 1


def restore_gil_switch() -> None:
    """Release ``shorten_gil_switch``; the last release restores the interval found at the first."""
    global _switch_users
    with _switch_lock:
        _switch_users = max(0, _switch_users - 1)
        if _switch_users == 0 and _switch_saved:
            sys.setswitchinterval(_switch_saved)
