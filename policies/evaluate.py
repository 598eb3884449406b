"""Evaluation rollouts: batched episodes with a deterministic policy, optional video."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class EvalResult:
    """Per-episode outcomes from ``evaluate``, in the order episodes ended, exactly ``episodes`` of
    them: return (reward units), length (steps), whether it terminated, success where the task
    reports it, and the episode mean of each of the task's step metrics (the episode maximum of its events: 1 if
    the event happened)."""

    returns: list[float]
    lengths: list[int]
    terminated: list[bool] = field(default_factory=list)  # ended in a terminal state (fall, ...)
    success: list[bool] = field(default_factory=list)  # empty when the task has no notion of success
    frames: list[np.ndarray] = field(default_factory=list)  # env 0's first episode, if rendered
    # per rendered frame: the step's reward and weighted terms that led to it, and env 0's command if the task has one
    frame_info: list[dict] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)  # name -> per-episode mean (events: maximum)
    # with ``segment`` L: the episodes cut into whole L-step segments, obs (k, L, o), actions (k, L, a), rewards (k, L)
    segments: dict[str, np.ndarray] = field(default_factory=dict)

    def summary(self, max_return: float | None = None) -> dict:
        """Aggregates as a flat dict: ``episodes``, ``return_mean`` / ``_std`` / ``_min`` / ``_max``,
        ``length_mean``, ``terminated_fraction``; ``success_rate`` when the task reports success; each
        step metric's mean over episodes under its own name; ``max_return`` and ``return_fraction_of_max``
        when ``max_return`` is given. Needs at least one episode (ValueError otherwise)."""
        r = np.asarray(self.returns)
        out = {
            "episodes": len(r),
            "return_mean": float(r.mean()),
            "return_std": float(r.std()),
            "return_min": float(r.min()),
            "return_max": float(r.max()),
            "length_mean": float(np.mean(self.lengths)),
            "terminated_fraction": float(np.mean(self.terminated)) if self.terminated else 0.0,
        }
        if self.success:
            out["success_rate"] = float(np.mean(self.success))
        out.update({name: float(np.mean(values)) for name, values in self.metrics.items()})
        if max_return:
            out["max_return"] = max_return
            out["return_fraction_of_max"] = float(r.mean() / max_return)
        return out


@torch.no_grad()
def evaluate(
    env,
    policy,
    episodes: int,
    deterministic: bool = True,
    render: bool = False,
    device: str = "cpu",
    privileged: bool = False,
    segment: int = 0,
) -> EvalResult:
    """Run ``episodes`` episodes over ``env``'s batch; env 0's first episode is rendered if asked.
    ``privileged``: the policy sees cat(obs, privileged obs) (n, o + p), as a teacher or scripted
    expert does. ``segment`` > 0: also keep the episodes' steps, cut into segments of that length."""
    obs, priv = env.reset()
    policy.reset()
    result = EvalResult([], [], [])
    steps = _Steps(env.n_envs) if segment else None
    sums: dict[str, np.ndarray] = {}  # per env, since its reset (events: the maximum)
    events = getattr(getattr(env, "task", None), "episode_events", frozenset())
    recording = render
    if render:
        result.frames.append(env.render(np.array([0]))[0])
        result.frame_info.append(_frame_info(env, None, {}))
    while len(result.returns) < episodes:
        x = np.concatenate([obs, priv], axis=-1) if privileged else obs
        action = policy.act(torch.as_tensor(x, dtype=torch.float32, device=device), deterministic=deterministic)
        seen, action = obs, action.cpu().numpy()
        obs, reward, terminated, truncated, info = env.step(action)
        priv = info.privileged_obs
        done = terminated | truncated
        if steps is not None:
            steps.add(seen, action, reward, done)
        for name, value in info.metrics.items():
            sums[name] = np.maximum(sums.get(name, 0.0), value) if name in events else sums.get(name, 0.0) + value
        if recording:
            if done[0]:
                recording = False
            else:
                result.frames.append(env.render(np.array([0]))[0])
                result.frame_info.append(_frame_info(env, float(reward[0]), info.reward_terms))
        if done.any():
            policy.reset(torch.as_tensor(np.flatnonzero(done)))
            result.returns.extend(info.episode_return.tolist())
            result.lengths.extend(info.episode_length.tolist())
            result.terminated.extend(terminated[done].tolist())
            if info.episode_success is not None:
                result.success.extend(info.episode_success.tolist())
            for name, total in sums.items():
                value = total[done] if name in events else total[done] / info.episode_length
                result.metrics.setdefault(name, []).extend(value.tolist())
                total[done] = 0.0
    result.returns, result.lengths = result.returns[:episodes], result.lengths[:episodes]
    result.terminated, result.success = result.terminated[:episodes], result.success[:episodes]
    result.metrics = {name: values[:episodes] for name, values in result.metrics.items()}
    if steps is not None:
        result.segments = steps.segments(segment, episodes)
    return result


class _Steps:
    """Every step's obs, action and reward over the batch, and each finished episode's (env, first, end) steps."""

    def __init__(self, n_envs: int):
        self.obs, self.actions, self.rewards, self.spans = [], [], [], []
        self.start = np.zeros(n_envs, dtype=int)

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, done: np.ndarray) -> None:
        """One step: what each env saw (n, o), did (n, a) and got (n,), and which episodes ended (n,)."""
        self.obs.append(np.array(obs))  # a copy: an env may reuse its observation buffer
        self.actions.append(actions)
        self.rewards.append(rewards)
        t = len(self.rewards)
        for i in np.flatnonzero(done):
            self.spans.append((i, self.start[i], t))
            self.start[i] = t

    def segments(self, length: int, episodes: int) -> dict[str, np.ndarray]:
        """The first ``episodes`` finished episodes cut into whole ``length``-step segments (a shorter rest dropped)."""
        arrays = {"obs": np.stack(self.obs), "actions": np.stack(self.actions), "rewards": np.stack(self.rewards)}
        cuts = [(i, t) for i, first, end in self.spans[:episodes] for t in range(first, end - length + 1, length)]
        env, first = np.array(cuts, dtype=int).reshape(-1, 2).T
        rows = first[:, None] + np.arange(length)  # (k, L) step indices
        return {k: v[rows, env[:, None]] for k, v in arrays.items()}


def _frame_info(env, reward: float | None, terms: dict[str, float]) -> dict:
    """What a video overlay shows: the step's reward and weighted terms (batch means: env 0's in a one-env video)
    and env 0's command (a task's ``commands``, e.g. h1_2-velocity's vx, vy, yaw rate)."""
    commands = getattr(env.task, "commands", None)
    command = commands[0].tolist() if isinstance(commands, np.ndarray) and commands.ndim == 2 else None
    return {"reward": reward, "terms": dict(terms), "command": command}
