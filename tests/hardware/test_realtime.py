"""Real-time scheduling of the writer thread and the DDS receive threads (hardware/realtime.py)."""

import os
import threading

import pytest

from embody.hardware.realtime import make_realtime, permitted, realtime_thread

needs_fifo = pytest.mark.skipif(not permitted(1), reason="this process may not use SCHED_FIFO (not root, no rtprio)")


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@needs_fifo
def test_make_realtime_switches_only_the_calling_thread():
    def run():
        ok = make_realtime(10, "test")
        return ok, os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(0).sched_priority

    before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    assert _in_thread(run) == (True, os.SCHED_FIFO, 10)
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before  # the caller is untouched


@needs_fifo
def test_threads_started_by_a_realtime_thread_run_at_normal_priority():
    def run():  # e.g. a torch thread pool or a video encoder started inside the session's step loop
        with realtime_thread(10, "test"):
            return _in_thread(lambda: (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))

    assert _in_thread(run) == (os.SCHED_OTHER, 0)


def test_no_priority_leaves_the_thread_alone_and_bad_priorities_are_refused():
    def run():
        before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
        return make_realtime(None, "test"), (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before

    assert _in_thread(run) == (False, True)
    with pytest.raises(ValueError, match="real-time priority 120 for test: must be in 1..99"):
        make_realtime(120, "test")


def test_a_refused_request_warns_and_keeps_normal_priority(monkeypatch, caplog):
    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    assert not permitted(80)
    assert _in_thread(lambda: make_realtime(80, "h1_2 command writer")) is False
    assert "h1_2 command writer: SCHED_FIFO 80 refused (Operation not permitted)" in caplog.text


def test_dds_config_puts_the_receive_threads_under_sched_fifo():
    pytest.importorskip("cyclonedds", reason="needs the hardware extra")
    from embody.hardware.dds import RECEIVE_THREADS, dds_config

    assert "<Threads>" not in dds_config("lo")
    xml = dds_config("lo", 70)
    for name in RECEIVE_THREADS:
        assert f'<Thread name="{name}"><Scheduling><Class>realtime</Class><Priority>70</Priority>' in xml
