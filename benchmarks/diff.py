"""``embody bench diff``: what gradients and batched pixels cost, per differentiable task, in one run.

(a) Differentiable steps/s: ``differentiable_step`` forward and backward (sims/diff.py: the rollout, MuJoCo's
    finite-difference Jacobians chained over the decimation, the vector–Jacobian product) against the plain
    ``step`` of the same simulator, ``--envs`` envs, env-steps/s; the ratio is the price of a gradient.
(b) Frames/s: the adapter's tiled renderer (sims/mujoco/render.py, every env into one offscreen buffer) against
    ``mujoco.Renderer`` one frame at a time (set state, forward, update scene, render: what the adapter did
    before), the same envs, ``--size``² pixels, the task's camera.

Best of ``--repeats`` timings each.
"""

from __future__ import annotations

import argparse

import numpy as np

from embody.commands import positive_int

from . import best_seconds, save_results

TASKS = ("cartpole-swingup", "hopper", "arm-reach")


def _env(task: str, envs: int, size: int):
    from embody.sims.tasks import TASKS as REGISTRY
    from embody.sims.vec_env import make_env

    config = REGISTRY.get(task).config_class()
    config.sim.render_width = config.sim.render_height = size
    env = make_env(task, n_envs=envs, seed=0, config=config)
    env.reset()
    return env


def _timed(fn, calls: int, repeats: int) -> float:
    """Seconds per call after one untimed call (contexts, thread pools and caches are made on first use)."""
    fn()
    return best_seconds(fn, calls, repeats)


def step_rates(env, repeats: int, calls: int) -> dict:
    """env-steps/s of the plain step and of the differentiable step (forward + backward)."""
    import torch

    from embody.sims.diff import differentiable_step

    sim, n = env.sim, env.n_envs
    u = np.zeros((n, env.action_size))
    plain = _timed(lambda: sim.step(u), calls, repeats)
    x = torch.from_numpy(sim.diff_state())
    ut = torch.zeros(n, env.action_size, dtype=torch.float64, requires_grad=True)

    def diff_step():
        differentiable_step(sim, x, ut).sum().backward()

    grad = _timed(diff_step, calls, repeats)
    return {"plain_env_steps_per_s": n / plain, "diff_env_steps_per_s": n / grad, "cost_ratio": grad / plain}


def render_rates(env, repeats: int, calls: int) -> dict:
    """Frames/s of the tiled renderer and of mujoco.Renderer frame by frame, the task's camera."""
    import mujoco

    from embody.sims.mujoco.render import tracking_camera

    sim, camera = env.sim, env.task.config.camera
    tiled = _timed(lambda: env.render(), calls, repeats)
    c = sim.config
    renderer, data = mujoco.Renderer(sim.model, c.render_height, c.render_width), mujoco.MjData(sim.model)
    cam = camera if camera is not None else tracking_camera(sim.model, sim.robot)
    full = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = sim.get_state()

    def one_by_one():
        for row in states:
            mujoco.mj_setState(sim.model, data, row, full)
            mujoco.mj_forward(sim.model, data)
            renderer.update_scene(data, camera=cam)
            renderer.render()

    peer = _timed(one_by_one, calls, repeats)
    renderer.close()
    n = env.n_envs
    return {"tiled_frames_per_s": n / tiled, "renderer_frames_per_s": n / peer, "speedup": peer / tiled}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="embody bench diff", description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=positive_int, default=64)
    p.add_argument("--size", type=positive_int, default=84, help="frame width and height [px]")
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument("--calls", type=positive_int, default=10, help="timed calls per repeat")
    p.add_argument("--quick", action="store_true", help="8 envs, 2 calls, 1 repeat (CI)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    if args.quick:
        args.envs, args.calls, args.repeats = 8, 2, 1
    rows = {}
    for task in TASKS:
        env = _env(task, args.envs, args.size)
        rows[task] = {**step_rates(env, args.repeats, args.calls), **render_rates(env, args.repeats, args.calls)}
        env.close()
    result = {"envs": args.envs, "size": args.size, "rows": rows}
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    print(f"\nembody bench diff: {r['envs']} envs, {r['size']}×{r['size']} frames\n")
    print("| task | plain env-steps/s | differentiable (fwd+bwd) | cost | tiled frames/s | mujoco.Renderer | speedup |")
    print("|---|---|---|---|---|---|---|")
    for task, x in r["rows"].items():
        print(
            f"| {task} | {x['plain_env_steps_per_s']:,.0f} | {x['diff_env_steps_per_s']:,.0f} | "
            f"{x['cost_ratio']:.1f}× | {x['tiled_frames_per_s']:,.0f} | {x['renderer_frames_per_s']:,.0f} | "
            f"{x['speedup']:.2f}× |"
        )
