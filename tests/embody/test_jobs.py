"""embody.jobs: serial and process backends agree, results in job order, resume, fingerprints, merging, and a
study killed mid-run that resumes to the uninterrupted results."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from embody.jobs import BACKENDS, Job, JobStore, LocalBackend, grid, merge_stores, run_jobs

FP = {"scale": "tiny", "lr": 0.1, "net": {"hidden": 8}}


def square(params: dict) -> dict:
    """A job: deterministic numbers from its params; counts its calls in $JOBS_TEST_CALLS when set."""
    if calls := os.environ.get("JOBS_TEST_CALLS"):
        (Path(calls) / f"{params['seed']}-{params['x']}-{uuid.uuid4().hex}").touch()
    time.sleep(float(params.get("sleep", 0.0)))
    return {"y": params["x"] ** 2 + params["seed"] / 10, "pair": (params["seed"], params["x"])}


def quiet(s: str) -> None:
    pass


def test_grid_names_and_order():
    jobs = grid({"level": ["informed", "blind wall"]}, [0, 1])
    assert [j.name for j in jobs] == ["seed0-informed", "seed0-blind_wall", "seed1-informed", "seed1-blind_wall"]
    assert jobs[1].params == {"seed": 0, "level": "blind wall"}
    with pytest.raises(ValueError, match="filesystem-safe"):
        Job("../x", {})
    with pytest.raises(ValueError, match="repeated: seed0-a"):
        run_jobs(square, [Job("seed0-a", {}), Job("seed0-a", {})], JobStore("/nonexistent", FP), log=quiet)


def test_serial_and_process_results_agree_in_job_order(tmp_path):
    jobs = grid({"x": [3, 1, 2]}, [0, 1])
    jobs[0] = Job(jobs[0].name, {**jobs[0].params, "sleep": 0.5})  # finishes last with 2 workers
    serial = run_jobs(square, jobs, JobStore(tmp_path / "a", FP), log=quiet)
    parallel = run_jobs(square, jobs, JobStore(tmp_path / "b", FP), workers=2, log=quiet)
    assert list(serial) == list(parallel) == [j.name for j in jobs]
    assert serial == parallel and serial["seed1-2"] == {"y": 4.1, "pair": [1, 2]}  # as JSON reads it back
    rec = json.loads((tmp_path / "b" / "jobs" / "seed1-2.json").read_text())
    assert rec == {"name": "seed1-2", "params": {"seed": 1, "x": 2}, "fingerprint": FP, "result": serial["seed1-2"]}
    assert isinstance(BACKENDS.get("local")(workers=2), LocalBackend)


def test_resume_skips_stored_jobs(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("JOBS_TEST_CALLS", str(calls))
    jobs = grid({"x": [1, 2, 3]}, [0])
    first = run_jobs(square, jobs[:2], JobStore(tmp_path / "s", FP), log=quiet)
    logged = []
    again = run_jobs(square, jobs, JobStore(tmp_path / "s", FP), log=logged.append)
    assert len(list(calls.iterdir())) == 3 and {k: again[k] for k in first} == first
    assert "2 of 3 jobs already in" in logged[0]


def test_another_configuration_is_refused_naming_the_keys(tmp_path):
    run_jobs(square, grid({"x": [1]}, [0]), JobStore(tmp_path, FP), log=quiet)
    with pytest.raises(ValueError, match=r"another configuration \(lr, net.hidden differ\)") as e:
        JobStore(tmp_path, {**FP, "lr": 0.2, "net": {"hidden": 16}})
    assert str(tmp_path) in str(e.value)
    JobStore(tmp_path, {**FP, "added_since": 1})  # a key only one side has is not compared


def test_merge_pools_stores_and_refuses_overlap_and_mismatch(tmp_path):
    run_jobs(square, grid({"x": [1, 2]}, [0]), JobStore(tmp_path / "s0", {**FP, "seeds": 1}), log=quiet)
    run_jobs(square, grid({"x": [1, 2]}, [1]), JobStore(tmp_path / "s1", {**FP, "seeds": 2}), log=quiet)
    fp, results = merge_stores([tmp_path / "s0", tmp_path / "s1"], ignore={"seeds"})
    assert fp["lr"] == 0.1 and sorted(results) == ["seed0-1", "seed0-2", "seed1-1", "seed1-2"]
    with pytest.raises(ValueError, match="seeds differ"):
        merge_stores([tmp_path / "s0", tmp_path / "s1"])
    with pytest.raises(ValueError, match="seed0-1, seed0-2 already in an earlier run"):
        merge_stores([tmp_path / "s0", tmp_path / "s0"])
    with pytest.raises(ValueError, match="no job results"):
        merge_stores([tmp_path / "s0", tmp_path / "nothing"])


STUDY = """
import sys
sys.path.insert(0, {here!r})
from test_jobs import square, quiet
from embody.jobs import JobStore, grid, run_jobs
jobs = [j.__class__(j.name, {{**j.params, "sleep": 0.3}}) for j in grid({{"x": [1, 2, 3]}}, [0, 1])]
run_jobs(square, jobs, JobStore(sys.argv[1], {{"study": "kill"}}), log=quiet, poll_s=0.1)
"""


def test_a_killed_run_resumes_to_the_uninterrupted_results(tmp_path):
    script = STUDY.format(here=str(Path(__file__).parent))
    study = [sys.executable, "-c", script]
    proc = subprocess.Popen(study + [str(tmp_path / "killed")], stderr=subprocess.DEVNULL)
    jobs_dir, deadline = tmp_path / "killed" / "jobs", time.monotonic() + 60
    while not list(jobs_dir.glob("*.json")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 1 <= len(list(jobs_dir.glob("*.json"))) < 6
    subprocess.run(study + [str(tmp_path / "killed")], check=True, stderr=subprocess.DEVNULL)
    subprocess.run(study + [str(tmp_path / "whole")], check=True, stderr=subprocess.DEVNULL)
    killed, whole = (JobStore(tmp_path / name, {"study": "kill"}).results for name in ("killed", "whole"))
    assert len(whole) == 6 and killed == whole
    assert sorted(p.name for p in jobs_dir.iterdir()) == sorted(f"{n}.json" for n in whole)  # no temporaries left


def test_leftovers_of_a_process_killed_while_writing_are_swept(tmp_path):
    """What a SIGKILL between a write and its rename leaves (CI once found one); a temporary names no host,
    so a young one is left alone: it may be another host's, mid-write."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid, jobs = int(dead.stdout), tmp_path / "jobs"
    jobs.mkdir()
    me = json.dumps({"pid": pid, "host": socket.gethostname()})
    leftovers = {f".a.claim.{pid}": me, f".b.json.{pid}.tmp": "{", f"..c.claim.{pid}.{pid}.tmp": "", ".d.claim": ""}
    for name, text in leftovers.items():
        (jobs / name).write_text(text)
    young = jobs / f".e.json.{pid}.tmp"
    young.write_text("{")
    for name in leftovers:
        os.utime(jobs / name, (time.time() - 120,) * 2)
    JobStore(tmp_path, {"study": "sweep"})
    assert [p.name for p in jobs.iterdir()] == [young.name]


def test_a_study_terminated_by_sigterm_releases_its_claim(tmp_path):
    script = STUDY.format(here=str(Path(__file__).parent)).replace('"sleep": 0.3', '"sleep": 60')
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "s")], stderr=subprocess.DEVNULL)
    jobs_dir, deadline = tmp_path / "s" / "jobs", time.monotonic() + 60
    while not list(jobs_dir.glob(".*.claim")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(jobs_dir.glob(".*.claim"))
    proc.terminate()
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # exited through the handler, not killed by the signal
    assert not list(jobs_dir.glob(".*"))


def _claim_file(root: Path, name: str, pid: int, host: str | None = None) -> Path:
    path = root / "jobs" / f".{name}.claim"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "host": host or socket.gethostname()}))
    return path


def test_processes_sharing_a_folder_leave_each_other_their_jobs(tmp_path, monkeypatch):
    """A job finished by another process meanwhile is read, not rerun; a job another live process holds is
    awaited; a dead process's claim is taken over; no claim file is left behind."""
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("JOBS_TEST_CALLS", str(calls))
    jobs = grid({"x": [1, 2, 3, 4]}, [0])
    root = tmp_path / "s"
    store = JobStore(root, FP)
    other = JobStore(root, FP)  # another process's view of the folder
    other.put(jobs[1], {"y": -1})  # finished after this process read the store
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        _claim_file(root, jobs[2].name, live.pid)
        _claim_file(root, jobs[3].name, dead.pid)

        def finish_held():  # the live process finishes its job while this one waits
            time.sleep(0.5)
            other.put(jobs[2], {"y": -2})
            (root / "jobs" / f".{jobs[2].name}.claim").unlink()

        threading.Thread(target=finish_held).start()
        logged = []
        results = run_jobs(square, jobs, store, log=logged.append, poll_s=0.1)
    finally:
        live.kill()
    assert results["seed0-2"] == {"y": -1} and results["seed0-3"] == {"y": -2}
    assert results["seed0-4"]["y"] == 16 and results["seed0-1"]["y"] == 1
    assert sorted(p.name.split("-")[1] for p in calls.iterdir()) == ["1", "4"]
    held = f"jobs: seed0-3 is running in pid {live.pid} on {socket.gethostname()}: left to it, awaited at the end"
    assert [m for m in logged if "left to it" in m] == [held]  # told once, however long it waits
    assert not list((root / "jobs").glob(".*"))


def test_claims_are_released_when_a_job_fails_and_other_hosts_are_honoured(tmp_path):
    root = tmp_path / "s"
    store = JobStore(root, FP)
    with pytest.raises(KeyError):
        run_jobs(square, [Job("seed0-a", {"seed": 0})], store, log=quiet)
    assert not list((root / "jobs").glob(".*"))
    _claim_file(root, "seed0-b", os.getpid() + 10**6, host="elsewhere")
    assert store.claim("seed0-b") == f"pid {os.getpid() + 10**6} on elsewhere"
    assert store.claim("seed0-c") is None and store.claim("seed0-c") is None  # a process may re-claim its own
    store.release("seed0-c")
    assert not (root / "jobs" / ".seed0-c.claim").exists()


def test_two_processes_share_one_study_folder(tmp_path):
    """Two processes on the same folder and seeds: every job runs once, and both end with all the results."""
    calls = tmp_path / "calls"
    calls.mkdir()
    study = [sys.executable, "-c", STUDY.format(here=str(Path(__file__).parent)), str(tmp_path / "shared")]
    env = {**os.environ, "JOBS_TEST_CALLS": str(calls)}
    procs = [subprocess.Popen(study, env=env, stderr=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert len(list(calls.iterdir())) == 6
    assert len(JobStore(tmp_path / "shared", {"study": "kill"}).results) == 6
    assert not list((tmp_path / "shared" / "jobs").glob(".*"))


def test_a_job_finished_between_the_check_and_the_claim_is_not_run_again(tmp_path, monkeypatch):
    """The race CI once hit: another process writes the result and drops its claim just after this one looked."""
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("JOBS_TEST_CALLS", str(calls))
    job = Job("seed0-a", {"seed": 0, "x": 2})

    class Racing(JobStore):
        def claim(self, name):
            JobStore(self.root, FP).put(job, {"y": -1})  # the other process, finishing first
            return super().claim(name)

    assert run_jobs(square, [job], Racing(tmp_path / "s", FP), log=quiet) == {"seed0-a": {"y": -1}}
    assert not list(calls.iterdir()) and not list((tmp_path / "s" / "jobs").glob(".*"))
