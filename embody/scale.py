"""Ray rollout workers: ``embody train TASK --workers N [--ray-address ADDR]`` (PPO and SAC); the job runner's Ray
backend.

Each worker (a Ray actor, ``worker_cpus`` CPUs) holds its own simulator with a slice of the run's ``n_envs`` and the
algorithm's collector: PPO's ``collect`` (T steps with the current weights, GAE included), or SAC's vector steps.
Per round the learner puts its weights in Ray's object store once, every worker collects with them, and the learner
concatenates the returned (T, n_i, ...) arrays along the env axis, so it sees the same batch as a single-process run
with ``n_envs`` envs. A worker whose process or node dies is dropped and reported (training continues on the others); a
worker whose code raises stops the run with its traceback. Training imports Ray only with ``--workers``.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from embody import exits
from embody.config import ConfigError
from embody.extras import require

BUFFER_FIELDS = ("obs", "critic_obs", "actions", "logp", "values", "rewards", "dones", "returns", "advantages")  # PPO
SAC_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminal", "done")


class WorkerError(RuntimeError):
    """A rollout worker raised; the message carries its remote traceback."""

    exit_code, exit_label = exits.FAILED, "rollout worker"


@dataclass
class Rollout:
    """One round's merged rollout: ``arrays`` (T, n, ...) per field (PPO's BUFFER_FIELDS, SAC's SAC_FIELDS), the
    finished episodes' returns and lengths, the mean reward terms and curriculum levels over the workers, where it
    ran, and the slowest worker's own rollout time [s] (the learner's wait beyond it is the Ray path's overhead)."""

    arrays: dict[str, np.ndarray]
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    reward_terms: dict[str, float] = field(default_factory=dict)
    curriculum: dict[str, float] = field(default_factory=dict)
    nodes: set[str] = field(default_factory=set)
    worker_s: float = 0.0


def split_envs(n_envs: int, workers: int) -> list[int]:
    """``n_envs`` over ``workers`` as evenly as possible: (workers,) sizes, each ≥ 1."""
    if workers < 1 or n_envs < workers:
        raise ConfigError(f"--workers {workers} needs at least one env each; n_envs is {n_envs}")
    return [len(part) for part in np.array_split(np.arange(n_envs), workers)]


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail within ``timeout_s`` naming ``address`` (HOST:PORT of a Ray head's GCS) when nothing listens there."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT of the Ray head (e.g. 10.0.0.5:6379)")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ConfigError(f"no Ray head reachable at {address} within {timeout_s:g} s ({e})") from e


def connect(address: str | None, workers: int, worker_cpus: float):
    """Join the Ray cluster at ``address`` (or start one on this machine) and check it has the CPUs for ``workers``
    workers of ``worker_cpus`` each. Returns the ``ray`` module."""
    ray = require("ray", "scale")
    if address:
        check_address(address)
    started = not ray.is_initialized()
    if started:
        local = {} if address else {"num_cpus": os.cpu_count() or 1}
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning", **local)
    cpus = ray.cluster_resources().get("CPU", 0.0)
    if workers * worker_cpus > cpus:
        if started:
            ray.shutdown()
        where = f"the cluster at {address}" if address else "this machine"
        raise ConfigError(
            f"--workers {workers} × {worker_cpus:g} CPU each needs {workers * worker_cpus:g} CPUs; "
            f"{where} has {cpus:g} (lower --workers or set worker_cpus)"
        )
    return ray


class RolloutWorker:
    """Holds an env of ``n_envs`` envs built from the run's config, a copy of its policy and the algorithm's
    collector (``PPOCollector``, ``SACCollector``); ``collect(weights, **kwargs)`` loads the learner's weights and
    runs the collector. Plain Python: Ray wraps it as an actor (and tests call it directly)."""

    def __init__(self, cfg: dict, policy_kwargs: dict, index: int, n_envs: int):
        from embody.config import from_dict
        from embody.runs import build_env
        from embody.train import TrainConfig

        torch.set_num_threads(1)
        config = from_dict(TrainConfig, cfg, "config")
        seed = config.seed + 10_007 * (index + 1)  # distinct episodes on every worker, reproducible per worker
        torch.manual_seed(seed)
        self.env = build_env(config, n_envs=n_envs, seed=seed)
        make = SACCollector if config.algo == "sac" else PPOCollector
        self.collector = make(self.env, policy_kwargs, config, seed)

    def collect(self, weights: dict[str, np.ndarray], **kwargs) -> dict:
        """The collector's arrays and finished episodes with ``weights`` (the learner's state dict as numpy), plus
        reward terms, curriculum levels, this worker's node and its own time [s]."""
        self.collector.policy.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
        start = time.perf_counter()
        part = self.collector(**kwargs)
        return {
            **part,
            "seconds": time.perf_counter() - start,
            "curriculum": dict(self.env.task.curriculum_levels()),
            "node": _node_id(),
        }

    def node(self) -> str:
        """The Ray node this worker runs on (also: the worker is up)."""
        return _node_id()

    def close(self) -> None:
        self.env.close()


class PPOCollector:
    """One PPO iteration (``ppo.n_steps`` steps of every env, GAE included) per call: BUFFER_FIELDS as (T, n, ...)."""

    def __init__(self, env, policy_kwargs: dict, config, seed: int):
        from embody.policies.actor_critic import ActorCritic
        from embody.policies.ppo import PPO, RolloutBuffer

        self.policy = ActorCritic.from_kwargs(policy_kwargs)
        self.ppo = PPO(env, self.policy, config.ppo, mirror=env.task.mirror() if config.ppo.symmetry else None)
        sizes = (env.observation_size, self.policy.critic_size, env.action_size)
        self.buf = RolloutBuffer(config.ppo.n_steps, env.n_envs, *sizes, torch.device("cpu"), self.ppo._obs_dtype)

    def __call__(self) -> dict:
        returns: list[float] = []
        lengths: list[int] = []
        self.ppo.collect(self.buf, returns, lengths)
        arrays = {k: getattr(self.buf, k).numpy().copy() for k in BUFFER_FIELDS}
        return {"arrays": arrays, "returns": returns, "lengths": lengths, "reward_terms": dict(self.ppo.reward_terms)}


class SACCollector:
    """``steps`` vector steps with the policy's sampled actions (``random``: uniform ones, before learning starts)
    per call: SAC_FIELDS as (steps, n, ...), ``next_obs`` the final observation where an episode ended."""

    def __init__(self, env, policy_kwargs: dict, config, seed: int):
        from embody.policies.sac import SACPolicy

        self.env, self.policy = env, SACPolicy.from_kwargs(policy_kwargs)
        self.rng = np.random.default_rng(seed)
        self.obs = None

    @torch.no_grad()
    def __call__(self, steps: int, random: bool) -> dict:
        if self.obs is None:
            self.obs = self.env.reset()[0]
        rows: dict[str, list] = {k: [] for k in SAC_FIELDS}
        returns: list[float] = []
        for _ in range(steps):
            if random:
                action = self.rng.uniform(-1, 1, (len(self.obs), self.policy.action_size)).astype(np.float32)
            else:
                action = self.policy.act(torch.as_tensor(self.obs, dtype=torch.float32), deterministic=False).numpy()
            next_obs, reward, terminated, truncated, info = self.env.step(action)
            done = terminated | truncated
            final = np.where(done[:, None], info.final_obs, next_obs)
            for k, v in zip(SAC_FIELDS, (self.obs, action, reward, final, terminated, done)):
                rows[k].append(v)
            returns.extend(info.episode_return.tolist())
            self.obs = next_obs
        return {
            "arrays": {k: np.stack(v) for k, v in rows.items()},
            "returns": returns,
            "lengths": [],
            "reward_terms": {},
        }


def _node_id() -> str:
    ray = sys.modules.get("ray")  # never start Ray here: a direct call (a test) runs "local"
    return ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else "local"


class RolloutWorkers:
    """``workers`` Ray actors sharing ``cfg.n_envs``; ``collect(policy)`` is one iteration's merged ``Rollout``."""

    def __init__(self, cfg, policy_kwargs: dict, workers: int, address: str | None = None, worker_cpus: float = 1.0):
        from embody.config import to_dict

        sizes = split_envs(cfg.n_envs, workers)
        self.ray = connect(address, workers, worker_cpus)
        actor = self.ray.remote(num_cpus=worker_cpus)(RolloutWorker)
        config = to_dict(cfg)
        self.workers = {i: actor.remote(config, policy_kwargs, i, n) for i, n in enumerate(sizes)}
        self.sizes = dict(enumerate(sizes))
        self.lost: list[str] = []  # one line per worker lost, for the run's log
        print(f"starting {workers} rollout workers ({', '.join(map(str, sizes))} envs)", file=sys.stderr)
        for i, w in self.workers.items():  # envs built before the clock starts; a bad config fails here
            try:
                self.ray.get(w.node.remote())
            except self.ray.exceptions.RayError as e:
                self.close()
                raise WorkerError(f"rollout worker {i} failed to start:\n{e}") from None

    @property
    def n_envs(self) -> int:
        return sum(self.sizes[i] for i in self.workers)

    def collect(self, policy: torch.nn.Module, **kwargs) -> Rollout:
        """Every live worker runs its collector once (``kwargs``: SAC's ``steps`` and ``random``) with ``policy``'s
        weights; workers that died are dropped and reported."""
        ray = self.ray
        weights = ray.put({k: v.detach().cpu().numpy() for k, v in policy.state_dict().items()})
        pending = {i: w.collect.remote(weights, **kwargs) for i, w in self.workers.items()}
        parts = []
        for i, ref in pending.items():
            try:
                parts.append(ray.get(ref))
            except ray.exceptions.RayTaskError as e:  # the worker's own code raised: a bug or bad input, not a loss
                raise WorkerError(f"rollout worker {i} raised:\n{e}") from None
            except ray.exceptions.RayActorError as e:  # its process or node died: carry on without it
                self._drop(i, e)
        if not parts:
            raise WorkerError("every rollout worker was lost: " + "; ".join(self.lost))
        return _merge(parts)

    def _drop(self, i: int, error: Exception) -> None:
        del self.workers[i]
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        line = f"rollout worker {i} lost ({reason}); continuing with {len(self.workers)} workers, {self.n_envs} envs"
        self.lost.append(line)
        print(f"\n{line}", file=sys.stderr)

    def close(self) -> None:
        for w in self.workers.values():
            self.ray.kill(w)
        self.workers = {}


def _merge(parts: list[dict]) -> Rollout:
    arrays = {k: np.concatenate([p["arrays"][k] for p in parts], axis=1) for k in parts[0]["arrays"]}
    weights = np.array([p["arrays"]["rewards"].shape[1] for p in parts], dtype=np.float64)
    weights /= weights.sum()
    mean = lambda key: {  # noqa: E731  (env-weighted mean over the workers)
        k: float(sum(w * p[key].get(k, 0.0) for w, p in zip(weights, parts))) for k in parts[0][key]
    }
    return Rollout(
        arrays,
        [r for p in parts for r in p["returns"]],
        [n for p in parts for n in p["lengths"]],
        mean("reward_terms"),
        mean("curriculum"),
        {p["node"] for p in parts},
        max(p["seconds"] for p in parts),
    )


@dataclass
class RayBackend:
    """The job runner's backend on a Ray cluster (``address``; None: a Ray instance on this machine): one Ray task
    per job with ``cpus`` CPUs, as many at once as the cluster holds (``workers`` is the local backend's knob and
    is ignored). A job whose node dies is retried on another (Ray's ``max_retries``); a job that raises re-raises
    its own exception here and cancels the rest. ``fn`` travels by reference: the workers need the same code."""

    workers: int = 1
    address: str | None = None
    cpus: float = 1.0

    def run(self, fn, jobs):
        """``fn(job.params)`` for every job on the cluster; yields (job, result) as each completes."""
        jobs = list(jobs)
        if not jobs:
            return
        ray = connect(self.address, 1, self.cpus)
        call = ray.remote(num_cpus=self.cpus, max_retries=3)(_call)
        refs = {call.remote(fn, job.params): job for job in jobs}
        pending = list(refs)
        try:
            while pending:
                (ref,), pending = ray.wait(pending, num_returns=1)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    raise e.as_instanceof_cause() from None  # the job's own error, with its remote traceback
                yield refs[ref], result
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)


def _call(fn, params: dict):
    return fn(params)
