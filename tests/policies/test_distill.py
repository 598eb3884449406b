"""DAgger distillation from a teacher that sees privileged state to a student that does not.

The partially observed task is cartpole-swingup with the velocities moved from the
observation into the privileged observation: the student sees (x, cos θ, sin θ), the
teacher cat(obs, privileged) = (x, cos θ, sin θ, ẋ, θ̇), which is cartpole's full observation.
A memoryless student cannot know the velocities; a recurrent one can infer them from
consecutive observations.
"""

import numpy as np
import pytest
import torch
from policy_helpers import cartpole, small_mlp, small_rnn

from embody.policies.bc import BCConfig
from embody.policies.datasets import Demonstrations
from embody.policies.distill import DAggerConfig, distill, rollout_mixture
from embody.robots import get_robot
from embody.sims import make_sim
from embody.sims.tasks.cartpole_swingup import CartpoleSwingup, CartpoleSwingupConfig
from embody.sims.vec_env import VecEnv


class HiddenVelocityCartpole(CartpoleSwingup):
    """cartpole-swingup whose velocities are privileged (a test-only task, never registered)."""

    name = "cartpole-swingup-hidden-velocity"
    observation_size = property(lambda self: 3)
    privileged_size = property(lambda self: 2)

    def observe(self, state):
        return super().observe(state)[:, :3]

    def privileged_observe(self, state):
        return super().observe(state)[:, 3:]


def hidden_velocity_env(n_envs: int = 4, seed: int = 0) -> VecEnv:
    cfg = CartpoleSwingupConfig(init_noise=1.0, max_episode_steps=100)
    cfg.sim.n_envs = n_envs
    robot = get_robot("cartpole")
    return VecEnv(HiddenVelocityCartpole(cfg, robot, n_envs, seed), make_sim("mujoco", robot, cfg.sim), seed=seed)


def teacher(full_obs: torch.Tensor) -> torch.Tensor:
    """(n, 5) full cartpole observation → (n, 1): a smooth controller leaning on velocities."""
    x, _, sin, xdot, thdot = full_obs.unbind(-1)
    return torch.tanh(sin - 0.5 * x - 0.5 * xdot - 0.5 * thdot)[:, None]


def test_beta_starts_at_one_and_decays():
    cfg = DAggerConfig(beta_decay=0.5)
    assert [cfg.beta(i) for i in range(4)] == [1.0, 0.5, 0.25, 0.125]


@pytest.mark.parametrize("beta", [1.0, 0.0])
def test_mixture_extremes_are_teacher_and_student(beta):
    def student(obs):
        assert obs.shape == (4, 3)  # the student never sees privileged state
        return -0.5 * torch.ones(4, 1)

    labels = []

    def teacher_checked(obs):
        assert obs.shape == (4, 5)
        labels.append(teacher(obs))
        return labels[-1]

    data, stats = rollout_mixture(
        hidden_velocity_env(), teacher_checked, student, 30, beta, "privileged", np.random.default_rng(0)
    )
    driver = teacher if beta == 1.0 else student
    ref = Demonstrations.from_rollouts(hidden_velocity_env(), driver, 30, expert_obs="privileged" if beta else "obs")
    torch.testing.assert_close(data.obs, ref.obs)  # the same states: that policy drove the envs
    torch.testing.assert_close(data.episode_starts, ref.episode_starts)
    torch.testing.assert_close(data.actions, torch.stack(labels).transpose(0, 1).reshape(-1, 1))  # env-major
    assert stats["action_mse"] > 0


def own_mse(env, student, teacher_obs: str = "privileged") -> float:
    """The student's action MSE to the teacher on the states it visits by itself."""
    _, stats = rollout_mixture(env, teacher, student, 100, 0.0, teacher_obs, np.random.default_rng(0))
    return stats["action_mse"]


def test_dagger_fully_observed_mlp_student():
    env = cartpole(init_noise=1.0, max_episode_steps=100)
    student = small_mlp(5, 1)
    untrained = own_mse(env, student, "obs")
    cfg = DAggerConfig(
        iterations=4, steps_per_iteration=100, eval_steps=100, bc=BCConfig(epochs=10, batch_size=128, lr=3e-3)
    )
    hist = distill(env, teacher, student, cfg, teacher_obs="obs")
    assert [h["samples"] for h in hist] == [400, 800, 1200, 1600]
    assert [h["beta"] for h in hist] == [1.0, 0.5, 0.25, 0.125]
    mse = [h["student_mse"] for h in hist]
    assert untrained > 0.2 and mse[-1] < 0.05 * untrained, (untrained, mse)
    assert all(np.isfinite(h["student_return"]) for h in hist)


def test_recurrent_student_beats_mlp_under_partial_observation():
    """~7 s: DAgger with 8 envs for an MLP and a GRU student."""
    cfg = DAggerConfig(
        iterations=6,
        steps_per_iteration=100,
        eval_steps=100,
        bc=BCConfig(epochs=10, batch_size=256, lr=3e-3, seq_len=16, burn_in=4),
    )
    results = {}
    for name, student in (("mlp", small_mlp(3, 1)), ("gru", small_rnn(3, 1))):
        env = hidden_velocity_env(n_envs=8)
        untrained = own_mse(env, student)
        results[name] = [untrained] + [h["student_mse"] for h in distill(env, teacher, student, cfg)]
    mlp, gru = results["mlp"], results["gru"]
    assert gru[-1] < 0.3 * gru[0], results  # DAgger fixes the recurrent student's own mistakes
    assert gru[-1] < 0.5 * mlp[-1], results  # the MLP cannot see the velocities


def test_a_method_plugs_its_rollouts_schedule_and_retraining_into_the_one_loop():
    """``initial`` rows, ``betas``, a ``rollout(i, beta)`` hook and a ``bc_for(i, rows)`` hook (as the
    blindfolded peg study uses them): the loop aggregates and retrains, the hooks decide the rest."""
    torch.manual_seed(0)
    student = small_mlp(3, 1)

    def rows(n: int) -> Demonstrations:
        return Demonstrations(torch.randn(n, 3), torch.zeros(n, 1), torch.zeros(n, dtype=torch.bool), {})

    calls, configs = [], []

    def rollout(i: int, beta: float):
        calls.append((i, beta))
        return rows(20), {"rollout_success": 0.5}

    def bc_for(i: int, n_rows: int) -> BCConfig:
        configs.append((i, n_rows))
        return BCConfig(epochs=30, batch_size=16, lr=1e-2, fit_normalizer=False, seed=i + 1)

    cfg = DAggerConfig(iterations=99, betas=[0.5, 0.25])
    assert cfg.schedule() == [0.5, 0.25] and cfg.beta(1) == 0.25
    hist = distill(None, None, student, cfg, initial=rows(10), rollout=rollout, bc_for=bc_for)
    assert calls == [(0, 0.5), (1, 0.25)] and configs == [(0, 30), (1, 50)]
    assert [(h["samples"], h["rollout_success"]) for h in hist] == [(30, 0.5), (50, 0.5)]
    assert hist[-1]["train_mse"] < 0.01  # the zero labels were learned
