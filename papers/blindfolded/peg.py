"""Blindfolded experts, peg domain: peg insertion tasks, experts at controlled information levels,
history-conditioned (GRU) behavior cloning and evaluation on given holes.

**Task** = a hole pose: the hole's xy offset from the nominal mouth (m), within ±``hole_xy_range``
(8 mm) in x and y (the task's own prior; yaw 0, clearance fixed at 1 mm, one VecEnv). ``TaskPegInsert``
is ``peg-insert`` whose ``sample_fixtures`` takes each resetting env's hole from a queue of tasks
(one queue entry per episode) instead of drawing it, so a batch of envs plays given tasks.
The learner observes ``peg-insert``'s 33-dim observation (proprioception, tip pose relative to the
nominal mouth, wrench, previous action, controller target), never the hole.

**Experts** (each a Policy over cat(obs, privileged obs) (n, 38) → (n, 3), batched over envs):
  - ``informed``: ``ScriptedExpert(approach="contact")`` (reads the true hole offset);
  - ``region-<s>mm``: ``SearchExpert(side=s)``: told only a square of side s containing the hole,
    centred at hole + U(-s/2, s/2)² (so the centre does not reveal the hole);
  - ``blind``: ``SearchExpert(side=None)``: the prior square (centre = nominal hole, side 2·range).
  A search expert moves above the region's centre, touches down, then slides a square spiral
  (pitch 1.2 mm < 2·clearance, so the path passes within 0.6 mm of every point) pressing the
  target ``press`` (0.4 mm) below the board's face, 0.7 mm per step, advancing along the spiral only while the tip keeps up
  with it. It detects the hole by the tip dropping below the face (height < -0.3 mm: the peg is in),
  then pushes down as the informed expert does, and lifts whenever the wrist force exceeds
  ``max_force`` (a jam). Its only use of the privileged observation is drawing the region at the
  first step after each reset; the spiral and the detection use the learner's observation.

**Information** (``information_bits``): with task resolution δ = 1 mm (the clearance: a hole known
to within δ is found without search), H(hole) = log2((2·range/δ)²) = 8 bits and an expert told a
square of side s has H(hole | region) = max(0, log2((s/δ)²)), so I = H(hole) − H(hole | region):
informed 8, region-4mm 4, region-8mm 2, blind 0 bits. Near the prior's border a random-offset
region sticks out of the prior and the posterior is narrower than s², so these nominal values are a
slight under-estimate for region levels (``information_bits_exact`` integrates the edge effect).
(computed with ``information.box_information``, the maze half's box formula.)

**Cloning / evaluation**: ``collect`` (expert demonstrations on m given tasks, learner observations
only; ``noise`` in ``run_episodes`` for DART-style perturbed collection), ``train_student``
(``RecurrentActorCritic`` + ``train_bc`` on BPTT windows, then ``dagger`` on the training holes with the
level's expert relabelling the student's own rollouts), ``evaluate``
(success rate, steps to insert, peak wrist force on given tasks). All batched over envs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from embody.policies.base import RandomPolicy
from embody.policies.bc import BCConfig, train_bc
from embody.policies.datasets import Demonstrations
from embody.policies.distill import DAggerConfig, distill
from embody.policies.recurrent import RecurrentActorCritic, RecurrentConfig
from embody.robots import get_robot
from embody.rotations import yaw_quat
from embody.sims import SIMULATORS, make_sim
from embody.sims.base import check_capabilities
from embody.sims.tasks.peg_insert import OBS_SIZE, WRENCH, PegInsert, PegInsertConfig, ScriptedExpert, observation_size
from embody.sims.vec_env import VecEnv

from .information import box_information
from .search import SearchExpert

HOLE_XY_RANGE = 0.008  # m, ± (peg-insert's default prior)
DELTA = 0.001  # m, task resolution for I (the clearance-scale alignment tolerance)
MIN_GRAD_STEPS = 1000  # student training: at least this many BC gradient steps (DAgger: half per iteration)
DAGGER_ITERATIONS = 3  # student training: DAgger iterations on the training holes after cloning
MAX_EPISODE_STEPS = 600  # one episode budget for every level (the blind spiral covers the prior in ~500 steps)
# level -> side (m) of the square the expert is told contains the hole; 0: the hole itself
# (informed); None: nothing beyond the prior (blind)
LEVELS: dict[str, float | None] = {"informed": 0.0, "region-4mm": 0.004, "region-8mm": 0.008, "blind": None}


# -- information ---------------------------------------------------------------------------------
def information_bits(level: str, hole_xy_range: float = HOLE_XY_RANGE, delta: float = DELTA) -> float:
    """I = H(hole) − H(hole | expert's knowledge) in bits, hole uniform over the (2·range)² square at
    resolution δ: ``information.box_information`` of the prior square and the square of side max(s, δ)
    the expert is told (δ for informed, the prior square itself for blind): 8, 4, 2, 0 bits for
    informed, region-4mm, region-8mm, blind at range ±8 mm, δ = 1 mm."""
    side = _side(level, hole_xy_range)
    prior = 2 * hole_xy_range
    known = min(max(side, delta), prior)
    return box_information((prior, prior), (known, known))


def information_bits_exact(
    level: str, hole_xy_range: float = HOLE_XY_RANGE, delta: float = DELTA, grid: int = 2001
) -> float:
    """As ``information_bits`` but with the posterior of a random-offset region clipped to the prior:
    per axis, H(x | c) = E log2(max(δ, |[c − s/2, c + s/2] ∩ [−R, R]|)/δ) with x ~ U(−R, R) and
    c = x + U(−s/2, s/2) (numerical integration; the two axes are independent)."""
    side, R = _side(level, hole_xy_range), hole_xy_range
    h_prior_axis = math.log2(2 * R / delta)
    if side <= delta or level == "blind":
        return 2 * (h_prior_axis - (0.0 if side <= delta else h_prior_axis))
    x = np.linspace(-R, R, grid)[:, None]
    u = np.linspace(-side / 2, side / 2, grid)[None, :]
    c = x + u
    length = np.minimum(c + side / 2, R) - np.maximum(c - side / 2, -R)
    h_post_axis = float(np.mean(np.log2(np.maximum(length, delta) / delta)))
    return 2 * (h_prior_axis - h_post_axis)


def _side(level: str, hole_xy_range: float) -> float:
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; valid: {list(LEVELS)}")
    side = LEVELS[level]
    return 2 * hole_xy_range if side is None else side


# -- tasks ---------------------------------------------------------------------------------------
def sample_tasks(rng: np.random.Generator, n: int, hole_xy_range: float = HOLE_XY_RANGE) -> np.ndarray:
    """(n, 2) hole xy offsets [m] drawn uniformly within ±range (peg-insert's prior)."""
    return rng.uniform(-hole_xy_range, hole_xy_range, (n, 2))


def split_tasks(seed: int, n_train: int, n_heldout: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint training (n_train, 2) and held-out (n_heldout, 2) holes from one seed (continuous
    draws: distinct with probability 1; the held-out set does not depend on n_train)."""
    rng = np.random.default_rng([seed, 11])
    heldout = sample_tasks(rng, n_heldout)
    train = sample_tasks(np.random.default_rng([seed, 12]), n_train)
    return train, heldout


class TaskPegInsert(PegInsert):
    """peg-insert playing given holes: ``assign(tasks)`` queues one hole per episode; every env
    that resets takes the next queued hole (in env order) and records its queue index in
    ``episode_id`` (-1 once the queue is empty: the env idles on a drawn hole, not to be counted)."""

    name = "peg-insert-tasks"

    def __init__(self, config: PegInsertConfig, robot, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        self.queue = np.zeros((0, 2))
        self.next = 0
        self.episode_id = np.full(n_envs, -1, dtype=np.int64)

    def assign(self, tasks: np.ndarray) -> None:
        """tasks (E, 2) hole xy offsets [m], one per episode, played in order."""
        tasks = np.asarray(tasks, dtype=np.float64).reshape(-1, 2)
        if np.abs(tasks).max(initial=0.0) > self.config.hole_xy_range + 1e-9:
            raise ValueError(f"hole offsets must lie within ±{self.config.hole_xy_range} m")
        self.queue, self.next = tasks, 0

    def sample_fixtures(self, env_ids: np.ndarray) -> dict:
        """Give the envs being reset the next queued holes (and their ``episode_id``); envs beyond the queue keep a
        drawn hole."""
        out = super().sample_fixtures(env_ids)  # draws (and keeps) a hole for envs beyond the queue
        take = min(len(env_ids), len(self.queue) - self.next)
        ids = env_ids[:take]
        self.hole[ids, :2] = self.nominal[:2] + self.queue[self.next : self.next + take]
        self.episode_id[env_ids] = -1
        self.episode_id[ids] = np.arange(self.next, self.next + take)
        self.next += take
        if out:
            out = {k: (self.hole[env_ids].copy(), yaw_quat(self.yaw[env_ids])) for k in out}
        return out


def make_config(max_episode_steps: int | None = None, **observation) -> PegInsertConfig:
    """peg-insert's defaults (8 mm range, 1 mm clearance, round hole) with one longer episode
    budget for every level; ``observation``: PegInsertConfig's observation switches (``contact_history``,
    ``search_progress``, ``last_action``)."""
    return PegInsertConfig(
        max_episode_steps=max_episode_steps or MAX_EPISODE_STEPS, hole_xy_range=HOLE_XY_RANGE, **observation
    )


def make_env(n_envs: int, seed: int = 0, config: PegInsertConfig | None = None, sim: str = "mujoco") -> VecEnv:
    """A VecEnv of TaskPegInsert on ``sim`` (``config`` default: the study's); raises if the simulator lacks a
    capability."""
    config = config or make_config()
    config.sim.n_envs = n_envs
    robot = get_robot(PegInsert.robot_name, **PegInsert.robot_params(config, seed))
    task = TaskPegInsert(config, robot, n_envs, seed)
    check_capabilities(sim, SIMULATORS.get(sim).capabilities, task.name, task.requirements())
    return VecEnv(task, make_sim(sim, robot, config.sim), seed=seed)


# -- experts -------------------------------------------------------------------------------------
def make_expert(level: str, config: PegInsertConfig | None = None, seed: int = 0, resync: float = 0.0):
    """The expert of ``level`` (a Policy over cat(obs, privileged) (n, 38)); ``resync``: SearchExpert's (a
    search expert as a DAgger teacher)."""
    config = config or make_config()
    side = _side(level, config.hole_xy_range) if level in LEVELS else None
    if level == "informed":
        return ScriptedExpert(config, approach="contact")
    return SearchExpert(config, None if level == "blind" else side, resync=resync, seed=seed)


# -- rollouts ------------------------------------------------------------------------------------
@dataclass
class Episodes:
    """Per finished queued episode e (E,): success, length [steps], peak wrist force [N];
    with ``record``, the rows of every queued episode in order (N, ...) and their starts."""

    success: np.ndarray
    length: np.ndarray
    peak_force: np.ndarray
    obs: np.ndarray | None = None
    actions: np.ndarray | None = None
    starts: np.ndarray | None = None


@torch.no_grad()
def run_episodes(
    env: VecEnv,
    policy,
    tasks: np.ndarray,
    privileged: bool,
    record: bool = False,
    teacher=None,
    beta: float = 0.0,
    noise: float = 0.0,
    seed: int = 0,
) -> Episodes:
    """Play one episode per row of ``tasks`` (E, 2) with ``policy`` (deterministic ``act``; over
    cat(obs, privileged) when ``privileged``, else obs only) on ``env``'s n envs (E may exceed n:
    envs take the next hole as they finish).

    ``noise`` > 0 (DART, Laskey et al. 2017): the executed action is the policy's plus N(0, noise²)
    (clipped to [-1, 1]) while the recorded action stays the policy's own, so the demonstrations hold
    the expert's recoveries from perturbed states. ``teacher`` (DAgger): a second policy over
    cat(obs, privileged) that acts on every step and whose action is the one recorded (the label);
    the executed action is the teacher's with probability ``beta`` (per env and step) and
    ``policy``'s otherwise. A stateful teacher (``SearchExpert``) keeps tracking the visited states,
    so its labels say what it would do from where the student has taken the peg."""
    task: TaskPegInsert = env.task
    E = len(tasks)
    task.assign(tasks)
    obs, priv = env.reset()
    policy.reset(None)
    success, length, peak = np.zeros(E, dtype=bool), np.zeros(E, dtype=np.int64), np.zeros(E)
    finished = np.zeros(E, dtype=bool)
    running_peak = np.linalg.norm(obs[:, WRENCH][:, :3], axis=1)
    rec: dict[str, list] = {"obs": [], "actions": [], "eid": []}
    rng = np.random.default_rng([seed, 17])
    if teacher is not None:
        teacher.reset(None)
    while not finished.all():
        eid = task.episode_id.copy()
        x = np.concatenate([obs, priv], axis=1) if privileged else obs
        action = policy.act(torch.as_tensor(x, dtype=torch.float32)).cpu().numpy()
        label = action
        if teacher is not None:
            full = torch.as_tensor(np.concatenate([obs, priv], axis=1), dtype=torch.float32)
            label = teacher.act(full).cpu().numpy()
            action = np.where(rng.random((len(obs), 1)) < beta, label, action)
        if noise > 0:
            action = np.clip(action + rng.normal(0.0, noise, action.shape), -1.0, 1.0)
        if record:
            rec["obs"].append(obs)
            rec["actions"].append(label.astype(np.float32))
            rec["eid"].append(eid)
        obs, _, terminated, truncated, info = env.step(action.astype(np.float32))
        priv = info.privileged_obs
        running_peak = np.maximum(running_peak, np.linalg.norm(info.final_obs[:, WRENCH][:, :3], axis=1))
        done = np.flatnonzero(terminated | truncated)
        if done.size:
            ok = info.episode_success
            mine = eid[done] >= 0
            e = eid[done][mine]
            success[e], length[e], peak[e] = ok[mine], info.episode_length[mine], running_peak[done][mine]
            finished[e] = True
            policy.reset(torch.as_tensor(done))
            if teacher is not None:
                teacher.reset(done)
            running_peak[done] = np.linalg.norm(obs[done][:, WRENCH][:, :3], axis=1)
    out = Episodes(success, length, peak)
    if record:
        o, a, ids = np.stack(rec["obs"]), np.stack(rec["actions"]), np.stack(rec["eid"])  # (T, n, ...)
        t, env_i = np.nonzero(ids >= 0)
        order = np.lexsort((t, ids[t, env_i]))
        t, env_i = t[order], env_i[order]
        e = ids[t, env_i]
        out.obs, out.actions = o[t, env_i], a[t, env_i]
        out.starts = np.r_[True, e[1:] != e[:-1]]
    return out


# -- the study's domain API -----------------------------------------------------------------------
def collect(
    level: str, tasks: np.ndarray, episodes_per_task: int = 1, seed: int = 0, n_envs: int = 16
) -> Demonstrations:
    """Expert demonstrations of ``level`` on ``tasks`` (m, 2): ``episodes_per_task`` episodes per
    hole (different start poses, and regions for region levels). Rows hold the learner's observation
    only (N, 33) and the expert's action (N, 3); every episode is one segment. ``meta``: level, I,
    tasks, the expert's per-episode success / length / peak force, time_s."""
    start = time.perf_counter()
    config = make_config()
    queue = np.repeat(np.asarray(tasks, dtype=np.float64).reshape(-1, 2), episodes_per_task, axis=0)
    env = make_env(min(n_envs, len(queue)), seed=seed, config=config)
    ep = run_episodes(env, make_expert(level, config, seed=seed), queue, privileged=True, record=True)
    env.close()
    meta = {
        "level": level,
        "information_bits": information_bits(level),
        "tasks": np.asarray(tasks).tolist(),
        "episodes_per_task": episodes_per_task,
        "seed": seed,
        "success": ep.success.tolist(),
        "length": ep.length.tolist(),
        "peak_force": ep.peak_force.tolist(),
        "time_s": time.perf_counter() - start,
    }
    return Demonstrations(torch.as_tensor(ep.obs), torch.as_tensor(ep.actions), torch.as_tensor(ep.starts), meta)


def train_student(
    demos: Demonstrations,
    hidden: int = 64,
    epochs: int = 150,
    seq_len: int = 128,
    batch_size: int = 512,
    lr: float = 2e-3,
    seed: int = 0,
    level: str | None = None,
    tasks: np.ndarray | None = None,
    dagger_iterations: int = 3,
    dagger_episodes: int = 16,
    dagger_epochs: int | None = None,
    config: PegInsertConfig | None = None,
    n_envs: int = 16,
    min_grad_steps: int = MIN_GRAD_STEPS,
    dagger_betas: list[float] | None = None,
    teacher_resync: float = 0.0,
) -> RecurrentActorCritic:
    """A GRU BC student (obs (n, 33) → action (n, 3), history in its state) trained on ``demos``
    by BPTT over ``seq_len`` windows (``train_bc``; the first ``seq_len // 4`` steps of a window
    that starts mid-episode are context only), then, given the expert ``level`` and the training
    holes ``tasks`` (m, 2), refined by ``dagger``. Its ``fit`` attribute holds the last training's
    result (train_bc's; after DAgger, its mse), ``dagger`` the per-iteration rollout statistics."""
    torch.manual_seed(seed)
    policy = RecurrentActorCritic(
        demos.obs_size, demos.action_size, 0, RecurrentConfig(rnn_hidden=hidden, actor_hidden=[hidden])
    )
    bc = BCConfig(epochs=epochs, batch_size=batch_size, seq_len=seq_len, burn_in=seq_len // 4, lr=lr, seed=seed)
    policy.fit = train_bc(policy, demos, replace(bc, epochs=_epochs(len(demos), bc, min_grad_steps)))
    policy.dagger = []
    if level is not None and tasks is not None and len(tasks) and dagger_iterations > 0:
        dagger(
            policy,
            demos,
            level,
            tasks,
            bc,
            dagger_iterations,
            dagger_episodes,
            dagger_epochs,
            config,
            n_envs,
            seed,
            min_grad_steps,
            dagger_betas,
            teacher_resync,
        )
    return policy


def _epochs(n_rows: int, bc: BCConfig, min_grad_steps: int) -> int:
    """bc.epochs, or more so that training takes at least ``min_grad_steps`` gradient steps (a few
    demonstrations make only one or two minibatches of windows per epoch)."""
    L = min(bc.seq_len, n_rows)
    per_epoch = max(1, math.ceil(max(1, (n_rows - L) // L + 1) / max(1, bc.batch_size // L)))
    return max(bc.epochs, math.ceil(min_grad_steps / per_epoch))


def dagger(
    policy,
    demos: Demonstrations,
    level: str,
    tasks: np.ndarray,
    bc: BCConfig,
    iterations: int = 3,
    episodes: int = 16,
    epochs: int | None = None,
    config: PegInsertConfig | None = None,
    n_envs: int = 16,
    seed: int = 0,
    min_grad_steps: int = MIN_GRAD_STEPS,
    betas: list[float] | None = None,
    resync: float = 0.0,
) -> list[dict]:
    """DAgger (Ross et al. 2011; the core loop, ``embody.policies.distill.distill``) on the training
    holes, starting from ``demos``: each iteration plays ``episodes`` episodes (the holes of ``tasks``
    cycled) executing the expert's action with probability ``betas[i]`` (default 0.5^(i+1) for
    ``iterations`` iterations) and the student's otherwise, labels every visited state with the
    ``level`` expert's action (a fresh expert each round runs alongside on the same observations: the
    informed expert is stateless; a search expert draws its region and tracks its spiral from the
    states the student visits), adds them to the data and goes on training ``policy`` on all of it
    (``epochs``, default bc.epochs // 2 or more for ``min_grad_steps`` // 2 gradient steps, the
    observation normalizer kept). Cloning the demonstrations alone leaves the GRU off the
    demonstrated states within a few steps (compounding error); measured on 2 holes, informed:
    BC 19% → DAgger 75-88% at the training holes. Appends to and returns ``policy.dagger``."""
    config = config or make_config()
    tasks = np.asarray(tasks, dtype=np.float64).reshape(-1, 2)
    queue = tasks[np.arange(max(episodes, len(tasks))) % len(tasks)]
    env = make_env(min(n_envs, len(queue)), seed=seed + 1000, config=config)
    history = policy.dagger = getattr(policy, "dagger", [])

    def rollout(i: int, beta: float) -> tuple[Demonstrations, dict]:
        teacher = make_expert(level, config, seed=seed * 100 + i + 1, resync=resync)
        ep = run_episodes(
            env, policy, queue, privileged=False, record=True, teacher=teacher, beta=beta, seed=seed * 100 + i
        )
        rows = Demonstrations(torch.as_tensor(ep.obs), torch.as_tensor(ep.actions), torch.as_tensor(ep.starts), {})
        return rows, {"rollout_success": float(ep.success.mean())}

    def bc_for(i: int, rows: int) -> BCConfig:
        n_epochs = epochs or _epochs(rows, replace(bc, epochs=max(1, bc.epochs // 2)), min_grad_steps // 2)
        return replace(bc, epochs=n_epochs, fit_normalizer=False, seed=bc.seed + i + 1)

    def record(m: dict) -> None:
        history.append(
            {
                "iteration": m["iteration"],
                "beta": m["beta"],
                "rollout_success": m["rollout_success"],
                "samples": m["samples"],
                "mse": m["train_mse"],
            }
        )
        policy.fit = {"mse": m["train_mse"]}

    schedule = betas if betas is not None else [0.5 ** (i + 1) for i in range(iterations)]
    try:
        distill(
            env,
            None,
            policy,
            DAggerConfig(betas=list(schedule), bc=bc),
            progress_cb=record,
            initial=demos,
            rollout=rollout,
            bc_for=bc_for,
        )
    finally:
        env.close()
    return history


def evaluate(
    policy, tasks: np.ndarray, episodes_per_task: int = 1, seed: int = 0, n_envs: int = 16, privileged: bool = False
) -> dict:
    """Run ``policy`` (a student over obs (n, 33); an expert over (n, 38) with ``privileged``) for
    ``episodes_per_task`` episodes on each hole of ``tasks`` (m, 2). Returns success (rate),
    steps_to_insert (mean length of successful episodes, nan if none), mean_steps (all episodes,
    failures at the step limit), peak_force (mean over episodes of the peak tared wrist force, N),
    episodes, time_s."""
    start = time.perf_counter()
    queue = np.repeat(np.asarray(tasks, dtype=np.float64).reshape(-1, 2), episodes_per_task, axis=0)
    env = make_env(min(n_envs, len(queue)), seed=seed)
    ep = run_episodes(env, policy, queue, privileged=privileged)
    env.close()
    return {
        "success": float(ep.success.mean()),
        "steps_to_insert": float(ep.length[ep.success].mean()) if ep.success.any() else float("nan"),
        "mean_steps": float(ep.length.mean()),
        "peak_force": float(ep.peak_force.mean()),
        "episodes": len(queue),
        "time_s": time.perf_counter() - start,
    }


class ZeroPolicy:
    """Holds the target (a = 0): the do-nothing baseline, obs (n, 33) → zeros (n, 3)."""

    obs_size, action_size = OBS_SIZE, 3

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Zero actions (n, 3): hold the target."""
        return torch.zeros(obs.shape[0], 3)

    def reset(self, env_ids=None) -> None:
        pass


# -- deployable run directory ------------------------------------------------------------------------
def train_config(config: PegInsertConfig | None = None, seed: int = 0):
    """The TrainConfig of the plain ``peg-insert`` env a student was cloned on (the hole-queue
    subclass only chooses which holes are played; observation, action and dynamics are peg-insert's)."""
    from embody.config import to_dict
    from embody.train import TrainConfig

    env = to_dict(config or make_config())
    env.pop("sim", None)
    return TrainConfig(task=PegInsert.name, sim="mujoco", n_envs=1, steps=0, seed=seed, env=env)


def write_student_run(policy, out, meta: dict | None = None, config: PegInsertConfig | None = None, seed: int = 0):
    """Write a cloned peg student as a run directory (``embody.runs.write_policy_run``: RUN/config.yaml
    of the plain peg-insert env + RUN/checkpoint/, ``meta`` under the checkpoint's "blindfolded" key)
    that ``embody eval RUN`` and ``embody deploy RUN --robot peg_arm --target sim|real`` accept.
    Returns the path."""
    from embody.runs import write_policy_run

    return write_policy_run(out, train_config(config, seed), policy, {"env_steps": 0, "blindfolded": meta or {}})


def load_student_run(path):
    """(policy, meta) of a run directory written by ``write_student_run``."""
    from embody.runs import load_run_checkpoint

    ckpt = load_run_checkpoint(path)
    return ckpt.policy, ckpt.meta.get("blindfolded", {})


# -- the study's domain interface (study.get_domain) --------------------------------------------------
def hole_of(task_ids) -> np.ndarray:
    """(k, 2) hole xy offsets [m] of integer task ids (the study's task identity): uniform within
    ±range, a deterministic function of the id."""
    return np.array([sample_tasks(np.random.default_rng([int(t), 13]), 1)[0] for t in task_ids]).reshape(-1, 2)


@dataclass
class PegRollouts:
    """Evaluation episodes of a learner, one per task (hole)."""

    success: np.ndarray  # (n,) bool
    steps: np.ndarray  # (n,) int (max steps when it failed)
    peak_force: np.ndarray  # (n,) N


class PegDomain:
    """The peg domain for study.py: levels, I, expert demonstrations (successful episodes only),
    the continuous GRU student (``train``), evaluation, and run directories for the models."""

    name = "peg"
    n_actions = 3  # continuous actions (the action dimension)

    def __init__(self, cfg):  # a config.PegConfig
        self.cfg = cfg
        self.obs_spec = {"obs": (observation_size(self.task_config()),)}

    def task_config(self) -> PegInsertConfig:
        """The peg-insert config of the study (its episode length)."""
        c = self.cfg
        return make_config(
            c.max_steps, contact_history=c.contact_history, search_progress=c.search_progress, last_action=c.last_action
        )

    def levels(self) -> list[str]:
        """The configured levels (raises for an unknown one)."""
        for lv in self.cfg.levels:
            _side(lv, HOLE_XY_RANGE)
        return list(self.cfg.levels)

    def information(self, level: str, tasks=None) -> float:
        """I in bits of ``level`` (see ``information_bits``); ``tasks`` are ignored."""
        return information_bits(level)

    def _run(self, policy, task_ids, privileged: bool, seed: int, record: bool = False, noise: float = 0.0):
        holes = hole_of(task_ids)
        env = make_env(min(self.cfg.n_envs, len(holes)), seed=seed, config=self.task_config())
        try:
            return run_episodes(env, policy, holes, privileged=privileged, record=record, noise=noise, seed=seed)
        finally:
            env.close()

    def expert_stats(self, level: str, task_ids, seed: int = 0) -> dict:
        """The expert's ``success`` rate, ``steps_mean`` and ``steps_max`` of successes, ``peak_force_max`` [N] and
        ``episodes`` over the first ``expert_eval_tasks`` tasks."""
        ids = list(task_ids)[: self.cfg.expert_eval_tasks]
        ep = self._run(make_expert(level, self.task_config(), seed=seed), ids, True, seed)
        ok = ep.success
        return {
            "success": float(ok.mean()),
            "steps_mean": float(ep.length[ok].mean()) if ok.any() else float("nan"),
            "steps_max": int(ep.length[ok].max()) if ok.any() else 0,
            "peak_force_max": float(ep.peak_force.max()),
            "episodes": len(ids),
        }

    def collect(self, level: str, task_ids, information_bits: float | None = None, seed: int = 0):
        """``demos_per_task`` expert episodes per task (different start poses and regions; with ``demo_noise``,
        DART's perturbed execution and the expert's own labels); only the successful ones are kept
        (``meta.episode_tasks``: the task index of each kept episode; ``meta.expert_success``: every episode's
        outcome)."""
        from .demos import from_episodes

        ids = [int(t) for t in task_ids]
        k = self.cfg.demos_per_task
        queue = [t for t in ids for _ in range(k)]
        expert = make_expert(level, self.task_config(), seed=seed)
        ep = self._run(expert, queue, True, seed, record=True, noise=self.cfg.demo_noise)
        starts = np.flatnonzero(ep.starts)
        ends = np.r_[starts[1:], len(ep.starts)]
        keep = [e for e in range(len(queue)) if ep.success[e]]
        if not keep:
            raise RuntimeError(f"the {level} expert failed every episode on tasks {ids}")
        meta = {
            "domain": self.name,
            "level": level,
            "tasks": ids,
            "information_bits": information_bits,
            "episode_tasks": [e // k for e in keep],
            "expert_success": ep.success.astype(int).tolist(),
            "expert_steps": ep.length.tolist(),
            "expert_peak_force": ep.peak_force.tolist(),
            "max_steps": self.cfg.max_steps,
            "demos_per_task": k,
        }
        return from_episodes(
            [{"obs": ep.obs[starts[e] : ends[e]]} for e in keep], [ep.actions[starts[e] : ends[e]] for e in keep], meta
        )

    def train(self, demos, seed: int = 0):
        """The GRU student on a ``demos.Demos`` → (policy, info): BC, then DAgger with the demos'
        expert (``meta.level``) on their training holes (``meta.tasks``), ``train_student``. At
        least min(1000, 10·epochs) gradient steps; ``DAGGER_ITERATIONS`` iterations from 60 epochs up,
        one below (the tiny scale: a pipeline check); none for a search level without ``search_dagger`` (a search
        teacher's labels follow its own spiral progress, which the student cannot observe: results/peg-ablation).
        ``demos`` None (the expert succeeded on none of the holes): the do-nothing policy."""
        if demos is None:
            return ZeroPolicy(), {"loss": float("nan"), "episodes": 0, "note": "no successful expert demonstration"}
        start = time.perf_counter()
        n = int(demos.episode_lengths.sum())
        starts = np.zeros(n, dtype=bool)
        starts[np.r_[0, np.cumsum(demos.episode_lengths)[:-1]]] = True
        d = Demonstrations(
            torch.as_tensor(demos.obs["obs"], dtype=torch.float32),
            torch.as_tensor(demos.actions, dtype=torch.float32),
            torch.as_tensor(starts),
            {},
        )
        c = self.cfg
        level, ids = demos.meta.get("level"), demos.meta.get("tasks")
        holes = hole_of(ids) if level in LEVELS and ids else None
        policy = train_student(
            d,
            hidden=c.hidden,
            epochs=c.epochs,
            seq_len=c.seq_len,
            batch_size=c.batch_size,
            lr=c.lr,
            seed=seed,
            level=level,
            tasks=holes,
            dagger_iterations=self._dagger_iterations(level),
            dagger_episodes=max(16, 2 * len(ids or [])),
            config=self.task_config(),
            n_envs=c.n_envs,
            min_grad_steps=min(MIN_GRAD_STEPS, 10 * c.epochs),
            dagger_betas=c.dagger_betas,
            teacher_resync=c.teacher_resync,
        )
        return policy, {
            "loss": float(policy.fit["mse"]),
            "episodes": len(demos.episode_lengths),
            "steps": n,
            "dagger": policy.dagger,
            "time_s": time.perf_counter() - start,
        }

    def _dagger_iterations(self, level: str | None) -> int:
        if level != "informed" and not self.cfg.search_dagger:
            return 0
        return DAGGER_ITERATIONS if self.cfg.epochs >= 60 else 1

    def evaluate(self, policy, task_ids, seed: int = 0) -> PegRollouts:
        """One episode of ``policy`` per task (hole); None: uniformly random actions."""
        size = self.obs_spec["obs"][0]
        ep = self._run(RandomPolicy(size, 3, seed) if policy is None else policy, list(task_ids), False, seed)
        return PegRollouts(ep.success, ep.length, ep.peak_force)

    def save_policy(self, policy, path, meta: dict | None = None):
        """Write ``policy`` as a run directory at ``path`` that ``load_policy`` reads back."""
        return write_student_run(policy, path, meta, self.task_config())

    def load_policy(self, path):
        """The policy in the run directory ``path``."""
        return load_student_run(path)


__all__ = [
    "DELTA",
    "HOLE_XY_RANGE",
    "LEVELS",
    "MAX_EPISODE_STEPS",
    "Episodes",
    "SearchExpert",
    "TaskPegInsert",
    "PegDomain",
    "PegRollouts",
    "RandomPolicy",
    "ZeroPolicy",
    "DAGGER_ITERATIONS",
    "MIN_GRAD_STEPS",
    "collect",
    "dagger",
    "evaluate",
    "information_bits",
    "information_bits_exact",
    "make_config",
    "hole_of",
    "load_student_run",
    "make_env",
    "make_expert",
    "run_episodes",
    "sample_tasks",
    "split_tasks",
    "train_config",
    "train_student",
    "write_student_run",
]
