"""Independent jobs (a grid of configs × seeds) run on a backend, each result kept the moment it finishes.

On disk, a study folder ``root`` holds one file per finished job, written atomically (never half a file)::

    root/jobs/<job name>.json   {"name": str, "params": {...}, "fingerprint": {...}, "result": <JSON>}

``fingerprint`` is the study's configuration minus what does not change a job's result (worker count,
the seeds the jobs carry themselves). Rerunning a study on the same folder skips the jobs found there
(resume after an interruption); a folder holding another fingerprint's jobs is refused, naming the
keys that differ, so one folder never mixes configurations. ``merge_stores`` pools folders run apart
(e.g. seeds on different machines). Backends are registered by name in ``BACKENDS``.

Several processes may share one folder, even one seed: a job about to start is claimed with
``root/jobs/.<job name>.claim`` (created exclusively; pid and host), a job finished or claimed by another
process meanwhile is left to it, and each process waits at the end for the jobs others hold, taking over
those whose process has died (same host). A process ended by Ctrl-C or SIGTERM releases its claims on the way
out (SIGKILL cannot be caught: its claims and half-written files wait for the next process to open the folder).
A claim from another host is honoured until removed by hand.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from embody import exits
from embody.files import write_atomic
from embody.progress import Progress
from embody.registry import Registry

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")


class StoreConflict(ValueError):
    """Job results that must not be pooled: another configuration's, or the same job twice."""

    exit_code = exits.INPUT  # the command prints one line, no traceback


@dataclass(frozen=True)
class Job:
    """``name``: unique in its study and filesystem-safe (e.g. "seed0-informed"); ``params``: JSON-able, passed to the job fn."""

    name: str
    params: dict = field(hash=False)

    def __post_init__(self):
        if not _SAFE.fullmatch(self.name):
            raise ValueError(f"job name {self.name!r} is not filesystem-safe (letters, digits, . _ = + -)")


def grid(axes: dict[str, list], seeds: list[int]) -> list[Job]:
    """One job per seed × combination of axis values, seed-major; name "seed<s>-<value>-...", params {"seed", *axes}."""
    jobs = []
    for seed in seeds:
        for values in itertools.product(*axes.values()):
            name = "-".join([f"seed{seed}", *(re.sub(r"[^A-Za-z0-9._=+-]", "_", str(v)) for v in values)])
            jobs.append(Job(name, {"seed": seed, **dict(zip(axes, values))}))
    _check_unique(jobs)
    return jobs


def differences(a: dict, b: dict, ignore: set[str] = frozenset(), prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, nested dicts compared key by key; keys only one side has (a
    field added since, with its old behaviour as default) and ``ignore``d ones (full dotted key) aside."""
    out = []
    for k in sorted(a.keys() & b.keys()):
        key = prefix + str(k)
        if key in ignore:
            continue
        if isinstance(a[k], dict) and isinstance(b[k], dict):
            out += differences(a[k], b[k], ignore, key + ".")
        elif a[k] != b[k]:
            out.append(key)
    return out


def read_store(root: str | Path) -> tuple[dict | None, dict[str, Any]]:
    """The fingerprint (None: no job yet) and results by job name under ``root/jobs``; one fingerprint only."""
    fingerprint, results = None, {}
    for path in sorted((Path(root) / "jobs").glob("[!.]*.json")):  # write_atomic's temporaries start with "."
        try:
            rec = json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not a job's result ({e})") from None
        if fingerprint is not None and (keys := differences(fingerprint, rec["fingerprint"])):
            raise StoreConflict(f"{root}: job files of different configurations ({', '.join(keys)} differ)")
        fingerprint, results[rec["name"]] = rec["fingerprint"], rec["result"]
    return fingerprint, results


class JobStore:
    """Finished jobs of one configuration (``fingerprint``) under ``root/jobs``; see the module docstring."""

    def __init__(self, root: str | Path, fingerprint: dict):
        self.root, self.fingerprint = Path(root), json.loads(json.dumps(fingerprint, default=_plain))
        stored, self.results = read_store(self.root)
        if stored is not None and (keys := differences(stored, self.fingerprint)):
            raise StoreConflict(
                f"{self.root} holds jobs of another configuration ({', '.join(keys)} differ): "
                "rerun with the same settings to resume, or use another folder"
            )
        self._sweep()

    def _sweep(self) -> None:
        """Remove what killed processes left: their claims (e.g. after their last result), the private files
        claims are linked from, and write_atomic's temporaries (``.NAME.PID.tmp``, which name no host: only
        once a minute old, as is a claim file no owner can be read from, perhaps being written elsewhere)."""
        for path in (self.root / "jobs").glob(".*"):
            try:
                old = time.time() - path.stat().st_mtime > 60
            except FileNotFoundError:
                continue
            if path.suffix == ".tmp":
                pid = path.name.split(".")[-2]
                gone = old and pid.isdigit() and _dead({"pid": int(pid), "host": socket.gethostname()})
            elif ".claim" in path.name:
                gone = _dead(owner) if (owner := _owner(path)) is not None else old
            else:
                continue
            if gone:
                path.unlink(missing_ok=True)

    def __contains__(self, name: str) -> bool:
        return name in self.results

    def put(self, job: Job, result: Any) -> Any:
        """Write the job's result; returns it as it reads back (tuples as lists...), as a resumed run sees it."""
        rec = {"name": job.name, "params": job.params, "fingerprint": self.fingerprint, "result": result}
        text = json.dumps(rec, indent=1, default=_plain)
        write_atomic(self.root / "jobs" / f"{job.name}.json", text)
        self.results[job.name] = json.loads(text)["result"]
        return self.results[job.name]

    def refresh(self, name: str) -> bool:
        """Whether job ``name`` is finished, reading its file if another process has written it since."""
        path = self.root / "jobs" / f"{name}.json"
        if name not in self.results and path.exists():
            self.results[name] = json.loads(path.read_text())["result"]
        return name in self.results

    def claim(self, name: str) -> str | None:
        """Claim job ``name`` for this process: None when claimed (a dead process's claim on this host, or an
        unreadable one, is taken over), else who holds it ("pid P on HOST")."""
        path = self._claim_path(name)
        mine = path.with_name(f"{path.name}.{os.getpid()}")  # private until linked: needs no temporary of its own
        mine.parent.mkdir(parents=True, exist_ok=True)
        mine.write_text(json.dumps(_me()))
        try:
            for _ in range(3):
                try:
                    os.link(mine, path)  # exclusive, and never a half-written claim
                    return None
                except FileExistsError:
                    with self._takeover_lock():  # so no process removes a claim made after it looked
                        if not path.exists():
                            continue
                        owner = _owner(path)
                        if owner is None or owner == _me() or _dead(owner):
                            path.unlink()
                        else:
                            return f"pid {owner['pid']} on {owner['host']}"
            return "another process"
        finally:
            mine.unlink()

    def release(self, name: str) -> None:
        """Drop this process's claim on job ``name`` (if it holds one)."""
        if _owner(path := self._claim_path(name)) == _me():
            path.unlink(missing_ok=True)

    def _claim_path(self, name: str) -> Path:
        return self.root / "jobs" / f".{name}.claim"

    @contextmanager
    def _takeover_lock(self):
        fd = os.open(self.root / "jobs", os.O_RDONLY)  # the folder itself: no lock file left behind
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


class Backend(Protocol):
    """Runs a list of jobs somewhere (this machine, a cluster); registered in ``BACKENDS``."""

    def run(self, fn: Callable[[dict], Any], jobs: Iterable[Job]) -> Iterator[tuple[Job, Any]]:
        """``fn(job.params)`` for every job; yields (job, result) as each completes, in any order. ``jobs`` is
        consumed as jobs start where the backend runs one at a time (each is claimed as it is drawn)."""


@dataclass
class LocalBackend:
    """This machine: in this process when ``workers`` == 1, else that many "spawn" processes (``fn`` must be
    importable: a module-level function, or a functools.partial of one)."""

    workers: int = 1

    def run(self, fn: Callable[[dict], Any], jobs: Iterable[Job]) -> Iterator[tuple[Job, Any]]:
        """Jobs in order (``workers`` ≤ 1, drawn one at a time) or as they complete; a failing job's exception
        propagates and cancels the jobs not yet started."""
        if self.workers <= 1:
            for job in jobs:
                yield job, fn(job.params)
            return
        jobs = list(jobs)
        if not jobs:
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = multiprocessing.get_context("spawn")  # fork would copy torch's threads and locks
        with ProcessPoolExecutor(min(self.workers, len(jobs)), mp_context=ctx) as pool:
            futures = {pool.submit(fn, job.params): job for job in jobs}
            try:
                for future in as_completed(futures):
                    yield futures[future], future.result()
            finally:  # a failed job or an interrupt: don't wait for the queued jobs
                for future in futures:
                    future.cancel()


BACKENDS: Registry[type] = Registry("job backend")
BACKENDS.register("local", "embody.jobs:LocalBackend")
BACKENDS.register("ray", "embody.scale:RayBackend")  # a Ray cluster (the scale extra); Ray imported on use

_default_backend: tuple[str, dict] = ("local", {})


def use_backend(name: str, **options) -> None:
    """Make ``BACKENDS[name](workers=..., **options)`` the backend of every later ``run_jobs`` call that names none:
    ``embody --ray-address ADDR STUDY ...`` runs any study's jobs on a Ray cluster this way."""
    BACKENDS.get(name)  # an unknown name fails here, listing the valid ones
    global _default_backend
    _default_backend = (name, options)


def run_jobs(
    fn: Callable[[dict], Any],
    jobs: list[Job],
    store: JobStore,
    backend: str | Backend | None = None,
    workers: int = 1,
    label: str = "jobs",
    log: Callable[[str], None] = print,
    metrics: Callable[[Any], dict] | None = None,
    poll_s: float = 10.0,
) -> dict[str, Any]:
    """``fn(job.params)`` for every job not already in ``store``, each result stored as it finishes; all results
    by job name, in ``jobs``' order. ``backend``: a Backend or a BACKENDS name (default "local"), made with
    ``workers``; ``metrics(result)``: what the progress line shows of the last finished job. Jobs that another
    process finishes or holds are left to it and awaited at the end (checked every ``poll_s``)."""
    _check_unique(jobs)
    if backend is None:
        name, options = _default_backend
        backend = BACKENDS.get(name)(workers=workers, **options)
    elif isinstance(backend, str):
        backend = BACKENDS.get(backend)(workers=workers)
    results = {job.name: store.results[job.name] for job in jobs if job.name in store}
    todo = [job for job in jobs if job.name not in results]
    if results:
        log(
            f"{label}: resuming: {len(results)} of {len(jobs)} jobs already in {store.root / 'jobs'}, "
            f"{len(todo)} to run"
        )
    progress = Progress(len(jobs), label, unit="jobs")
    progress.update(len(results))
    held: list[Job] = []  # claimed by other processes
    told: set[str] = set()

    def mine(candidates: list[Job]) -> Iterator[Job]:
        for job in candidates:
            if store.refresh(job.name):
                results[job.name] = store.results[job.name]
            elif (owner := store.claim(job.name)) is None:
                if store.refresh(job.name):  # finished by another process between the check and the claim
                    store.release(job.name)
                    results[job.name] = store.results[job.name]
                else:
                    yield job
            else:
                if job.name not in told:
                    log(f"{label}: {job.name} is running in {owner}: left to it, awaited at the end")
                    told.add(job.name)
                held.append(job)

    with _exit_on_sigterm():
        try:
            while True:
                for job, result in backend.run(fn, mine(todo)):
                    results[job.name] = store.put(job, result)
                    store.release(job.name)
                    progress.update(len(results), job=job.name, **(metrics(results[job.name]) if metrics else {}))
                if not held:
                    break
                time.sleep(poll_s)  # wait for the other processes' jobs; take over those whose process died
                todo, held[:] = list(held), []
                progress.update(len(results))
        finally:
            for job in jobs:
                store.release(job.name)
    progress.close()
    return {job.name: results[job.name] for job in jobs}


def pool(parts: list[tuple[str, dict | None, dict[str, Any]]], ignore: set[str] = frozenset()) -> tuple[dict, dict]:
    """(label, fingerprint, results by name) of several runs pooled: the first's fingerprint and every result.
    Refuses another fingerprint (``ignore``d keys aside) and a job name in two runs."""
    first = next((p for p in parts if p[1] is not None), ("", {}, {}))
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    for label, fingerprint, results in parts:
        if fingerprint is not None and (keys := differences(first[1], fingerprint, ignore)):
            raise StoreConflict(f"{label}: another configuration than {first[0]} ({', '.join(keys)} differ)")
        if again := sorted(results.keys() & merged.keys()):
            raise StoreConflict(f"{label}: job(s) {', '.join(again)} already in an earlier run ({source[again[0]]})")
        merged.update(results)
        source.update(dict.fromkeys(results, label))
    return first[1], merged


def merge_stores(roots: list[str | Path], ignore: set[str] = frozenset()) -> tuple[dict, dict[str, Any]]:
    """The jobs of several study folders pooled (see ``pool``), e.g. seeds run on different machines."""
    parts = [(str(root), *read_store(root)) for root in roots]
    if empty := [label for label, _, results in parts if not results]:
        raise ValueError(f"{empty[0]}: no job results (jobs/*.json) there")
    return pool(parts, ignore)


@contextmanager
def _exit_on_sigterm():
    """While it lasts, SIGTERM (``kill``'s default) exits as Ctrl-C does, through ``finally`` blocks, so a study
    killed that way releases its claims; outside the main thread, where no handler can be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _me() -> dict:
    """A claim's owner: this process (worked out per call: a forked child is another process)."""
    return {"pid": os.getpid(), "host": socket.gethostname()}


def _owner(path: Path) -> dict | None:
    try:
        owner = json.loads(path.read_text())
        return {"pid": int(owner["pid"]), "host": str(owner["host"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _dead(owner: dict) -> bool:
    """A claim's process is gone: only decidable on this host."""
    if owner["host"] != socket.gethostname():
        return False
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        pass
    return False


def _check_unique(jobs: list[Job]) -> None:
    if dupes := sorted(n for n, k in Counter(job.name for job in jobs).items() if k > 1):
        raise ValueError(f"job names must be unique; repeated: {', '.join(dupes)}")


def _plain(x):
    """numpy scalars and arrays as JSON (without importing numpy); anything else is not a JSON result."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"a job's result must be JSON, not {type(x).__name__}")
