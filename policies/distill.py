"""Teacher → student distillation with DAgger (Ross et al., 2011).

The teacher may see privileged information (``teacher_obs="privileged"``: the observation
concatenated with the privileged observation, (n, o + p), as the asymmetric critic sees it);
the student sees the observation (n, o) only. Each iteration rolls out a mixture that plays
the teacher's action with probability ``beta`` and the student's otherwise (per env and
step; ``beta`` starts at 1 and decays), labels every visited state with the teacher's action,
adds them to the dataset and retrains the student on all of it by behavior cloning.

The one DAgger loop of embody: a method with its own rollouts (whole episodes on given tasks, a
fresh teacher per round) or retraining schedule passes them as the ``rollout`` and ``bc_for`` hooks
of ``distill`` instead of writing the loop again; ``initial`` starts from the demonstrations the
student was cloned on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .bc import BCConfig, train_bc
from .datasets import Demonstrations, as_action_fn, expert_input, reset_policy


@dataclass
class DAggerConfig:
    """Settings of ``distill``: iterations, the teacher's share per iteration, rollout length, BC retraining."""

    iterations: int = 10
    steps_per_iteration: int = 250  # rollout steps per env per iteration
    beta_decay: float = 0.5  # beta_i = beta_decay ** i: the teacher's share of rollout actions
    betas: list[float] | None = None  # each iteration's beta instead (then len(betas) iterations)
    eval_steps: int = 0  # steps per env of a student-only rollout after each iteration (0: skip)
    bc: BCConfig = field(default_factory=lambda: BCConfig(epochs=10))  # retraining, each iteration
    seed: int = 0

    def beta(self, iteration: int) -> float:
        """The teacher's share of rollout actions in ``iteration`` (0-based): ``betas[i]`` or ``beta_decay ** i``."""
        return self.betas[iteration] if self.betas is not None else self.beta_decay**iteration

    def schedule(self) -> list[float]:
        """The teacher's share in each iteration."""
        return list(self.betas) if self.betas is not None else [self.beta(i) for i in range(self.iterations)]


Rollout = Callable[[int, float], tuple[Demonstrations, dict]]  # (iteration, beta) -> (labelled rows, stats)


def distill(
    env,
    teacher,
    student: torch.nn.Module,
    config: DAggerConfig | None = None,
    teacher_obs: str = "privileged",
    progress_cb: Callable[[dict], bool | None] | None = None,
    initial: Demonstrations | None = None,
    rollout: Rollout | None = None,
    bc_for: Callable[[int, int], BCConfig] | None = None,
) -> list[dict]:
    """Train ``student`` (MLP or recurrent) in place to imitate ``teacher`` (a Policy or a
    callable on tensors) on ``env``; ``progress_cb(metrics)`` may return True to stop.

    ``initial``: demonstrations the dataset starts from (e.g. those the student was cloned on).
    ``rollout(i, beta)`` → (labelled rows, stats): iteration i's data (default: ``rollout_mixture``,
    ``steps_per_iteration`` steps per env of ``env`` with ``teacher``). ``bc_for(i, rows)`` → the
    BCConfig that retrains on the ``rows`` aggregated rows (default: ``config.bc`` seeded bc.seed + i).

    Returns one dict per iteration: ``beta``, ``samples`` (aggregated), the rollout's stats (default:
    ``action_mse``, the student's deterministic action against the teacher's over this iteration's
    visited states, before retraining on them, and ``rollout_return``, mixture episodes finished in
    the rollout), ``train_mse`` and, with ``eval_steps``, the student's own ``student_mse`` and
    ``student_return`` (episodes finished in a rollout without the teacher: the DAgger target).
    """
    cfg = config or DAggerConfig()
    rng = np.random.default_rng(cfg.seed)
    if rollout is None:

        def rollout(i: int, beta: float) -> tuple[Demonstrations, dict]:
            return rollout_mixture(env, teacher, student, cfg.steps_per_iteration, beta, teacher_obs, rng)

    if bc_for is None:

        def bc_for(i: int, rows: int) -> BCConfig:
            return replace(cfg.bc, seed=cfg.bc.seed + i)

    parts: list[Demonstrations] = [] if initial is None else [initial]
    history: list[dict] = []
    for i, beta in enumerate(cfg.schedule()):
        part, stats = rollout(i, beta)
        parts.append(part)
        data = Demonstrations.concat(parts)
        fit = train_bc(student, data, bc_for(i, len(data)))
        metrics = {"iteration": i + 1, "beta": beta, "samples": len(data), **stats, "train_mse": fit["mse"]}
        if cfg.eval_steps:
            _, own = rollout_mixture(env, teacher, student, cfg.eval_steps, 0.0, teacher_obs, rng)
            metrics.update(student_mse=own["action_mse"], student_return=own["rollout_return"])
        history.append(metrics)
        if progress_cb is not None and progress_cb(metrics):
            break
    return history


def rollout_mixture(
    env, teacher, student: torch.nn.Module, steps: int, beta: float, teacher_obs: str, rng: np.random.Generator
) -> tuple[Demonstrations, dict]:
    """``steps`` steps per env from a reset, playing the teacher's action where a coin with
    probability ``beta`` says so and the student's elsewhere; labels are the teacher's actions."""
    teacher_act, student_act = as_action_fn(teacher), as_action_fn(student)
    obs, priv = env.reset()
    reset_policy(teacher, None)
    reset_policy(student, None)
    seq = {"obs": [], "labels": [], "starts": []}
    starts = np.ones(env.n_envs, dtype=bool)
    sq_err, returns = 0.0, []
    for _ in range(steps):
        student_obs = torch.as_tensor(obs, dtype=torch.float32)
        label = teacher_act(expert_input(obs, priv, teacher_obs))
        own = student_act(student_obs)
        sq_err += float((own - label).pow(2).mean())
        seq["obs"].append(student_obs)
        seq["labels"].append(label)
        seq["starts"].append(torch.as_tensor(starts))
        use_teacher = torch.as_tensor(rng.random(env.n_envs) < beta)[:, None]
        obs, _, terminated, truncated, info = env.step(torch.where(use_teacher, label, own).numpy())
        priv, starts = info.privileged_obs, terminated | truncated
        reset_policy(teacher, starts)
        reset_policy(student, starts)
        returns.extend(info.episode_return.tolist())
    data = Demonstrations.from_time_major(
        torch.stack(seq["obs"]), torch.stack(seq["labels"]), torch.stack(seq["starts"])
    )
    stats = {"action_mse": sq_err / steps, "rollout_return": float(np.mean(returns)) if returns else float("nan")}
    return data, stats
