"""Ray rollout workers (embody/scale.py): the worker and the merge in-process, then a real Ray cluster on loopback
(a head and one worker node as separate processes) driven through ``embody train --workers``."""

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from embody.config import ConfigError
from embody.policies.actor_critic import ActorCritic
from embody.policies.ppo import PPO
from embody.runs import build_env
from embody.scale import BUFFER_FIELDS, RolloutWorker, _merge, check_address, connect, split_envs
from embody.train import TrainConfig, resolve_config

HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_without_workers_ray_is_not_imported(tmp_path):
    code = (
        "import sys; from pathlib import Path; from embody.train import resolve_config, train; "
        "cfg = resolve_config('cartpole-swingup', n_envs=4, steps=64, overrides=['ppo.n_steps=8', 'eval_episodes=1', "
        "'video=false']); train(cfg, Path(sys.argv[1])); print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_envs_are_split_evenly_and_every_worker_gets_one():
    assert split_envs(10, 3) == [4, 3, 3]
    with pytest.raises(ConfigError, match="at least one env each"):
        split_envs(2, 3)


def test_an_unreachable_or_malformed_address_is_named_within_the_timeout():
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"no Ray head reachable at 127\.0\.0\.1:\d+"):
        check_address(f"127.0.0.1:{_free_port()}", timeout_s=2.0)
    assert time.perf_counter() - start < 5.0
    with pytest.raises(ConfigError, match="expected HOST:PORT"):
        check_address("ray-head")


class _InProcessWorkers:
    """RolloutWorkers' interface over in-process RolloutWorkers (Ray itself is tested below on a real cluster)."""

    def __init__(self, cfg: TrainConfig, policy: ActorCritic, sizes: list[int]):
        from embody.config import to_dict

        self.workers = {i: RolloutWorker(to_dict(cfg), policy.init_kwargs(), i, n) for i, n in enumerate(sizes)}

    def collect(self, policy, **kwargs):
        weights = {k: v.numpy() for k, v in policy.state_dict().items()}
        return _merge([w.collect(weights, **kwargs) for w in self.workers.values()])


def test_worker_rollouts_merge_into_one_batch_that_ppo_learns_from():
    cfg = resolve_config("cartpole-swingup", overrides=["n_envs=5", "ppo.n_steps=8"])
    env = build_env(cfg, n_envs=1)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    workers = _InProcessWorkers(cfg, policy, split_envs(5, 2))
    rollout = workers.collect(policy)
    assert {k: v.shape[:2] for k, v in rollout.arrays.items()} == {k: (8, 5) for k in BUFFER_FIELDS}
    assert rollout.nodes == {"local"} and "swingup" in rollout.reward_terms
    # two workers draw different episodes (their own seeds), not copies of one
    assert not np.allclose(rollout.arrays["obs"][:, 0], rollout.arrays["obs"][:, 3])

    ppo = PPO(env, policy, cfg.ppo, workers=workers)
    count = policy.obs_norm.count.item()
    rows = []
    ppo.learn(3 * 8 * 5, rows.append)
    assert [r["env_steps"] for r in rows] == [40, 80, 120] and all(r["workers"] == 2 for r in rows)
    assert policy.obs_norm.count.item() == pytest.approx(count + 120)  # the learner's normalizers saw every step
    assert all(np.isfinite(r["policy_loss"]) for r in rows)


def test_sac_collects_on_workers_and_pays_its_updates_per_vector_step():
    from embody.policies.sac import SAC, SACPolicy

    cfg = resolve_config("cartpole-swingup", algo="sac", n_envs=3)
    cfg.sac.learning_starts, cfg.sac.worker_steps, cfg.sac.utd, cfg.sac.batch_size = 12, 4, 0.5, 8
    env = build_env(cfg, n_envs=1)
    policy = SACPolicy(env.observation_size, env.action_size, [16, 16])
    sac = SAC(env, policy, cfg.sac, workers=_InProcessWorkers(cfg, policy, split_envs(3, 2)))
    returns, losses = [], []
    sac.step(returns, losses)  # 4 vector steps of 3 envs, uniform actions: learning starts after them
    assert sac.env_steps == 12 and sac.buffer.size == 12 and not losses
    sac.step(returns, losses)  # 4 more with the policy's actions: 0.5 gradient steps per env step
    assert sac.env_steps == 24 and sac.buffer.size == 24 and len(losses) == 6 == sac.updates
    assert policy.obs_norm.count.item() == pytest.approx(24, abs=1e-3)


def test_more_workers_than_the_cpus_are_refused_with_the_numbers():
    pytest.importorskip("ray", reason="needs the scale extra")
    with pytest.raises(ConfigError, match=r"--workers 64 × 1 CPU each needs 64 CPUs; this machine has \d+"):
        connect(None, 64, 1.0)


# ---------------------------------------------------------------- a real Ray cluster on 127.0.0.1


class LoopbackCluster:
    """A Ray head and one worker node, each ``ray start --block`` in its own process group, 1 CPU each, token
    authentication on (a fresh token shared through the environment, as on a real multi-host cluster)."""

    def __init__(self, tmp: Path):
        self.address = f"127.0.0.1:{_free_port()}"
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--block", "--disable-usage-stats"]
        port = self.address.rpartition(":")[2]
        self.head = self._start("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={tmp}", *common)
        self._wait_for_nodes(1)
        self.node = self._start(f"--address={self.address}", *common)
        self._wait_for_nodes(2)

    def _start(self, *args) -> subprocess.Popen:
        ray = Path(sys.executable).parent / "ray"
        return subprocess.Popen(
            [str(ray), "start", *args],
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _wait_for_nodes(self, n: int, timeout_s: float = 90.0) -> None:
        code = f"import ray; ray.init(address={self.address!r}, logging_level='error'); "
        code += "print(sum(n['Alive'] for n in ray.nodes()))"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True)
            if out.returncode == 0 and int(out.stdout.split()[-1]) >= n:
                return
            time.sleep(1.0)
        raise TimeoutError(f"the loopback Ray cluster at {self.address} did not reach {n} nodes")

    def kill(self, proc: subprocess.Popen) -> None:
        """SIGKILL a node: its raylet, store and every worker process it started (as a machine failure would)."""
        import psutil

        try:
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in family:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        proc.wait(10)

    def train(self, out: Path, *args: str) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "embody.cli", "train", *args, "--ray-address", self.address, "--out", str(out)]
        return subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("ray", reason="needs the scale extra")
    c = LoopbackCluster(tmp_path_factory.mktemp("ray"))
    yield c
    c.kill(c.node)
    c.kill(c.head)


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _summary(stdout: str) -> dict:
    """The JSON summary ``embody train`` prints (Ray may print its own lines around it)."""
    lines = stdout.splitlines()
    start, end = lines.index("{"), len(lines) - lines[::-1].index("}")
    return json.loads("\n".join(lines[start:end]))


TINY = ["--set", "eval_episodes=1", "--set", "video=false", "--set", "ppo.n_steps=16"]


@pytest.mark.slow
def test_a_ppo_run_rolls_out_on_both_nodes_of_a_loopback_cluster(cluster, tmp_path):
    proc = cluster.train(tmp_path / "run", "cartpole-swingup", "--envs", "8", "--steps", "512", "--workers", "2", *TINY)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    rows = _rows(tmp_path / "run")
    assert rows[-1]["env_steps"] == 512 and all(r["workers"] == 2 and r["nodes"] == 2 for r in rows)
    assert (tmp_path / "run" / "checkpoint").is_dir() and _summary(out)["episodes"] == 1


@pytest.mark.slow
def test_a_worker_that_raises_stops_the_run_with_its_traceback_and_a_checkpoint(cluster, tmp_path):
    proc = cluster.train(
        tmp_path / "run", "gym:raising_env:Raising-v0", "--envs", "2", "--steps", "512", "--workers", "2"
    )
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err[-3000:]
    assert "rollout worker 0 raised" in err and "RuntimeError: the injected rollout failure" in err
    assert (tmp_path / "run" / "checkpoint").is_dir()  # the iterations before the failure are kept


def tiny_training_job(params: dict) -> dict:
    """A job: 3 PPO iterations of cart-pole from ``params["seed"]``; its last metrics and a checksum of the weights."""
    cfg = resolve_config("cartpole-swingup", overrides=["n_envs=4", "ppo.n_steps=8"], seed=params["seed"])
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(1)
    env = build_env(cfg)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    rows = []
    PPO(env, policy, cfg.ppo, update_threads=1).learn(3 * 8 * 4, rows.append)
    keep = ("env_steps", "policy_loss", "value_loss", "kl", "lr")
    return {**{k: rows[-1][k] for k in keep}, "weights": float(sum(p.double().sum() for p in policy.parameters()))}


@pytest.mark.slow
def test_jobs_on_the_cluster_give_the_local_results(cluster, tmp_path):
    from embody.jobs import JobStore, grid, run_jobs

    quiet = lambda *_: None  # noqa: E731
    local = run_jobs(tiny_training_job, grid({}, [0, 1]), JobStore(tmp_path / "local", {}), log=quiet)
    # the driver in its own process, as `embody --ray-address ADDR STUDY` runs one (Ray reads the token at import)
    code = (
        "import json, sys; from embody.jobs import JobStore, grid, run_jobs; from embody.scale import RayBackend; "
        "from test_scale import tiny_training_job; "
        f"r = run_jobs(tiny_training_job, grid({{}}, [0, 1]), JobStore(sys.argv[1], {{}}), "
        f"RayBackend(address={cluster.address!r}), log=lambda *_: None); print(json.dumps(r))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ray")], env=cluster.env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    remote = json.loads(out.stdout.splitlines()[-1])
    assert remote == local and local["seed0"] != local["seed1"]


@pytest.mark.slow
def test_a_sweep_resumes_after_its_driver_is_killed(cluster, tmp_path):
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "embody.cli", "sweep", "cartpole-swingup", "--set-grid", "ppo.lr=1e-3,3e-4,1e-4"]
    cmd += ["--steps", "256", "--envs", "8", "--ray-address", cluster.address, "--out", str(out), *TINY]
    driver = subprocess.Popen(cmd, env=cluster.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and not list(out.glob("runs/*/eval.json")) and driver.poll() is None:
        time.sleep(0.2)
    assert driver.poll() is None, driver.communicate()[1][-3000:]
    driver.kill()  # SIGKILL: no cleanup; its trials die with it
    driver.wait()
    again = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"resuming the sweep in .*: [123] of 3 runs evaluated", again.stderr)
    report = json.loads((out / "sweep.json").read_text())
    assert sorted(r["point"]["ppo.lr"] for r in report["trials"]) == ["1e-3", "1e-4", "3e-4"]
    assert len(report["table"]) == 3 and (out / "sweep.png").stat().st_size > 0
    assert all((Path(r["run"]) / "eval.json").exists() for r in report["trials"])
    assert "| ppo.lr=1e-3 | 1 |" in again.stdout


@pytest.mark.slow
def test_a_worker_node_killed_mid_run_leaves_training_on_the_other(cluster, tmp_path):
    run = tmp_path / "run"
    steps = ["--steps", "100000", "--set", "max_time_s=25"]
    proc = cluster.train(run, "cartpole-swingup", "--envs", "8", *steps, "--workers", "2", *TINY)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ((run / "metrics.jsonl").exists() and len(_rows(run)) >= 3):
        time.sleep(0.5)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    cluster.kill(cluster.node)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert "rollout worker 1 lost" in err or "rollout worker 0 lost" in err
    rows = _rows(run)
    assert rows[0]["workers"] == 2 and rows[-1]["workers"] == 1 and rows[-1]["env_steps"] > rows[2]["env_steps"]
    summary = _summary(out)
    assert len(summary["lost_workers"]) == 1 and "continuing with 1 workers, 4 envs" in summary["lost_workers"][0]
    # (the last test of the module: the cluster has one node from here on)
