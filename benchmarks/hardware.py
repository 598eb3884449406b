"""``embody bench hardware``: the H1-2 wire path, against a straightforward implementation.

1. Codec, µs per message: embody builds the packed C struct from arrays, CRCs it with zlib and
   sends it as CDR bytes directly; the straightforward way (the vendor's Python SDK's) builds
   the 35 nested message objects, packs them field by field with ``struct``, runs the bitwise
   CRC and lets cyclonedds serialize the objects. Reading: CDR → arrays + CRC check, against
   cyclonedds deserialization + struct + bitwise CRC.
2. Control loop at 500 Hz on loopback DDS against ``embody robot-sim h1_2`` in its own process,
   the robot held on the band: writer period and its jitter (|period − 2 ms|), gaps between
   received states, and command→state latency (robot-sim echoes the CRC of the command it last
   stepped with). embody's H1-2 driver (supervisor in HOLD; its writer thread under SCHED_FIFO, and
   again at normal priority) against a straightforward loop (objects, bitwise CRC, ``sleep(period)``
   after the work) in the same run. robot-sim steps under SCHED_FIFO: it stands in for the robot's
   own controller, which a training on this machine would not delay. Loads: a 50 Hz "policy"
   thread in the loops' process computing in Python for ``--policy-ms`` per step (the GIL
   contention of a deploy), and with ``--under-training`` an ``embody train h1_2-velocity`` on all
   cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from embody.commands import nonneg_float, nonneg_int, positive_float

PERIOD = 1.0 / 500.0


def _best_us(fn, n: int = 200) -> float:
    from embody.benchmarks import best_seconds

    return best_seconds(fn, n) * 1e6


def _baseline_lowcmd(msg, q, kp, kd, seq: int = 0):
    """LowCmd_ the straightforward way: objects per motor, struct pack + bitwise CRC."""
    motors = [
        msg.MotorCmd_(mode=1, q=float(q[i]), dq=0.0, tau=0.0, kp=float(kp[i]), kd=float(kd[i]), reserve=0)
        for i in range(msg.NUM_MOTORS)
    ]
    cmd = msg.LowCmd_(mode_pr=0, mode_machine=0, motor_cmd=motors, reserve=[seq, 0, 0, 0], crc=0)
    cmd.crc = msg.lowcmd_crc_baseline(cmd)
    return cmd


def _baseline_state_ok(msg, sample) -> bool:
    words = np.frombuffer(msg.pack_lowstate_struct(sample), dtype="<u4")
    return msg.crc32_core_bitwise(words[:-1]) == sample.crc


def codec(robot) -> dict:
    """Per H1-2 message operation (LowCmd_ build + CRC + serialize, LowState_ parse + CRC check, CRC
    alone): ``embody_us``, ``straightforward_us`` (µs per call, the vendor-SDK way) and ``speedup``."""
    from embody.hardware.interface import JointCommand
    from embody.hardware.unitree import messages as msg
    from embody.hardware.unitree import wire
    from embody.hardware.unitree.h1_2 import lowcmd_packed, state_from_lowstate

    pad = lambda a: np.pad(a, (0, msg.NUM_MOTORS - len(a)))  # noqa: E731
    q, kp, kd = pad(robot.default_pose), pad(robot.kp), pad(robot.kd)
    command = JointCommand.pd(robot, robot.default_pose)
    rng = np.random.default_rng(0)
    m = lambda: rng.normal(size=msg.NUM_MOTORS)  # noqa: E731
    state = msg.lowstate_record(
        m(), m(), m(), m(), np.full(msg.NUM_MOTORS, 40), [1, 0, 0, 0], np.zeros(3), [0, 0, 9.8], np.zeros(3)
    )
    cdr_state = wire.to_cdr(state, "LowState_")

    def ours_read():
        packed = wire.from_cdr(cdr_state, "LowState_")
        assert msg.packed_crc_ok(packed)
        state_from_lowstate(msg.lowstate_arrays(packed), robot.n_joints, 0.0)

    def base_read():
        sample = msg.LowState_.deserialize(cdr_state)
        assert _baseline_state_ok(msg, sample)

    rows = {
        "LowCmd_ build + CRC + serialize": (
            _best_us(lambda: wire.to_cdr(lowcmd_packed(command, 0), "LowCmd_")),
            _best_us(lambda: _baseline_lowcmd(msg, q, kp, kd).serialize(), n=20),
        ),
        "LowState_ parse + CRC check": (_best_us(ours_read), _best_us(base_read, n=20)),
        "CRC only (LowCmd_, 250 words)": (
            _best_us(lambda: msg.crc32_core(np.zeros(250, np.uint32))),
            _best_us(lambda: msg.crc32_core_bitwise(np.zeros(250, np.uint32)), n=20),
        ),
    }
    return {k: {"embody_us": a, "straightforward_us": b, "speedup": b / a} for k, (a, b) in rows.items()}


def _percentiles(x: list[float]) -> dict:
    a = np.asarray(x) * 1e3
    if a.size == 0:
        return {"n": 0}
    return {
        "n": int(a.size),
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
    }


def _loop_summary(ticks: list[float], arrivals: list[float], latency: list[float], seconds: float) -> dict:
    periods = np.diff(ticks)
    return {
        "rate_hz": len(ticks) / seconds,
        "period": _percentiles(periods.tolist()),
        "jitter": _percentiles(np.abs(periods - PERIOD).tolist()),
        "state_gap": _percentiles(np.diff(arrivals).tolist()),
        "latency": _percentiles(latency),
    }


def ours_loop(robot, domain: int, seconds: float, realtime_priority: int | None = 80) -> dict:
    """embody's H1-2 driver against the loopback robot-sim on DDS ``domain`` for ``seconds`` after the
    ramp: ``rate_hz`` and p50/p99/max (ms) of period, jitter, state gap and command→state latency;
    ``realtime``: whether its writer ran under SCHED_FIFO (``realtime_priority``; None: normal)."""
    from embody.hardware.supervisor import Phase, SafetySupervisor, SupervisorConfig
    from embody.hardware.unitree.h1_2 import H1_2Driver

    sup = SafetySupervisor(robot, SupervisorConfig(ramp_s=1.0))
    driver = H1_2Driver(iface="lo", domain=domain, supervisor=sup, robot=robot, realtime_priority=realtime_priority)
    driver.connect(10.0)
    with driver:
        sup.start_ramp()
        while sup.phase is not Phase.HOLD:
            time.sleep(0.01)
        driver.trace = {}
        time.sleep(seconds)
        trace, driver.trace = driver.trace, None
    summary = _loop_summary(trace.get("ticks", []), trace.get("arrivals", []), trace.get("latency", []), seconds)
    return {**summary, "realtime": driver.stats["realtime"]}


def straightforward_loop(robot, domain: int, seconds: float) -> dict:
    """The vendor-SDK way: message objects, bitwise CRC, cyclonedds (de)serialization, sleep(period)."""
    from embody.hardware import dds
    from embody.hardware.unitree import messages as msg

    pad = lambda a: np.pad(a, (0, msg.NUM_MOTORS - len(a)))  # noqa: E731
    q, kp, kd = pad(robot.default_pose), pad(robot.kp), pad(robot.kd)
    sent: dict[int, float] = {}
    arrivals, latency, ticks = [], [], []

    def on_data(reader):
        for sample in reader.take(N=64):
            if _baseline_state_ok(msg, sample):
                now = time.monotonic()
                arrivals.append(now)
                t = sent.pop(int(sample.reserve[0]), None)
                if t is not None:
                    latency.append(now - t)

    writer, reader = dds.endpoints(
        domain, "lo", (msg.TOPIC_LOWCMD, msg.LowCmd_), (msg.TOPIC_LOWSTATE, msg.LowState_), on_data
    )
    end, seq = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        ticks.append(time.monotonic())
        cmd = _baseline_lowcmd(msg, q, kp, kd, seq)
        writer.write(cmd)
        sent[cmd.crc] = ticks[-1]
        seq += 1
        time.sleep(PERIOD)
    reader.set_listener(None)
    return _loop_summary(ticks, arrivals, latency, seconds)


@contextlib.contextmanager
def policy_thread(busy_ms: float, priority: int | None = None, period_s: float = 0.02):
    """A 50 Hz thread in this process that computes in Python for ``busy_ms`` each step, holding the
    GIL as a deployed policy's observation and inference do (0: none); ``priority``: under SCHED_FIFO,
    as embody's session runs its step loop."""
    from embody.hardware.realtime import realtime_thread

    stop = threading.Event()

    def run():
        with realtime_thread(priority, "bench policy"):
            while not stop.is_set():
                start, x = time.perf_counter(), 0
                while time.perf_counter() - start < busy_ms / 1000:
                    for i in range(100):
                        x += i
                stop.wait(max(0.0, period_s - (time.perf_counter() - start)))

    thread = threading.Thread(target=run, name="bench-policy", daemon=True)
    if busy_ms > 0:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if busy_ms > 0:
            thread.join()


@contextlib.contextmanager
def training_load(enabled: bool, warmup_s: float = 20.0):
    """``embody train h1_2-velocity`` in a child process (both cores busy) while the loops run."""
    if not enabled:
        yield
        return
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "embody.cli", "train", "h1_2-velocity", "--steps", "1000000000", "--out", out]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(warmup_s)  # past imports and compilation: PPO rollouts and updates on both cores
            if proc.poll() is not None:
                raise RuntimeError(f"the load training exited early: {' '.join(cmd)}")
            yield
        finally:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    """``embody bench hardware``: start a loopback robot-sim (DDS on ``lo``), run the codec and both
    control loops, print the results; ``--out DIR`` writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results
    from embody.hardware.deploy import start_robot_sim, stop_robot_sim
    from embody.hardware.realtime import POLICY_PRIORITY
    from embody.robots import get_robot

    p = argparse.ArgumentParser(
        prog="embody bench hardware", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=positive_float, default=5.0, help="seconds of each control loop")
    p.add_argument("--domain", type=nonneg_int, default=231, help="DDS domain for the loopback robot-sim")
    p.add_argument(
        "--policy-ms",
        type=nonneg_float,
        default=3.0,
        help="ms of Python per step of a 50 Hz policy thread in the loops' process (GIL load; 0: none)",
    )
    p.add_argument(
        "--under-training",
        action="store_true",
        help="run the loops while `embody train h1_2-velocity` keeps both cores busy",
    )
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    robot = get_robot("h1_2")
    result = {
        "cores": os.cpu_count(),
        "policy_ms": args.policy_ms,
        "under_training": args.under_training,
        "codec": codec(robot),
    }
    # robot-sim stands in for the robot's own controller, which no training on this machine would delay
    sim = start_robot_sim("h1_2", "lo", args.domain, band=True, realtime=80)
    try:
        with training_load(args.under_training):
            with policy_thread(args.policy_ms, POLICY_PRIORITY):
                result["embody"] = ours_loop(robot, args.domain, args.seconds)
            with policy_thread(args.policy_ms):
                result["embody-normal-priority"] = ours_loop(robot, args.domain, args.seconds, realtime_priority=None)
                result["straightforward"] = straightforward_loop(robot, args.domain, args.seconds)
    finally:
        stop_robot_sim(sim)
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    load = "a PPO training on all cores" if r["under_training"] else "no training"
    print(
        f"\nembody bench hardware: H1-2 wire path, {r['cores']} cores; loops with a 50 Hz policy thread "
        f"computing {r['policy_ms']:g} ms per step in their process, {load}\n"
    )
    print("| per message | embody µs | straightforward µs | speedup |\n|---|---|---|---|")
    for name, c in r["codec"].items():
        print(f"| {name} | {c['embody_us']:.1f} | {c['straightforward_us']:.1f} | {c['speedup']:.0f}× |")
    loops = {
        "embody": r["embody"],
        "embody, writer + policy at normal priority": r["embody-normal-priority"],
        "straightforward": r["straightforward"],
    }
    print("\n| 500 Hz loop on loopback | " + " | ".join(loops) + " |\n|---|---|---|---|")
    print(
        "| writer thread | "
        + " | ".join("SCHED_FIFO" if d.get("realtime") else "normal" for d in loops.values())
        + " |"
    )
    print("| commands/s | " + " | ".join(f"{d['rate_hz']:.0f}" for d in loops.values()) + " |")
    for key, label in (
        ("period", "writer period"),
        ("jitter", "period jitter"),
        ("state_gap", "state gap"),
        ("latency", "command→state latency"),
    ):
        fmt = lambda d: f"p50 {d['p50_ms']:.2f} / p99 {d['p99_ms']:.2f} / max {d['max_ms']:.1f} ms" if d["n"] else "—"  # noqa: E731
        print(f"| {label} | " + " | ".join(fmt(d[key]) for d in loops.values()) + " |")
