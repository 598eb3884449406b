"""``embody bench sims``: each simulator adapter against its own raw engine, in one run.

For every installed adapter, on the same task and batch size:
  * env-steps/s of cartpole-swingup through the VecEnv (random actions, autoreset), and
    control-steps/s of the h1_2 robot through the Simulator protocol (PD targets at the
    default pose, ``step`` + ``state``, falling freely from high up so that the raw loops,
    which apply no PD, meet no contacts ours would not);
  * the raw engine's physics steps/s on the same loaded model and batch (MuJoCo: mj_step over
    the envs' MjData; PyBullet: stepSimulation on each env's client; Genesis: scene.step on the
    batched scene; MJX: its jitted vmap(mjx.step) without the host copies), beside ours counted in physics steps (decimation included): their ratio is
    our overhead (1.0 = none);
  * Genesis batched vs. single env on cartpole-swingup.
Our MuJoCo side runs on one thread here, like the raw loops, so the ratio is per-core overhead
(`embody bench core` measures threading).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from embody.commands import positive_int
from embody.robots import get_robot
from embody.sims import InitState, SimConfig, installed_simulators, make_sim
from embody.sims.vec_env import make_env


def _timed(fn, steps: int) -> float:
    """Seconds per call of ``fn`` over ``steps`` calls (after one warm-up call)."""
    fn()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - start) / steps


def raw_physics_step(sim):
    """A function advancing every env of ``sim`` by one physics step with the bare engine."""
    if sim.name == "mujoco":
        import mujoco

        datas = [mujoco.MjData(sim.model) for _ in range(sim.n_envs)]
        for d in datas:
            mujoco.mj_setState(sim.model, d, sim.get_state()[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        return lambda: [mujoco.mj_step(sim.model, d) for d in datas]
    if sim.name == "pybullet":
        p = sim._p
        return lambda: [p.stepSimulation(physicsClientId=c) for c in sim._clients]
    if sim.name == "genesis":
        return lambda: sim.scene.step(update_visualizer=False)
    if sim.name == "mjx":  # its own vmap(mjx.step), one physics step, nothing copied to the host (a separate
        import jax  # bare jit of the same program would only compile it again)

        sim._sync()
        kernel, ctrl = sim._k["control_step"], sim._put(np.zeros((sim.n_envs, sim.model.nu)))
        return lambda: jax.block_until_ready(kernel(sim._mx, sim._p, sim._d, ctrl, 1))
    raise ValueError(f"no raw stepping known for {sim.name!r}")


def env_rate(sim_name: str, n_envs: int, steps: int) -> tuple[float, object, Callable[[], None]]:
    """env-steps/s, the env, and a function that puts it back in its initial state."""
    env = make_env("cartpole-swingup", sim_name, n_envs, seed=0, config=_cartpole_config())
    env.reset()
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (steps + 1, n_envs, env.action_size))
    it = iter(actions)
    per_step = _timed(lambda: env.step(next(it)), steps)
    return n_envs / per_step, env, env.reset


def _cartpole_config():
    from embody.sims.tasks import TASKS

    cfg = TASKS.get("cartpole-swingup").config_class()
    cfg.sim.n_threads = 1
    return cfg


def robot_rate(sim_name: str, n_envs: int, steps: int) -> tuple[float, object, Callable[[], None]]:
    """control-steps/s of the H1-2, the simulator, and a function that restores its start state."""
    spec = get_robot("h1_2")
    sim = make_sim(sim_name, spec, SimConfig(n_envs=n_envs, decimation=10, physics_dt=0.002, n_threads=1))
    # high in the air: the raw loops apply no PD, so on the ground their robots would fall and
    # pile up contacts ours does not have; airborne (4 s of fall from 100 m), both do the same work
    base = np.tile([0.0, 0.0, 100.0], (n_envs, 1))
    start = InitState(np.tile(spec.default_pose, (n_envs, 1)), np.zeros((n_envs, spec.n_joints)), base_pos=base)
    restart = lambda: sim.reset(np.arange(n_envs), start)  # noqa: E731
    restart()
    targets = np.tile(spec.default_pose, (n_envs, 1))
    per_step = _timed(lambda: (sim.step(targets), sim.state()), steps)
    return n_envs / per_step, sim, restart


def measure(sim_name: str, n_envs: int, steps: int) -> list[dict]:
    """Rows for ``sim_name``: the cartpole-swingup env and the airborne H1-2, each with steps/s, physics
    steps/s (ours and the raw engine's) and ``overhead_ratio`` = ours / raw."""
    rows = []
    for what, fn in (("cartpole-swingup env", env_rate), ("h1_2 PD, airborne", robot_rate)):
        rate, obj, restart = fn(sim_name, n_envs, steps)
        sim = obj.sim if hasattr(obj, "sim") else obj
        restart()  # the raw engine starts where ours started
        raw = n_envs / _timed(raw_physics_step(sim), steps * sim.config.decimation)
        ours = rate * sim.config.decimation
        rows.append(
            {
                "sim": sim_name,
                "workload": what,
                "n_envs": n_envs,
                "steps_per_s": rate,
                "physics_steps_per_s": ours,
                "raw_physics_steps_per_s": raw,
                "overhead_ratio": ours / raw,
            }
        )
        obj.close()
    return rows


def main(argv: list[str]) -> int:
    """``embody bench sims``: measure every installed (or ``--sim``) adapter, print the Markdown table;
    ``--out DIR`` writes ``results.json`` and ``results.md``. Returns 0."""
    p = argparse.ArgumentParser(prog="embody bench sims", description=__doc__)
    p.add_argument("--envs", type=positive_int, default=16, help="batch size for every adapter")
    p.add_argument("--steps", type=positive_int, default=200, help="control steps measured per workload")
    p.add_argument("--genesis-envs", type=positive_int, default=64, help="batch for Genesis batched vs. single")
    p.add_argument("--sim", action="append", help="an adapter to include (default: every installed one)")
    p.add_argument("--quick", action="store_true", help="a few steps: checks the plumbing, not a measurement")
    p.add_argument("--out", help="directory for results.json and results.md")
    args = p.parse_args(argv)
    steps = 5 if args.quick else args.steps
    sims = args.sim or installed_simulators()
    rows = [r for s in sims for r in measure(s, 2 if args.quick else args.envs, steps)]
    batched = []
    if "genesis" in sims:
        for n in (1, 4 if args.quick else args.genesis_envs):
            rate, env, _ = env_rate("genesis", n, steps)
            env.close()
            batched.append({"n_envs": n, "steps_per_s": rate})
    report = _table(rows, batched)
    print(report)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        Path(args.out, "results.json").write_text(json.dumps({"rows": rows, "genesis_batched": batched}, indent=2))
        Path(args.out, "results.md").write_text(report + "\n")
    return 0


def _table(rows: list[dict], batched: list[dict]) -> str:
    lines = [
        "| sim | workload | envs | env-steps/s | physics steps/s (ours) | raw engine | ours / raw |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sim']} | {r['workload']} | {r['n_envs']} | {r['steps_per_s']:,.0f} | "
            f"{r['physics_steps_per_s']:,.0f} | {r['raw_physics_steps_per_s']:,.0f} | {r['overhead_ratio']:.2f} |"
        )
    if batched:
        lines += ["", "| Genesis cartpole-swingup | env-steps/s | vs. single |", "|---|---|---|"]
        for b in batched:
            lines.append(
                f"| {b['n_envs']} envs | {b['steps_per_s']:,.0f} | {b['steps_per_s'] / batched[0]['steps_per_s']:.1f}x |"
            )
    return "\n".join(lines)
