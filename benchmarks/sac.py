"""``embody bench sac``: embody's SAC against Stable-Baselines3's SAC on the same task, in one run.

Both learn cartpole-swingup (``--task``) from ``--envs`` envs with the same networks (``--hidden``), batch size,
learning rates, discount, Polyak rate, automatic temperature (target entropy −action size), random steps before
learning, and update-to-data ratio (``--utd`` gradient steps per env step: SB3's ``train_freq=1`` vector step with
``gradient_steps = utd · envs``), for ``--steps`` env steps; SB3's envs each wrap one embody env (the same MDP).
Reported: env-steps/s and gradient steps/s of each, their ratio, the mean training return of the episodes that
ended in each fifth of the budget (equal env steps), and the speed at equal return — the target's measure: the
wall time each side took until the mean return over a trailing fifth of the budget first reached the lower of
the two sides' final-fifth returns, SB3's time over embody's.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from embody.commands import nonneg_int, positive_float, positive_int

TARGET = 1.5  # ours / SB3's speed at equal return


def settings(args) -> dict:
    return {
        "task": args.task,
        "envs": args.envs,
        "steps": args.steps,
        "hidden": args.hidden,
        "batch_size": 256,
        "lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "learning_starts": args.learning_starts,
        "utd": args.utd,
        "seed": args.seed,
    }


def embody_config(s: dict, **extra):
    """embody's SACConfig matched to the bench settings ``s`` (also ``embody bench her``'s)."""
    from embody.policies.sac import SACConfig

    keys = ("hidden", "batch_size", "lr", "gamma", "tau", "learning_starts", "utd")
    return SACConfig(**{k: s[k] for k in keys}, alpha_lr=s["lr"], **extra)


def sb3_kwargs(s: dict, seed: int) -> dict:
    """Stable-Baselines3 SAC's keyword arguments matched to ``s``: one vector step per train call, ``utd · envs``
    gradient steps, the automatic temperature."""
    return {
        "learning_rate": s["lr"],
        "learning_starts": s["learning_starts"],
        "batch_size": s["batch_size"],
        "tau": s["tau"],
        "gamma": s["gamma"],
        "train_freq": 1,
        "gradient_steps": max(1, round(s["utd"] * s["envs"])),
        "ent_coef": "auto",
        "seed": seed,
        "device": "cpu",
        "policy_kwargs": {"net_arch": s["hidden"]},
    }


def _returns_by_fifth(points: list[tuple[int, float, float]], steps: int) -> list[float]:
    """Mean return of the episodes that ended in each fifth of the budget ((env steps, return, time) rows)."""
    out = []
    for k in range(5):
        lo, hi = k * steps / 5, (k + 1) * steps / 5
        r = [ret for s, ret, _ in points if lo < s <= hi]
        out.append(float(np.mean(r)) if r else float("nan"))
    return out


def _time_to_return(points: list[tuple[int, float, float]], steps: int, level: float) -> float:
    """Seconds until the mean return of the episodes ending in the trailing fifth of the budget first reached
    ``level`` (from the first episode end a fifth in); inf if it never did."""
    for s, _, t in points:
        if s >= steps / 5 and np.mean([r for s2, r, _ in points if s - steps / 5 < s2 <= s]) >= level:
            return t
    return float("inf")


def equal_return(rows: dict, points: dict, steps: int) -> dict:
    """The speed at equal return: each side's time to the lower final-fifth return, SB3's over embody's."""
    level = min(rows[k]["returns_by_fifth"][-1] for k in rows)
    times = {k: _time_to_return(points[k], steps, level) for k in rows}
    return {"level": level, "time_s": times, "ratio": times["sb3"] / times["embody"]}


def run_ours(s: dict) -> dict:
    import torch

    from embody.policies.sac import SAC, SACPolicy
    from embody.runs import build_env
    from embody.train import resolve_config

    torch.manual_seed(s["seed"])
    cfg = resolve_config(s["task"], n_envs=s["envs"], seed=s["seed"])
    env = build_env(cfg)
    policy = SACPolicy(env.observation_size, env.action_size, s["hidden"], normalize_obs=False)  # as SB3: raw
    sac = SAC(env, policy, embody_config(s, buffer_size=s["steps"]), seed=s["seed"])
    points, returns, losses = [], [], []
    start = time.perf_counter()
    while sac.env_steps < s["steps"]:
        n = len(returns)
        sac.step(returns, losses)
        points += [(sac.env_steps, r, time.perf_counter() - start) for r in returns[n:]]
    elapsed = time.perf_counter() - start
    env.close()
    return {"time_s": elapsed, "env_steps": sac.env_steps, "updates": sac.updates, "points": points}


def run_sb3(s: dict) -> dict:
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from embody.benchmarks.core import _gym_env_class
    from embody.train import resolve_config

    torch.manual_seed(s["seed"])
    cfg = resolve_config(s["task"], n_envs=1, seed=s["seed"])
    EmbodyGymEnv = _gym_env_class()
    venv = DummyVecEnv([lambda i=i: Monitor(EmbodyGymEnv(cfg, seed=s["seed"] + i)) for i in range(s["envs"])])
    model = SAC("MlpPolicy", venv, **sb3_kwargs(s, s["seed"]), buffer_size=s["steps"])

    points: list[tuple[int, float, float]] = []

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    points.append((int(self.num_timesteps), float(info["episode"]["r"]), time.perf_counter() - start))
            return True

    start = time.perf_counter()
    model.learn(s["steps"], callback=Watch())
    elapsed = time.perf_counter() - start
    venv.close()
    return {
        "time_s": elapsed,
        "env_steps": int(model.num_timesteps),
        "updates": int(model._n_updates),
        "points": points,
    }


def main(argv: list[str]) -> int:
    """Train both, print the table; ``--out DIR`` writes results.json. Returns 0."""
    import torch

    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench sac", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", default="cartpole-swingup")
    p.add_argument("--envs", type=positive_int, default=16)
    p.add_argument("--steps", type=positive_int, default=40_000)
    p.add_argument("--utd", type=positive_float, default=0.5)
    p.add_argument("--learning-starts", type=nonneg_int, default=2_000)
    p.add_argument("--hidden", type=positive_int, nargs="+", default=[256, 256])
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads on both sides")
    p.add_argument("--out")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    s = settings(args)
    sides = {"embody": run_ours(s), "sb3": run_sb3(s)}
    rows = {}
    for name, r in sides.items():
        rows[name] = {
            "env_steps_per_s": r["env_steps"] / r["time_s"],
            "grad_steps_per_s": r["updates"] / r["time_s"],
            "updates": r["updates"],
            "time_s": r["time_s"],
            "returns_by_fifth": _returns_by_fifth(r["points"], s["steps"]),
        }
    ratio = rows["embody"]["env_steps_per_s"] / rows["sb3"]["env_steps_per_s"]
    eq = equal_return(rows, {name: r["points"] for name, r in sides.items()}, s["steps"])
    result = {"settings": s, "rows": rows, "speed_ratio": ratio, "equal_return": eq, "target": TARGET}
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    s = r["settings"]
    print(
        f"\nembody bench sac: {s['task']}, {s['envs']} envs, {s['steps']:,} env steps, utd {s['utd']:g}, "
        f"networks {s['hidden']}, batch {s['batch_size']}\n"
    )
    print(
        "| | env steps/s | gradient steps/s | gradient steps | return by fifth of the budget |\n|---|---|---|---|---|"
    )
    for name, row in r["rows"].items():
        fifths = ", ".join(f"{x:.0f}" for x in row["returns_by_fifth"])
        print(
            f"| {name} | {row['env_steps_per_s']:.0f} | {row['grad_steps_per_s']:.0f} | {row['updates']} | {fifths} |"
        )
    eq = r["equal_return"]
    verdict = "PASS" if eq["ratio"] >= r["target"] else "BELOW-TARGET"
    times = ", ".join(f"{k} {t:.0f} s" for k, t in eq["time_s"].items())
    print(f"\nspeed embody / SB3 at equal env steps: {r['speed_ratio']:.2f}×")
    print(
        f"speed at equal return (trailing-fifth mean return {eq['level']:.0f}: {times}): {eq['ratio']:.2f}× "
        f"(target {r['target']:g}×: {verdict})"
    )
