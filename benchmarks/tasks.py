"""``embody bench tasks``: env-steps/s of every task on every installed simulator.

Each task runs with its default config (domain randomization included) at ``--envs`` envs
under uniform random actions, resets included. Its peer is the same simulator stepping the
same robot, batch and decimation with the task's first commands and no task code around it
(physics only), measured in the same run: "task / physics" is the share of the simulator's
speed that survives observations, rewards, resets and randomization (1.0: no overhead).

Rendering (``--frames N``, 0 to skip): frames/s of one env's image at the simulator's camera size (320×240 by
default, no shadows: what datasets and pixel policies get) and at the evaluation-video size (640×480), best of 3.
"""

from __future__ import annotations

import argparse
import functools
import os

import numpy as np

from embody.commands import nonneg_int, positive_int


def _rate(step, steps: int, n_envs: int) -> float:
    from embody.benchmarks import best_seconds

    return n_envs / best_seconds(step, steps)


def measure(task: str, sim: str, n_envs: int, steps: int, frames: int = 0) -> dict:
    """``task`` on ``sim``: ``env_steps_per_s``, ``physics_only_per_s`` and their ``ratio`` (with ``frames``, the
    render rates too); or, when the simulator cannot run the task, ``unsupported`` with the reason."""
    from embody.sims.base import ModelError, UnsupportedTask
    from embody.sims.vec_env import make_env

    try:
        env = make_env(task, sim, n_envs=n_envs, seed=0)
    except (UnsupportedTask, ModelError) as e:  # a capability, or a model the engine cannot load
        return {"task": task, "sim": sim, "envs": n_envs, "unsupported": str(e)}
    rng = np.random.default_rng(0)
    env.reset()
    actions = rng.uniform(-1, 1, (steps, n_envs, env.action_size))
    i = iter(range(10**9))
    env_rate = _rate(lambda: env.step(actions[next(i) % steps]), steps, n_envs)
    command = env.task.action_to_command(actions[0])
    physics_rate = _rate(lambda: env.sim.step(command), steps, n_envs)
    env.close()
    return {
        "task": task,
        "sim": sim,
        "envs": n_envs,
        "env_steps_per_s": env_rate,
        "physics_only_per_s": physics_rate,
        "ratio": env_rate / physics_rate,
        **(render_rates(task, sim, frames) if frames else {}),
    }


def render_rates(task: str, sim: str, frames: int) -> dict:
    """Frames/s of one env's image at the default camera size and at the evaluation-video size; the reason where
    the simulator cannot render."""
    from embody.sims.tasks import TASKS
    from embody.sims.vec_env import make_env
    from embody.video import VIDEO_SIZE

    out = {}
    for name, size in (("camera", None), ("video", VIDEO_SIZE)):
        config = TASKS.get(task).config_class()
        if size is not None:
            config.sim.render_width, config.sim.render_height = size
        env = make_env(task, sim, n_envs=1, seed=0, config=config)
        env.reset()
        try:
            env.render(np.array([0]))  # the renderer is made on the first call
            out[f"{name}_frames_per_s"] = _rate(functools.partial(env.render, np.array([0])), frames, 1)
            out[f"{name}_size"] = f"{config.sim.render_width}x{config.sim.render_height}"
        except Exception as e:  # noqa: BLE001 (a simulator without the render capability, a missing GL)
            out["render_unsupported"] = f"{type(e).__name__}: {e}"
            break
        finally:
            env.close()
    return out


def main(argv: list[str]) -> int:
    """``embody bench tasks``: every task (or ``--task``) on every installed simulator (or ``--sim``), printed
    as a Markdown table; ``--out DIR`` writes ``results.json``. Returns 0."""
    from embody.benchmarks import save_results
    from embody.sims import installed_simulators
    from embody.sims.tasks import TASKS

    p = argparse.ArgumentParser(
        prog="embody bench tasks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", nargs="*", default=None, help="tasks (default: all registered)")
    p.add_argument("--sim", nargs="*", default=None, help="simulators (default: all installed)")
    p.add_argument("--envs", type=positive_int, default=16)
    p.add_argument("--steps", type=positive_int, default=50, help="control steps per repetition (best of 3)")
    p.add_argument(
        "--frames", type=nonneg_int, default=10, help="rendered frames per repetition (0: no render columns)"
    )
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    tasks = args.task or sorted(TASKS.names())
    sims = args.sim or installed_simulators()
    rows = []
    for task in tasks:
        for sim in sims:
            rows.append(measure(task, sim, args.envs, args.steps, args.frames))
            r = rows[-1]
            print(
                f"  {task} on {sim}: "
                + (f"{r['env_steps_per_s']:,.0f} env-steps/s" if "ratio" in r else "unsupported"),
                flush=True,
            )
    print(f"\nembody bench tasks: {args.envs} envs, random actions, {os.cpu_count()} cores")
    print(
        "| task | sim | env-steps/s | physics only | task / physics | camera frames/s | 640×480 frames/s |\n"
        "|---|---|---|---|---|---|---|"
    )
    for r in rows:
        if "unsupported" in r:
            print(f"| {r['task']} | {r['sim']} | unsupported: {r['unsupported']} | | | | |")
            continue
        frames = "| | |"
        if "camera_frames_per_s" in r:
            frames = f"| {r['camera_frames_per_s']:,.0f} ({r['camera_size']}) | {r.get('video_frames_per_s', 0):,.0f} |"
        elif "render_unsupported" in r:
            frames = f"| {r['render_unsupported'][:60]} | |"
        print(
            f"| {r['task']} | {r['sim']} | {r['env_steps_per_s']:,.0f} | {r['physics_only_per_s']:,.0f} | "
            f"{r['ratio']:.2f} {frames}"
        )
    save_results(args.out, rows)
    return 0
