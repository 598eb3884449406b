"""The differentiable task path (sims/diff_env.py) reports what the numpy path reports, with gradients."""

import numpy as np
import pytest
import torch

from embody.sims.base import UnsupportedTask
from embody.sims.diff_env import DiffEnv
from embody.sims.vec_env import make_env


@pytest.mark.parametrize("task", ["cartpole-swingup", "hopper"])
def test_states_rewards_and_observations_are_the_numpy_paths(task):
    env = make_env(task, n_envs=3, seed=0)
    denv = DiffEnv(env)
    x = denv.reset()
    np.testing.assert_allclose(denv.observe(x).numpy(), env.task.observe(env.sim.state()), rtol=1e-6, atol=1e-7)
    a = np.array([0.5, -1.0, 2.0])[:, None] * np.ones((1, env.action_size))
    action = torch.tensor(a, requires_grad=True)
    step = denv.step(x, action)
    state = env.sim.state()
    np.testing.assert_array_equal(step.x_next.detach().numpy(), env.sim.diff_state())
    np.testing.assert_array_equal(step.reward.detach().numpy(), env.task.reward(state, a)[0])
    step.reward.sum().backward()
    assert action.grad is not None and action.grad[:2].abs().sum() > 0
    assert action.grad[2].abs().sum() == 0  # clipped at 1: no gradient, as the step applies no more


def test_a_gradient_never_crosses_an_episode_boundary():
    env = make_env("cartpole-swingup", n_envs=2, seed=0)
    env.task.config.max_episode_steps = 3
    denv = DiffEnv(env)
    x0 = denv.reset().requires_grad_(True)
    x = x0
    for _ in range(3):
        step = denv.step(x, torch.full((2, 1), 0.3, dtype=torch.float64))
        x = step.x
    assert step.truncated.all()
    (grad,) = torch.autograd.grad(x.sum(), x0, retain_graph=True, allow_unused=True, materialize_grads=True)
    assert torch.count_nonzero(grad) == 0
    (grad,) = torch.autograd.grad(step.x_next.sum(), x0)
    assert torch.count_nonzero(grad) > 0  # the state the episode ended in still depends on where it began


def test_arm_reach_observes_and_rewards_as_its_numpy_path_with_the_tip_from_kinematics():
    env = make_env("arm-reach", n_envs=3, seed=0)
    denv, t = DiffEnv(env), env.task
    x = denv.reset()
    rng = np.random.default_rng(0)
    for _ in range(4):  # past the tare: the wrench is a reading, the arm follows its actions
        previous = t.last_action.copy()
        a = rng.uniform(-1, 1, (3, 7))
        step = denv.step(x, torch.tensor(a))
        x, state = step.x, env.sim.state()
        t.last_action, numpy_last = previous, t.last_action  # the numpy reward of the same step
        np.testing.assert_allclose(step.reward.numpy(), t.reward(state, a)[0], rtol=1e-9)
        t.last_action = numpy_last
        obs = denv.observe(x).numpy()
        np.testing.assert_allclose(obs, t.observe(state), rtol=1e-5, atol=1e-6)  # the numpy path is float32
    assert np.abs(obs[:, t.WRENCH]).max() > 0  # a real reading, taken by the numpy step


def test_the_action_rate_term_differentiates_through_the_previous_action_within_a_window():
    env = make_env("arm-reach", n_envs=2, seed=0)
    env.task.config.reward_weights = {"action_rate": 1.0}
    denv = DiffEnv(env)
    x0 = denv.reset().requires_grad_(True)  # a state with a gradient: the window carries the actions' graphs
    a1 = torch.full((2, 7), 0.3, dtype=torch.float64, requires_grad=True)
    step = denv.step(x0, a1)
    step = denv.step(step.x, torch.full((2, 7), -0.2, dtype=torch.float64))
    (grad,) = torch.autograd.grad(step.reward.sum(), a1)
    np.testing.assert_allclose(grad.numpy(), -2 * (-0.2 - 0.3))  # d/da₁ ‖a₂ − a₁‖²
    step = denv.step(step.x.detach(), torch.zeros(2, 7, dtype=torch.float64))  # a new window: no graph back
    assert not step.reward.requires_grad


def test_undifferentiable_tasks_and_simulators_are_refused_by_name():
    with pytest.raises(UnsupportedTask, match="peg-insert.*not differentiable"):
        DiffEnv(make_env("peg-insert", n_envs=1))
    with pytest.raises(UnsupportedTask, match="pybullet.*differentiable"):
        DiffEnv(make_env("cartpole-swingup", sim="pybullet", n_envs=1))


def test_the_quadratic_swingup_reward_is_dflexs_on_both_paths():
    import math

    from embody.robots import RobotState

    env = make_env("cartpole-swingup", n_envs=1)
    q = np.array([[0.0, 0.0], [0.0, math.pi], [1.0, -0.5 + 4 * math.pi]])  # upright, hanging, off-centre (wrapped)
    v = np.array([[0.0, 0.0], [0.0, 0.0], [2.0, 1.0]])
    want = [0.0, -(math.pi**2), -(0.25 + 0.1 + 0.05 + 0.4)]
    state = RobotState(joint_pos=q, joint_vel=v, joint_torque=None, time=None)
    np.testing.assert_allclose(env.task.reward_quadratic(state, np.zeros((3, 1))), want, atol=1e-12)
    tensors = RobotState(joint_pos=torch.tensor(q), joint_vel=torch.tensor(v), joint_torque=None, time=None)
    got = env.task.reward_quadratic(tensors, torch.zeros(3, 1, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)


@pytest.mark.parametrize("task, settle", [("cartpole-swingup", 0), ("hopper", 30), ("arm-reach", 0)])
def test_the_return_gradient_wrt_policy_parameters_matches_finite_differences(task, settle):
    """d(H-step return)/d(policy parameters) through DiffEnv against central differences of whole rollouts of the
    real simulator with the numpy reward (the hopper's foot on the floor after settling: contacts; the arm's
    action-rate term through the previous action, its wrench columns unused as they carry no gradient)."""
    env = make_env(task, n_envs=2, seed=0)
    if task == "arm-reach":
        env.task.io.tare_steps = 0  # no hold of the reset pose: the actions drive the arm from the first step
    denv, t = DiffEnv(env), env.task
    denv.reset()
    for _ in range(settle):
        env.sim.step(np.zeros((2, env.action_size)))
    x0, last0, horizon = env.sim.diff_state(), t.last_action.copy(), 8
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.3, size=(denv.observation_size, env.action_size))
    constant = np.zeros_like(w, dtype=bool)  # observation columns without a gradient (the arm's wrench)
    constant[getattr(t, "WRENCH", slice(0))] = True
    w[constant] = 0.0
    W = torch.tensor(w, requires_grad=True)
    b = torch.tensor(rng.normal(scale=0.1, size=env.action_size), requires_grad=True)
    env.sim.set_diff_state(x0)
    x, ret = torch.from_numpy(x0), 0.0
    for _ in range(horizon):
        step = denv.step(x, torch.tanh(denv.observe(x) @ W + b))
        assert not (step.terminated | step.truncated).any()
        x, ret = step.x, ret + step.reward.sum()
    ret.backward()

    def numpy_return(w: np.ndarray, c: np.ndarray) -> float:
        env.sim.set_diff_state(x0)
        t.last_action[:] = last0
        total = 0.0
        for _ in range(horizon):
            a = np.tanh(denv.observe(torch.from_numpy(env.sim.diff_state())).numpy() @ w + c)
            env.sim.step(t.action_to_command(a))
            total += t.reward(env.sim.state(), a)[0].sum()
            t.last_action[:] = a
        return total

    params = np.concatenate([W.detach().numpy().ravel(), b.detach().numpy()])
    checked = np.flatnonzero(~np.concatenate([constant.ravel(), np.zeros(len(b), bool)]))
    numeric = np.zeros_like(params)
    for i in checked:
        hi, lo = params.copy(), params.copy()
        hi[i] += 1e-5
        lo[i] -= 1e-5
        unpack = lambda p: (p[: W.numel()].reshape(W.shape), p[W.numel() :])  # noqa: E731
        numeric[i] = (numpy_return(*unpack(hi)) - numpy_return(*unpack(lo))) / 2e-5
    grad = np.concatenate([W.grad.numpy().ravel(), b.grad.numpy()])[checked]
    err = np.abs(grad - numeric[checked]).max() / np.abs(numeric).max()
    print(f"{task}: max |autograd − finite differences| / max |gradient| = {err:.1e}")
    assert err < 1e-4
