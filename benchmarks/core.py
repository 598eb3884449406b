"""``embody bench core``: embody's simulator, env and PPO against their peers, in one run.

Both sides of every comparison run in this process, on this machine, with the same thread
count (``--threads``, default: all cores). See benchmarks/README.md for what each number means.

(a) physics: physics steps/s (decimation substeps counted) of the batched MuJoCo simulator
    vs. raw ``mujoco.mj_step`` on the same compiled model: ``n`` MjData from the same initial
    states under the same constant control, advanced one control period at a time (so both
    sides deliver states at every control step), by a ThreadPoolExecutor over ``threads``
    chunks of the datas (mj_step releases the GIL), or a plain loop for one thread.
(b) env: env-steps/s of the gym-humanoid VecEnv vs. gymnasium's Humanoid-v5 (``make`` and
    ``make_vec(..., vectorization_mode="sync")``), random actions, autoreset on falls.
(c) PPO on cartpole-swingup: embody's PPO vs. stable-baselines3's PPO with matched
    hyperparameters on the same task (each SB3 env wraps one embody env), compared by
    training env-steps/s and wall-clock time to a training return.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from embody.commands import fraction, positive_float, positive_int

SPEED_TARGET = 0.8  # ours / peer, physics and env rates
PPO_TARGET = 2.0  # peer time / our time to the target return


@dataclass
class Row:
    """One line of the report: our value and the peer's in ``unit``, their ratio, and the target it is held to."""

    measurement: str
    unit: str
    ours: float | None
    peer_name: str
    peer: float | None
    ratio: float | None = None  # ours / peer for rates; peer / ours for times
    ratio_is_lower_bound: bool = False
    target: float | None = None
    note: str = ""

    @property
    def status(self) -> str:
        """``PASS``, ``BELOW-TARGET`` (marked when the ratio is only a lower bound), or ``info`` without a target."""
        if self.target is None:
            return "info"
        if self.ratio is None or self.ratio < self.target:
            return "BELOW-TARGET" + (" (lower bound)" if self.ratio_is_lower_bound else "")
        return "PASS"

    def to_dict(self) -> dict:
        """The row's fields plus ``status``, for results.json."""
        return {**asdict(self), "status": self.status}


def rate_row(
    measurement: str, ours: float, peer_name: str, peer: float, target: float | None = SPEED_TARGET, note: str = ""
) -> Row:
    """A steps/s row with ratio ours / peer."""
    return Row(measurement, "steps/s", ours, peer_name, peer, ours / peer, target=target, note=note)


# -- (a) physics ---------------------------------------------------------------------------
PHYSICS_MODELS = {  # robot: (control mode, decimation, the constant command)
    "h1_2": ("pd", 10, "PD targets at the default pose"),
    "gym_humanoid": ("torque", 5, "zero torque"),
}


def bench_physics(robot_name: str, n_envs: int, steps: int, threads: int, repeats: int) -> Row:
    """(a) for ``robot_name``: physics steps/s of the batched MuJoCo simulator vs. raw ``mj_step`` over
    ``n_envs`` MjData, best of ``repeats`` runs of ``steps`` control steps each."""
    import mujoco

    from embody.robots import get_robot
    from embody.sims import InitState, SimConfig, make_sim
    from embody.sims.mujoco.model import state_offsets

    control, decimation, what = PHYSICS_MODELS[robot_name]
    threads = min(threads, n_envs)  # as the simulator does
    robot = get_robot(robot_name)
    sim = make_sim("mujoco", robot, SimConfig(n_envs=n_envs, decimation=decimation, control=control, n_threads=threads))
    ids = np.arange(n_envs)
    sim.reset(ids, InitState(np.tile(robot.default_pose, (n_envs, 1)), np.zeros((n_envs, robot.n_joints))))
    init = sim.get_state()
    target = robot.default_pose[robot.actuated] if control == "pd" else np.zeros(robot.n_actions)
    command = np.tile(target, (n_envs, 1))

    m, full = sim.model, mujoco.mjtState.mjSTATE_FULLPHYSICS
    datas = [mujoco.MjData(m) for _ in range(n_envs)]
    chunks = [datas[i::threads] for i in range(threads)]
    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def raw_chunk(chunk) -> None:
        for d in chunk:
            mujoco.mj_step(m, d, decimation)

    def run_raw() -> float:
        for d, row, c in zip(datas, init, command):
            mujoco.mj_resetData(m, d)
            mujoco.mj_setState(m, d, row, full)
            d.ctrl[:] = c
        start = time.perf_counter()
        for _ in range(steps):
            if pool is None:
                raw_chunk(datas)
            else:
                list(pool.map(raw_chunk, chunks))
        return time.perf_counter() - start

    def run_ours() -> float:
        sim.set_state(init)
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(command)
            sim.state()
        return time.perf_counter() - start

    ours_t, raw_t = [], []
    for _ in range(repeats):  # interleaved, best of each: both sides see the same machine load
        ours_t.append(run_ours())
        raw_t.append(run_raw())
    q0 = state_offsets(m)["qpos"]
    ours_q, raw_q = sim.get_state()[:, q0 : q0 + m.nq], np.stack([d.qpos for d in datas])
    z = int(m.jnt_qposadr[m.jnt_type == mujoco.mjtJoint.mjJNT_FREE][0]) + 2  # base height
    note = (
        f"{what}; final mean base height ours {ours_q[:, z].mean():.2f} m, raw {raw_q[:, z].mean():.2f} m; "
        f"max final |qpos difference| {np.abs(ours_q - raw_q).max():.1e}"
    )
    if pool is not None:
        pool.shutdown()
    sim.close()
    physics_steps = n_envs * steps * decimation
    return rate_row(
        f"(a) physics {robot_name}: {n_envs} envs x {steps} ctrl x {decimation} substeps",
        physics_steps / min(ours_t),
        f"mj_step, {threads} thread{'s' * (threads > 1)}",
        physics_steps / min(raw_t),
        note=note,
    )


# -- (b) env -------------------------------------------------------------------------------
def bench_env(n_envs: int, steps: int, threads: int, repeats: int, seed: int = 0) -> list[Row]:
    """(b) env-steps/s of the gym-humanoid VecEnv under random actions vs. ``gymnasium.make`` and a sync
    ``make_vec`` of Humanoid-v5: two rows. Needs gymnasium."""
    import gymnasium

    from embody.sims.tasks.gym_humanoid import GymHumanoidConfig
    from embody.sims.vec_env import make_env

    total = n_envs * steps
    config = GymHumanoidConfig()
    config.sim.n_threads = threads
    env = make_env("gym-humanoid", n_envs=n_envs, seed=seed, config=config)
    rng = np.random.default_rng(seed)

    def run_ours() -> float:
        env.reset()
        start = time.perf_counter()
        for _ in range(steps):
            env.step(rng.uniform(-1.0, 1.0, (n_envs, env.action_size)))
        return time.perf_counter() - start

    single = gymnasium.make("Humanoid-v5")
    single.action_space.seed(seed)

    def run_single() -> float:
        single.reset(seed=seed)
        start = time.perf_counter()
        for _ in range(total):
            _, _, terminated, truncated, _ = single.step(single.action_space.sample())
            if terminated or truncated:
                single.reset()
        return time.perf_counter() - start

    vec = gymnasium.make_vec("Humanoid-v5", num_envs=n_envs, vectorization_mode="sync")
    vec.action_space.seed(seed)

    def run_vec() -> float:
        vec.reset(seed=seed)
        start = time.perf_counter()
        for _ in range(steps):
            vec.step(vec.action_space.sample())
        return time.perf_counter() - start

    times = {"ours": [], "single": [], "vec": []}
    for _ in range(repeats):
        for key, run in (("ours", run_ours), ("single", run_single), ("vec", run_vec)):
            times[key].append(run())
    env.close(), single.close(), vec.close()
    ours = total / min(times["ours"])
    name = f"(b) env gym-humanoid: {n_envs} envs x {steps} steps, random actions"
    return [
        rate_row(name, ours, "gymnasium.make Humanoid-v5", total / min(times["single"])),
        rate_row(name, ours, f"make_vec sync, {n_envs} envs", total / min(times["vec"])),
    ]


# -- (c) PPO -------------------------------------------------------------------------------
def _gym_env_class():
    """A gymnasium.Env over one embody env (an n_envs=1 VecEnv), so SB3 learns the same MDP."""
    import gymnasium

    class EmbodyGymEnv(gymnasium.Env):
        def __init__(self, cfg, seed: int):
            from embody.runs import build_env

            self.env = build_env(cfg, n_envs=1, seed=seed)
            box = gymnasium.spaces.Box
            self.observation_space = box(-np.inf, np.inf, (self.env.observation_size,), np.float32)
            self.action_space = box(-1.0, 1.0, (self.env.action_size,), np.float32)

        def reset(self, *, seed=None, options=None):
            return self.env.reset()[0][0], {}

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(np.asarray(action)[None])
            if terminated[0] or truncated[0]:
                obs = info.final_obs  # the VecEnv already reset; SB3 resets again
            return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

        def close(self):
            self.env.close()

    return EmbodyGymEnv


def _ppo_config(threads: int, n_envs: int | None):
    from embody.config import apply_override
    from embody.train import resolve_config

    cfg = resolve_config("cartpole-swingup")
    apply_override(cfg, "env.sim.n_threads", threads)
    if n_envs:
        cfg.n_envs = n_envs
    return cfg


def train_ours(cfg, target: float, budget: float) -> dict:
    """Train embody's PPO on ``cfg`` until the training return reaches ``target`` or ``budget`` s pass.
    Returns ``reached_s`` (None if not reached), ``return``, ``time_s``, ``env_steps``, ``steps_per_s``."""
    import torch

    from embody.policies.actor_critic import ActorCritic
    from embody.policies.ppo import PPO
    from embody.runs import build_env

    torch.manual_seed(cfg.seed)
    env = build_env(cfg)
    ppo = PPO(env, ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy), cfg.ppo)
    out = {"reached_s": None, "return": float("nan")}
    start = time.perf_counter()

    def on_iteration(m: dict) -> bool:
        out["return"] = m["episode_return"]
        if out["reached_s"] is None and m["episode_return"] >= target:
            out["reached_s"] = time.perf_counter() - start
        return out["reached_s"] is not None or time.perf_counter() - start >= budget

    ppo.learn(10**12, on_iteration)
    elapsed = time.perf_counter() - start
    env.close()
    return {**out, "time_s": elapsed, "env_steps": ppo.env_steps, "steps_per_s": ppo.env_steps / elapsed}


def train_sb3(cfg, target: float, budget: float) -> dict:
    """As ``train_ours``, with stable-baselines3's PPO under matched hyperparameters (needs stable-baselines3)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    EmbodyGymEnv = _gym_env_class()
    venv = DummyVecEnv([lambda i=i: Monitor(EmbodyGymEnv(cfg, seed=cfg.seed + i)) for i in range(cfg.n_envs)])
    venv = VecNormalize(venv, norm_obs=True, norm_reward=False, clip_obs=10.0, gamma=cfg.ppo.gamma)
    p, a = cfg.ppo, cfg.policy
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=p.n_steps,
        batch_size=p.n_steps * cfg.n_envs // p.minibatches,
        n_epochs=p.epochs,
        learning_rate=p.lr,
        gamma=p.gamma,
        gae_lambda=p.lam,
        clip_range=p.clip,
        ent_coef=p.ent_coef,
        vf_coef=p.vf_coef,
        max_grad_norm=p.max_grad_norm,
        seed=cfg.seed,
        device="cpu",
        policy_kwargs={
            "net_arch": {"pi": a.actor_hidden, "vf": a.critic_hidden},
            "activation_fn": torch.nn.Tanh,
            "log_std_init": math.log(a.init_std),
        },
    )
    out = {"reached_s": None, "return": float("nan")}

    class Watch(BaseCallback):
        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            return out["reached_s"] is None and time.perf_counter() - self.start < budget

        def _on_rollout_end(self) -> None:  # same statistic as ours: mean of the last 100 episode returns
            if self.model.ep_info_buffer:
                out["return"] = float(np.mean([e["r"] for e in self.model.ep_info_buffer]))
            if out["reached_s"] is None and out["return"] >= target:
                out["reached_s"] = time.perf_counter() - self.start

    watch = Watch()
    model.learn(10**12, callback=watch)
    elapsed = time.perf_counter() - watch.start
    venv.close()
    return {
        **out,
        "time_s": elapsed,
        "env_steps": int(model.num_timesteps),
        "steps_per_s": model.num_timesteps / elapsed,
    }


def bench_ppo(
    threads: int, budget: float, target_frac: float, n_envs: int | None, quick: bool
) -> tuple[list[Row], dict]:
    """(c) both PPOs on cartpole-swingup: the rows (training rate; unless ``quick``, wall-clock to
    ``target_frac`` × 250) and the details of each side for results.json."""
    import torch

    cfg = _ppo_config(threads, n_envs)
    target = target_frac * 250.0  # cartpole-swingup's maximum return
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.torch_threads)  # embody's training default, on both sides
    try:
        ours = train_ours(cfg, target, budget)
        sb3 = train_sb3(cfg, target, budget)
    finally:
        torch.set_num_threads(torch_threads)
    setting = f"{cfg.n_envs} envs, torch threads {cfg.torch_threads}"
    rows = [
        rate_row(
            f"(c) PPO cartpole-swingup training env-steps/s ({setting})",
            ours["steps_per_s"],
            "SB3 PPO (DummyVecEnv)",
            sb3["steps_per_s"],
            target=None,
        )
    ]
    if not quick:
        row = Row(
            f"(c) PPO cartpole-swingup wall-clock to return {target:.0f}",
            "s",
            ours["reached_s"],
            "SB3 PPO (DummyVecEnv)",
            sb3["reached_s"],
            target=PPO_TARGET,
        )
        if ours["reached_s"] is None:
            row.note = f"ours not reached in {ours['time_s']:.0f} s (return {ours['return']:.1f})"
        elif sb3["reached_s"] is None:
            row.ratio, row.ratio_is_lower_bound = sb3["time_s"] / ours["reached_s"], True
            row.note = f"SB3 not reached in {sb3['time_s']:.0f} s (return {sb3['return']:.1f})"
        else:
            row.ratio = sb3["reached_s"] / ours["reached_s"]
        rows.append(row)
    return rows, {"target_return": target, "ours": ours, "sb3": sb3}


# -- report --------------------------------------------------------------------------------
def _num(x: float | None, unit: str) -> str:
    if x is None:
        return "not reached"
    return f"{x:,.1f} s" if unit == "s" else f"{x:,.0f}"


def _ratio(r: Row) -> str:
    if r.ratio is None:
        return "n/a"
    return (">= " if r.ratio_is_lower_bound else "") + f"{r.ratio:.2f}x"


def _target(r: Row) -> str:
    return "" if r.target is None else f">= {r.target:g}x"


def table(rows: list[Row], markdown: bool = False) -> str:
    """The rows as an aligned text table, or a Markdown one."""
    head = ("measurement", "ours", "peer", "peer value", "ratio", "target", "status")
    body = [
        (r.measurement, _num(r.ours, r.unit), r.peer_name, _num(r.peer, r.unit), _ratio(r), _target(r), r.status)
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, body)])


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The ``embody bench core`` options (see ``--help``)."""
    p = argparse.ArgumentParser(prog="embody bench core", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--threads", type=positive_int, default=os.cpu_count() or 1, help="threads for both sides (default: all cores)"
    )
    p.add_argument("--quick", action="store_true", help="a short run: small batches, rates only (for tests)")
    p.add_argument("--out", type=Path, help="write results.json and results.md here")
    p.add_argument("--envs", type=positive_int, help="envs for (a) and (b) (default 64; quick 8)")
    p.add_argument("--budget", type=positive_float, default=300.0, help="PPO wall-clock budget per side [s]")
    p.add_argument("--target-frac", type=fraction, default=0.7, help="PPO target return as a fraction of 250")
    p.add_argument("--ppo-envs", type=positive_int, help="PPO envs (default: the task's, 256; quick 16)")
    p.add_argument("--robots", nargs="+", default=list(PHYSICS_MODELS), choices=list(PHYSICS_MODELS))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``embody bench core``: run (a)–(c), print the table; ``--out DIR`` writes ``results.json`` and
    ``results.md``. Returns 0: a row below its target is reported, not an error."""
    args = parse_args(argv or [])
    threads = max(1, args.threads)
    q = args.quick
    n_envs = args.envs or (8 if q else 64)
    steps, env_steps, repeats = (10, 10, 1) if q else (200, 200, 5)
    budget = min(args.budget, 2.0) if q else args.budget
    rows: list[Row] = []
    started = time.perf_counter()
    for robot in args.robots:
        print(f"(a) physics {robot} ...", flush=True)
        rows.append(bench_physics(robot, n_envs, steps, threads, repeats))
    print("(b) env gym-humanoid vs Humanoid-v5 ...", flush=True)
    rows += bench_env(n_envs, env_steps, threads, repeats)
    print(f"(c) PPO cartpole-swingup vs SB3 (budget {budget:g} s each) ...", flush=True)
    ppo_rows, ppo_detail = bench_ppo(threads, budget, args.target_frac, args.ppo_envs or (16 if q else None), q)
    rows += ppo_rows

    from importlib.metadata import version

    machine = {
        "cpus": os.cpu_count(),
        "threads": threads,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "quick": q,
        "wall_s": time.perf_counter() - started,
        **{p: version(p) for p in ("mujoco", "torch", "gymnasium", "stable_baselines3")},
    }
    print()
    print(table(rows))
    for r in rows:
        if r.note:
            print(f"  {r.measurement}: {r.note}")
    print(f"threads {threads} on {machine['cpus']} cores; ratio = ours/peer for rates, peer/ours for times")
    if q:
        print("--quick: tiny single-shot batches; the rates check the plumbing, not the speed")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"machine": machine, "rows": [r.to_dict() for r in rows], "ppo": ppo_detail}
        (args.out / "results.json").write_text(json.dumps(result, indent=2))
        (args.out / "results.md").write_text(
            f"# embody bench core\n\n{table(rows, markdown=True)}\n\n"
            f"threads {threads}, {machine['cpus']} cores, {machine['platform']}\n"
        )
        print(f"results written to {args.out}")
    return 0
