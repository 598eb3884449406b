"""Real-time scheduling for the threads that must keep a rate (the 500 Hz command writer).

On a loaded machine the kernel's fair scheduler lets a busy process (a training, a camera pipeline)
delay a sleeping writer by several milliseconds each time it wakes. ``SCHED_FIFO`` makes the thread
preempt every normal thread the moment its sleep ends. It needs root, ``CAP_SYS_NICE`` or an
``rtprio`` limit (``/etc/security/limits.conf``: ``USER - rtprio 90``) on the robot's computer;
without them the thread keeps running at normal priority and says so once.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("embody.hardware.realtime")

DEFAULT_PRIORITY = 80  # above the kernel's threaded IRQs (50), below its watchdogs (99)


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
    """Put the calling thread under SCHED_FIFO at ``priority`` (1–99; None or 0: leave it as it is).
    Returns whether it now runs real-time; logs a warning naming ``name`` when it could not."""
    if not priority:
        return False
    if not 1 <= priority <= 99:
        raise ValueError(f"real-time priority {priority} for {name}: must be in 1..99")
    if not hasattr(os, "sched_setscheduler"):
        log.warning("%s: no SCHED_FIFO on this platform; running at normal priority", name)
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))  # 0: this thread (Linux)
    except OSError as e:
        log.warning(
            "%s: SCHED_FIFO %d refused (%s); running at normal priority (needs root, CAP_SYS_NICE or an rtprio limit)",
            name,
            priority,
            e.strerror,
        )
        return False
    return True
