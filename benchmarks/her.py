"""``embody bench her``: SAC + HER, embody's against Stable-Baselines3's, on Gymnasium-Robotics goal tasks.

For each task (default FetchReach-v4; the issue's FetchPush-v4 and FetchPickAndPlace-v4 with ``--tasks``) and
seed, both train for ``--steps`` env steps from ``--envs`` envs with the same networks, batch, learning rate,
discount (0.95, the HER papers'), "future" relabelling at sampling time (k = 4: 4 of 5 rows), observation normalization
(embody's running statistics; SB3's VecNormalize) and update-to-data ratio; the success rate of ``--eval``
deterministic episodes is measured every ``--every`` env steps. Reported: success vs env steps per side (mean
over seeds), wall time and env-steps/s, in one run. Each (task, seed, side) is a job kept in ``--out``'s job
store as it finishes, so a long comparison runs as seed jobs (``--seed S``, ``--workers``) and resumes.
``--init torch`` starts embody's networks from ``nn.Linear``'s initialization, as SB3's are, instead of orthogonal.
``--sides embody sb3 swap reverse glued`` adds three more: ``swap``, SB3's collection, ``HerReplayBuffer`` and
``VecNormalize`` feeding embody's policy and update, and ``reverse``, embody's collection, ``HERBuffer`` and
normalizer feeding SB3's policy and update; together they tell whether a gap lies on the data or the update side.
``glued`` is their control: SB3's data side feeding a second SB3 SAC (over the flat observation) through the
swap's glue; learning as ``sb3`` does, it clears the glue.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from embody.commands import nonneg_int, positive_float, positive_int

from .sac import embody_config, sb3_kwargs

# swap: SB3's data, embody's update; reverse: the other way round; glued: SB3's data and update through swap's glue
SIDES = ("embody", "sb3", "swap", "reverse", "glued")


def settings(args) -> dict:
    """What every run shares (the store's fingerprint); a run adds its task."""
    return {
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
        "init": args.init,
        # each measurement on fresh episodes, both sides; until 2026-12-05 SB3's side measured the same 50 every time
        # (seeds 1000 + k), a set with 37 % of FetchPickAndPlace's goals in the air against the task's 50 %
        "eval_set": "stream",
    }


def run_ours(s: dict, seed: int, reverse: bool = False) -> dict:
    """embody's side; ``reverse``: its data side (collection, ``HERBuffer``, normalizer) feeding SB3's policy and
    update (``_sb3_update_on``)."""
    import torch

    from embody.policies.evaluate import evaluate
    from embody.policies.sac import SAC, SACPolicy
    from embody.sims.gymnasium_env import GymnasiumEnv

    torch.manual_seed(seed)
    env, probe = GymnasiumEnv(s["task"], s["envs"], seed), GymnasiumEnv(s["task"], 1, seed + 1000)
    cfg = embody_config(s, buffer_size=s["steps"], her="future", her_k=s["her_k"])
    policy = SACPolicy(env.observation_size, env.action_size, s["hidden"], init=s["init"])
    sac = (_sb3_update_on(SAC, s, seed) if reverse else SAC)(env, policy, cfg, seed=seed)
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


def run_sb3(s: dict, seed: int, side: str = "sb3") -> dict:
    """SB3's side; ``swap``: its data side (collection, ``HerReplayBuffer``, ``VecNormalize``) feeding embody's
    policy and update (``_embody_update_on``); ``glued``: feeding a second SB3 SAC through the same glue."""
    import gymnasium as gym
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from embody.sims.gymnasium_env import _load_registries

    _load_registries(s["task"])
    venv = VecNormalize(DummyVecEnv([lambda: gym.make(s["task"])] * s["envs"]), norm_reward=False, gamma=s["gamma"])
    probe = gym.make(s["task"])
    probe.reset(seed=seed + 1000)  # then one stream of fresh episodes, as embody's probe (``settings``: eval_set)
    learner = {"swap": "embody", "glued": "sb3"}.get(side)
    model = (_embody_update_on(SAC, s, learner) if learner else SAC)(
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
        for _ in range(s["eval"]):
            obs, _ = probe.reset()
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


class _Handed:
    """A replay buffer that hands back the batch the other side sampled."""

    batch = None

    def sample(self, *_, **__):
        return self.batch


def _flat_sb3(obs_size: int, action_size: int, s: dict, seed: int):
    """SB3's SAC (``MlpPolicy``) over a flat observation, trained by ``_sb3_step`` on batches handed to it."""
    import gymnasium as gym
    from stable_baselines3 import SAC
    from stable_baselines3.common.logger import configure

    class Spaces(gym.Env):  # SB3 builds its networks from an env's spaces; this one is never stepped
        def __init__(self):
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
            self.action_space = gym.spaces.Box(-1.0, 1.0, (action_size,), np.float32)

    model = SAC("MlpPolicy", Spaces(), **sb3_kwargs(s, seed), buffer_size=1)
    model.set_logger(configure(None, []))
    model.replay_buffer = _Handed()
    return model


def _sb3_step(model, obs, actions, next_obs, done, reward) -> None:
    """One of SB3's gradient steps (``SAC.train``) on a given batch; ``done`` and ``reward`` (B,)."""
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    model.replay_buffer.batch = ReplayBufferSamples(obs, actions, next_obs, done[:, None], reward[:, None], None)
    model.train(gradient_steps=1, batch_size=len(reward))


class _SB3Learner:
    """``_flat_sb3`` driven as embody's SAC is driven by the swap (``policy.act``, ``buffer.batch``, ``update()``):
    the ``glued`` side's learner."""

    def __init__(self, obs_size: int, action_size: int, s: dict, seed: int):
        self.sb3, self.buffer, self.updates, self.policy = _flat_sb3(obs_size, action_size, s, seed), _Handed(), 0, self

    def act(self, obs, deterministic: bool = True):
        import torch

        with torch.no_grad():
            return self.sb3.actor(obs, deterministic=deterministic)

    def update(self) -> dict[str, float]:
        b = self.buffer.batch
        _sb3_step(self.sb3, b["obs"], b["actions"], b["next_obs"], b["terminal"], b["rewards"])
        self.updates += 1
        return {}


def _embody_update_on(sb3_sac: type, s: dict, learner: str = "embody") -> type:
    """SB3's SAC whose actions and gradient steps are embody's (``SACPolicy`` without its normalizer, ``SAC.update``
    on each batch SB3's ``HerReplayBuffer`` samples, normalized by ``VecNormalize``): the data side SB3's, the update
    side embody's, to tell on which side the two differ. ``learner="sb3"``: a second SB3 SAC over the flat
    observation in embody's place (the ``glued`` side), so that the glue itself is measured."""
    import torch

    from embody.policies.sac import SAC, SACPolicy

    keys = ("observation", "achieved_goal", "desired_goal")

    def flat(obs: dict) -> torch.Tensor:
        return torch.cat([torch.as_tensor(obs[k], dtype=torch.float32) for k in keys], -1)

    class Swapped(sb3_sac):
        def _setup_model(self) -> None:
            super()._setup_model()
            size = sum(self.observation_space[k].shape[0] for k in keys)
            actions, seed = self.action_space.shape[0], self.seed or 0
            if learner == "sb3":
                self.ours = _SB3Learner(size, actions, s, seed)
                return
            policy = SACPolicy(size, actions, s["hidden"], normalize_obs=False, init=s["init"])
            self.ours = SAC(None, policy, embody_config(s, buffer_size=1), seed=seed)
            self.ours.buffer = _Handed()

        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            return self.ours.policy.act(flat(observation), deterministic=deterministic).numpy(), None

        def train(self, gradient_steps: int, batch_size: int = 256) -> None:
            for _ in range(gradient_steps):
                d = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
                self.ours.buffer.batch = {
                    "obs": flat(d.observations),
                    "actions": d.actions.float(),
                    "rewards": d.rewards.reshape(-1).float(),
                    "next_obs": flat(d.next_observations),
                    "terminal": d.dones.reshape(-1).float(),
                }
                self.ours.update()

    return Swapped


def _sb3_update_on(embody_sac: type, s: dict, seed: int) -> type:
    """embody's SAC whose actions and gradient steps are SB3's (its actor for ``policy.act``, ``SAC.train`` on each
    batch embody's ``HERBuffer`` samples, normalized by embody's running statistics): ``_embody_update_on``
    reversed."""
    import torch

    class Reversed(embody_sac):
        def __init__(self, env, policy, config, seed: int = 0):
            super().__init__(env, policy, config, seed=seed)
            self.sb3 = _flat_sb3(policy.obs_size, policy.action_size, s, seed)
            actor, norm = self.sb3.actor, policy.obs_norm

            def act(obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
                with torch.no_grad():
                    return actor(norm(obs), deterministic=deterministic)

            policy.act = act  # collection (``SAC._act``) and evaluation act through SB3's actor

        def update(self) -> dict[str, float]:
            b, norm = self.buffer.sample(self.config.batch_size, self.rng, self.device), self.policy.obs_norm
            _sb3_step(self.sb3, norm(b["obs"]), b["actions"], norm(b["next_obs"]), b["terminal"], b["rewards"])
            self.updates += 1
            return {}

    return Reversed


def run_job(s: dict, params: dict) -> dict:
    """One side's training on one task and seed (a job of the store; module-level for spawned workers)."""
    import torch

    torch.set_num_threads(1)
    task, seed, side = {**s, "task": params["task"]}, params["seed"], params["side"]
    ours = side in ("embody", "reverse")
    result = run_ours(task, seed, reverse=side == "reverse") if ours else run_sb3(task, seed, side)
    return {**params, **result}


def main(argv: list[str]) -> int:
    """Train both sides for every task and seed, print success vs env steps. ``--out DIR`` keeps each finished
    run in ``DIR/jobs`` (a rerun resumes; ``--seed`` runs seed jobs into one folder) and writes results.json and
    her.png over every run the folder holds."""
    import tempfile
    from functools import partial

    from embody.benchmarks import save_results
    from embody.jobs import Job, JobStore, run_jobs
    from embody.policies.networks import INITS

    p = argparse.ArgumentParser(
        prog="embody bench her", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tasks", nargs="+", default=["FetchReach-v4"])
    p.add_argument("--seeds", type=positive_int, default=3, help="seeds 0 … N-1")
    p.add_argument("--seed", type=nonneg_int, action="append", help="run only these seeds (repeatable): seed jobs")
    p.add_argument("--steps", type=positive_int, default=10_000)
    p.add_argument("--envs", type=positive_int, default=4)
    p.add_argument("--utd", type=positive_float, default=0.5)
    p.add_argument("--every", type=positive_int, default=2_000, help="env steps between success measurements")
    p.add_argument("--eval", type=positive_int, default=20, help="episodes per success measurement")
    p.add_argument("--hidden", type=positive_int, nargs="+", default=[256, 256])
    p.add_argument("--workers", type=positive_int, default=1, help="runs at once (one torch thread each)")
    p.add_argument(
        "--init",
        choices=INITS,
        default="orthogonal",
        help="embody's initial weights (SB3's are torch's); a folder holding runs of the other: use another --out",
    )
    p.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=["embody", "sb3"],
        help="swap: SB3's collection, HER buffer and normalization feeding embody's policy and update; reverse: "
        "the other way round; glued: SB3's feeding SB3's through swap's glue",
    )
    p.add_argument("--out", help="the results folder (resumed when it holds runs)")
    args = p.parse_args(argv)
    s = settings(args)
    seeds = args.seed if args.seed is not None else list(range(args.seeds))
    jobs = [
        Job(f"{task}-seed{seed}-{side}", {"task": task, "seed": seed, "side": side})
        for task in args.tasks
        for seed in seeds
        for side in args.sides
    ]
    with tempfile.TemporaryDirectory(prefix="bench-her-") as scratch:
        store = JobStore(args.out or scratch, s)
        run_jobs(partial(run_job, s), jobs, store, workers=args.workers, label="bench her", metrics=_last_success)
        if args.out:  # read again: seed jobs of other processes may have finished in the folder meanwhile
            store = JobStore(args.out, s)
    # every run the folder holds for these tasks, earlier seed jobs' included
    results = sorted(
        (r for r in store.results.values() if r["task"] in args.tasks),
        key=lambda r: (args.tasks.index(r["task"]), r["seed"], SIDES.index(r["side"])),
    )
    _print(results)
    save_results(args.out, {"settings": s, "runs": results})
    if args.out:
        _plot(results, Path(args.out, "her.png"))
    return 0


def _last_success(result: dict) -> dict:
    return {"success": result["curve"][-1][1]} if result["curve"] else {}


def _plot(results: list[dict], path: Path) -> None:
    """Success rate against env steps per task: each side's mean over seeds (thick) and its seeds (thin)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in results))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.5), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for side, color in zip(SIDES, ("C0", "C1", "C2", "C3", "C4")):
            runs = [r for r in results if r["task"] == task and r["side"] == side and r["curve"]]
            for r in runs:
                ax.plot(*zip(*r["curve"]), color=color, alpha=0.3, lw=0.8)
            if runs:
                steps, means = _mean_curve(runs)
                ax.plot(steps, means, color=color, lw=2, label=f"{side} ({len(runs)} seeds)")
        ax.set(title=task, xlabel="env steps", ylabel="success rate", ylim=(-0.02, 1.02))
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _mean_curve(runs: list[dict]) -> tuple[list[int], np.ndarray]:
    """The measurement steps all ``runs`` share and the mean success there."""
    n = min(len(r["curve"]) for r in runs)
    return [c[0] for c in runs[0]["curve"][:n]], np.mean([[c[1] for c in r["curve"][:n]] for r in runs], axis=0)


def _print(results: list[dict]) -> None:
    print(
        "\n| task | side | seeds | success at each measurement (mean over seeds) | env steps/s |\n|---|---|---|---|---|"
    )
    for task in dict.fromkeys(r["task"] for r in results):
        for side in SIDES:
            runs = [r for r in results if r["task"] == task and r["side"] == side]
            if not runs:
                continue
            steps, means = _mean_curve(runs) if all(r["curve"] for r in runs) else ([], [])
            cells = ", ".join(f"{st // 1000}k: {m:.2f}" for st, m in zip(steps, means))
            rate = np.mean([r["env_steps_per_s"] for r in runs])
            print(f"| {task} | {side} | {len(runs)} | {cells} | {rate:.0f} |")
