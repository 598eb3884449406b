"""``embody bench her``: SAC + HER, embody's against Stable-Baselines3's, on Gymnasium-Robotics goal tasks.

For each task (default FetchReach-v4; the issue's FetchPush-v4 and FetchPickAndPlace-v4 with ``--tasks``) and
seed, both train for ``--steps`` env steps from ``--envs`` envs with the same networks, batch, learning rate,
discount (0.95, the HER papers'), "future" relabelling with 4 goals per transition, observation normalization
(embody's running statistics; SB3's VecNormalize) and update-to-data ratio; the success rate of ``--eval``
deterministic episodes is measured every ``--every`` env steps. Reported: success vs env steps per side (mean
over seeds), wall time and env-steps/s, in one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .sac import embody_config, sb3_kwargs


def settings(args, task: str) -> dict:
    return {
        "task": task,
        "envs": args.envs,
        "steps": args.steps,
        "every": args.every,
        "eval": args.eval,
        "hidden": args.hidden,
        "batch_size": 256,
        "lr": 1e-3,
        "gamma": 0.95,
        "tau": 0.005,
        "learning_starts": 1000,
        "utd": args.utd,
        "her_k": 4,
    }


def run_ours(s: dict, seed: int) -> dict:
    import torch

    from embody.policies.evaluate import evaluate
    from embody.policies.sac import SAC, SACPolicy
    from embody.sims.gymnasium_env import GymnasiumEnv

    torch.manual_seed(seed)
    env, probe = GymnasiumEnv(s["task"], s["envs"], seed), GymnasiumEnv(s["task"], 1, seed + 1000)
    cfg = embody_config(s, buffer_size=s["steps"] * (1 + s["her_k"]), her="future", her_k=s["her_k"])
    sac = SAC(env, SACPolicy(env.observation_size, env.action_size, s["hidden"]), cfg, seed=seed)
    curve, returns, losses, start = [], [], [], time.perf_counter()
    while sac.env_steps < s["steps"]:
        before = sac.env_steps
        sac.step(returns, losses)
        if sac.env_steps // s["every"] > before // s["every"]:
            result = evaluate(probe, sac.policy, s["eval"])
            curve.append((sac.env_steps, float(np.mean(result.success))))
    elapsed = time.perf_counter() - start
    env.close(), probe.close()
    return {"curve": curve, "time_s": elapsed, "env_steps_per_s": sac.env_steps / elapsed}


def run_sb3(s: dict, seed: int) -> dict:
    import gymnasium as gym
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from embody.sims.gymnasium_env import _load_registries

    _load_registries(s["task"])
    venv = VecNormalize(DummyVecEnv([lambda: gym.make(s["task"])] * s["envs"]), norm_reward=False, gamma=s["gamma"])
    probe = gym.make(s["task"])
    model = SAC(
        "MultiInputPolicy",
        venv,
        **sb3_kwargs(s, seed),
        buffer_size=s["steps"],
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs={"n_sampled_goal": s["her_k"], "goal_selection_strategy": "future"},
    )

    curve: list[tuple[int, float]] = []

    def success() -> float:
        wins = []
        for k in range(s["eval"]):
            obs, _ = probe.reset(seed=seed + 1000 + k)
            done, info = False, {}
            while not done:
                action, _ = model.predict(
                    venv.normalize_obs({k2: v[None] for k2, v in obs.items()}), deterministic=True
                )
                obs, _, terminated, truncated, info = probe.step(action[0])
                done = terminated or truncated
            wins.append(float(info.get("is_success", 0.0)))
        return float(np.mean(wins))

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps // s["every"] > (self.num_timesteps - s["envs"]) // s["every"]:
                curve.append((int(self.num_timesteps), success()))
            return True

    start = time.perf_counter()
    model.learn(s["steps"], callback=Watch())
    elapsed = time.perf_counter() - start
    venv.close(), probe.close()
    return {"curve": curve, "time_s": elapsed, "env_steps_per_s": s["steps"] / elapsed}


def main(argv: list[str]) -> int:
    """Train both sides for every task and seed, print success vs env steps; ``--out DIR``: results.json."""
    import torch

    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench her", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tasks", nargs="+", default=["FetchReach-v4"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--utd", type=float, default=0.5)
    p.add_argument("--every", type=int, default=2_000, help="env steps between success measurements")
    p.add_argument("--eval", type=int, default=20, help="episodes per success measurement")
    p.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    p.add_argument("--out")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for task in args.tasks:
        s = settings(args, task)
        for seed in range(args.seeds):
            for side, fn in (("embody", run_ours), ("sb3", run_sb3)):
                results.append({"task": task, "seed": seed, "side": side, **fn(s, seed)})
                r = results[-1]
                print(
                    f"{task} seed {seed} {side}: success {[round(c[1], 2) for c in r['curve']]} "
                    f"({r['env_steps_per_s']:.0f} env steps/s)",
                    flush=True,
                )
    _print(results)
    save_results(args.out, {"settings": vars(args), "runs": results})
    return 0


def _print(results: list[dict]) -> None:
    print("\n| task | side | success at each measurement (mean over seeds) | env steps/s |\n|---|---|---|---|")
    for task in dict.fromkeys(r["task"] for r in results):
        for side in ("embody", "sb3"):
            runs = [r for r in results if r["task"] == task and r["side"] == side]
            steps = [c[0] for c in runs[0]["curve"]]
            means = np.mean([[c[1] for c in r["curve"]] for r in runs], axis=0) if steps else []
            cells = ", ".join(f"{st // 1000}k: {m:.2f}" for st, m in zip(steps, means))
            print(f"| {task} | {side} | {cells} | {np.mean([r['env_steps_per_s'] for r in runs]):.0f} |")
