"""``embody bench gpu``: the MJX path (``--sim mjx``) on whatever device JAX has, against MuJoCo's CPU path.

Three measurements on ``h1_2-velocity`` (its decimation and timestep), each at ``--envs`` envs:

  physics  env-steps/s of the bare ``sim.step`` holding the default pose, MJX against the MuJoCo adapter (the peer,
           same run), with MJX's step split into the device's time (the jitted control step, waited for) and the
           host copies (state rows and sensors back each step): what a GPU path pays for numpy task code
  env      env-steps/s of the whole vector env (task code: observations, rewards, resets, randomization), random
           actions, and the share of that time the simulator's step takes, on MJX and on MuJoCo
  train    PPO on ``--sim mjx`` for ``--budget`` seconds (``--steps`` caps it): env steps, env-steps/s, the final
           training return and episode length, and the evaluation the run ends with

``scripts/gpu_check.sh`` runs it on the GPU machine and merges it into one JSON; ``--tiny`` sizes it for a CPU
(4 envs, one PPO iteration of 8 steps): MJX on a CPU is ~50 ms per H1-2 control step, so only the path is checked.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from embody.commands import positive_float, positive_int

TASK = "h1_2-velocity"


def _sim_config(n_envs: int):
    from embody.sims import SimConfig
    from embody.sims.tasks import TASKS

    sim = TASKS.get(TASK).config_class().sim  # the task's physics: decimation, timestep, armature
    return SimConfig(n_envs=n_envs, decimation=sim.decimation, physics_dt=sim.physics_dt, armature=sim.armature)


def physics_rates(n_envs: int, steps: int) -> dict:
    """env-steps/s of ``sim.step`` on MJX and MuJoCo, and MJX's device and host-copy milliseconds per step."""
    import jax

    from embody.robots import get_robot
    from embody.sims import make_sim

    robot, out = get_robot("h1_2"), {}
    pose = np.tile(robot.default_pose, (n_envs, 1))
    for name in ("mjx", "mujoco"):
        sim = make_sim(name, robot, _sim_config(n_envs))
        start = time.perf_counter()
        sim.step(pose)  # MJX compiles here
        first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(pose)
        out[name] = {"env_steps_per_s": n_envs * steps / (time.perf_counter() - start), "first_step_s": first}
        if name == "mjx":
            out[name].update(_mjx_split(sim, pose, steps, jax), device=str(sim._device))
        sim.close()
    out["mjx_vs_mujoco"] = out["mjx"]["env_steps_per_s"] / out["mujoco"]["env_steps_per_s"]
    return out


def _mjx_split(sim, pose: np.ndarray, steps: int, jax) -> dict:
    """Milliseconds per control step on the device alone and in the host copies a step makes."""
    step, d = sim._k["control_step"], sim._d
    start = time.perf_counter()
    for _ in range(steps):
        d = jax.block_until_ready(step(sim._mx, sim._p, d, sim._put(pose), sim.config.decimation))
    device = (time.perf_counter() - start) / steps
    start = time.perf_counter()
    for _ in range(steps):
        jax.device_get((d.qpos, d.qvel, d.act, d.qacc_warmstart, d.sensordata))
    copy = (time.perf_counter() - start) / steps
    return {"device_ms": 1e3 * device, "host_copy_ms": 1e3 * copy}


def env_rates(task: str, n_envs: int, steps: int) -> dict:
    """Per simulator (MJX, then MuJoCo as the peer): the vector env's env-steps/s with random actions and the share of
    its time the simulator's step takes (the rest is the numpy task code)."""
    from embody.sims.vec_env import make_env

    out = {}
    for sim in ("mjx", "mujoco"):
        env = make_env(task, sim=sim, n_envs=n_envs, seed=0)
        env.reset()
        sim_s, step = 0.0, env.sim.step

        def timed(command, step=step):
            nonlocal sim_s
            start = time.perf_counter()
            step(command)
            sim_s += time.perf_counter() - start

        env.sim.step = timed
        rng = np.random.default_rng(0)
        env.step(rng.uniform(-1, 1, (n_envs, env.action_size)))  # MJX compiles here
        sim_s, start = 0.0, time.perf_counter()
        for _ in range(steps):
            env.step(rng.uniform(-1, 1, (n_envs, env.action_size)))
        total = time.perf_counter() - start
        env.close()
        out[sim] = {"env_steps_per_s": n_envs * steps / total, "sim_share": sim_s / total}
    out["mjx_vs_mujoco"] = out["mjx"]["env_steps_per_s"] / out["mujoco"]["env_steps_per_s"]
    return out


def train_rates(task: str, n_envs: int, budget_s: float, steps: int | None, overrides: list[str]) -> dict:
    """PPO on MJX within ``budget_s`` (``steps`` caps it): what it reached."""
    from embody.train import resolve_config, train

    cfg = resolve_config(task, overrides=overrides, sim="mjx", n_envs=n_envs, steps=steps)
    cfg.max_time_s, cfg.video = budget_s, False  # no video: PyAV need not travel to the GPU machine
    with tempfile.TemporaryDirectory() as tmp:
        summary = train(cfg, Path(tmp) / "run")
        last = json.loads((Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    return {
        "env_steps": last["env_steps"],
        "train_s": last["time_s"],
        "env_steps_per_s": last["steps_per_s"],
        "episode_return": last["episode_return"],
        "episode_length": last.get("episode_length"),
        "eval": summary.get("eval", summary),
    }


TINY_TRAIN = ["ppo.n_steps=8", "eval_episodes=1", "env.max_episode_steps=10"]  # one PPO iteration of 4 × 8 steps


def main(argv: list[str]) -> int:
    """``embody bench gpu``: measure, print, ``--out DIR`` writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--envs", type=positive_int, default=4096, help="envs of every measurement")
    p.add_argument("--steps", type=positive_int, default=50, help="timed control steps for physics and env")
    p.add_argument("--budget", type=positive_float, default=240.0, help="seconds of PPO training on MJX")
    p.add_argument("--train-steps", type=positive_int, help="cap the training at this many env steps")
    p.add_argument("--set", action="append", default=[], help="training config overrides (KEY=VALUE)")
    p.add_argument("--tiny", action="store_true", help="4 envs, 3 steps, one 8-step PPO iteration: the CPU check")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    if args.tiny:
        args.envs, args.steps, args.train_steps = 4, 3, 32
        args.set = [*args.set, *TINY_TRAIN]
    result = {
        "task": TASK,
        "envs": args.envs,
        "physics": physics_rates(args.envs, args.steps),
        "env": env_rates(TASK, args.envs, args.steps),
        "train": train_rates(TASK, args.envs, args.budget, args.train_steps, args.set),
    }
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    ph, env, tr = r["physics"], r["env"], r["train"]
    print(f"\nembody bench gpu: {r['task']}, {r['envs']} envs, MJX on {ph['mjx']['device']}\n")
    print("| measure | env-steps/s | notes |\n|---|---|---|")
    print(f"| physics, MuJoCo (CPU) | {ph['mujoco']['env_steps_per_s']:,.0f} | the peer |")
    print(
        f"| physics, MJX | {ph['mjx']['env_steps_per_s']:,.0f} | {ph['mjx_vs_mujoco']:.2f}× MuJoCo; device "
        f"{ph['mjx']['device_ms']:.2f} ms + host copies {ph['mjx']['host_copy_ms']:.2f} ms per step; first step "
        f"(compilation) {ph['mjx']['first_step_s']:.0f} s |"
    )
    print_env_rows(r["task"], env)
    print(
        f"| PPO on MJX | {tr['env_steps_per_s']:,.0f} | {tr['env_steps']:,} env steps in {tr['train_s']:.0f} s; "
        f"return {tr['episode_return']:.2f} |"
    )


def print_env_rows(task: str, env: dict) -> None:
    """Table rows of ``env_rates``' result."""
    for sim in ("mujoco", "mjx"):
        e, ratio = env[sim], "" if sim == "mujoco" else f"{env['mjx_vs_mujoco']:.2f}× MuJoCo; "
        print(
            f"| {task} env, {sim} | {e['env_steps_per_s']:,.0f} | {ratio}simulator {e['sim_share']:.0%} of the time |"
        )
