"""Gradients through the MuJoCo step (sims/diff.py, sims/mujoco/diff.py): the forward pass is the real step, the
backward pass agrees with finite differences of the real simulator, contacts on and off."""

import numpy as np
import pytest
import torch

from embody.robots import get_robot
from embody.sims import InitState, SimConfig, make_sim
from embody.sims.base import UnsupportedTask
from embody.sims.diff import differentiable_step


def cartpole(n=3):
    sim = make_sim("mujoco", get_robot("cartpole"), SimConfig(n_envs=n, decimation=2, control="torque"))
    pos = np.array([[0.0, 0.1], [0.2, 1.0], [-0.3, 2.0]])[:n]
    sim.reset(np.arange(n), InitState(pos, np.zeros((n, 2))))
    return sim


def hopper_in_contact(n=2):
    """Hoppers standing on the floor after settling (the foot in contact)."""
    sim = make_sim("mujoco", get_robot("gym_hopper"), SimConfig(n_envs=n, decimation=4, control="torque"))
    for _ in range(30):
        sim.step(np.zeros((n, 3)))
    return sim


@pytest.mark.parametrize("make", [cartpole, hopper_in_contact])
def test_forward_pass_is_the_step_bit_for_bit(make):
    sim = make()
    u = np.linspace(-5, 5, sim.n_envs * len(sim.robot.actuated)).reshape(sim.n_envs, -1)
    x = sim.diff_state()
    x_next, A, B = sim.transition(x, u, jacobians=True)
    assert np.array_equal(sim.diff_state(), x)  # the envs' own state is untouched
    sim.step(u)
    assert np.array_equal(x_next, sim.diff_state())
    assert A.shape == (sim.n_envs, x.shape[1], x.shape[1]) and B.shape == (*u.shape[:1], x.shape[1], u.shape[1])


def test_set_diff_state_round_trips():
    sim = cartpole()
    x = sim.diff_state() + 0.25
    sim.set_diff_state(x)
    np.testing.assert_array_equal(sim.diff_state(), x)
    np.testing.assert_array_equal(sim.state().joint_pos, x[:, :2])


def test_one_step_gradient_passes_gradcheck():
    sim = cartpole()
    x = torch.tensor(sim.diff_state(), requires_grad=True)
    u = torch.tensor([[1.0], [-2.0], [5.0]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: differentiable_step(sim, a, b), (x, u), eps=1e-6, atol=1e-5, rtol=1e-4)


def rollout_loss(sim, x0, actions, step):
    """Σ_t ‖x_t‖² over an H-step rollout (a smooth stand-in for a return)."""
    x, loss = x0, 0.0
    for u in actions:
        x = step(x, u)
        loss = loss + (x**2).sum()
    return loss


@pytest.mark.parametrize("make, horizon, rtol", [(cartpole, 20, 1e-6), (hopper_in_contact, 8, 1e-5)])
def test_rollout_gradient_matches_finite_differences_of_the_simulator(make, horizon, rtol):
    """d(loss)/d(actions) by backpropagation through H steps against central differences of whole rollouts of the
    real simulator (contacts: the hopper's foot stays on the floor, where the contact model is smooth enough)."""
    sim = make()
    rng = np.random.default_rng(0)
    a = len(sim.robot.actuated)
    actions = torch.tensor(rng.normal(scale=2.0, size=(horizon, sim.n_envs, a)), requires_grad=True)
    x0 = torch.tensor(sim.diff_state())
    rollout_loss(sim, x0, actions, lambda x, u: differentiable_step(sim, x, u)).backward()

    def plain(acts):
        return rollout_loss(sim, x0.numpy(), acts, lambda x, u: sim.transition(x, u, jacobians=False)[0])

    eps, base = 1e-4, actions.detach().numpy()
    numeric = np.zeros_like(base)
    for idx in np.ndindex(*base.shape):
        hi, lo = base.copy(), base.copy()
        hi[idx] += eps
        lo[idx] -= eps
        numeric[idx] = (plain(hi) - plain(lo)) / (2 * eps)
    err = np.abs(actions.grad.numpy() - numeric).max() / np.abs(numeric).max()
    print(f"{sim.robot.name}: max |autograd − finite differences| / max |gradient| = {err:.1e}")
    np.testing.assert_allclose(actions.grad.numpy(), numeric, rtol=rtol, atol=rtol * np.abs(numeric).max())


def test_gradients_are_refused_by_name():
    with pytest.raises(UnsupportedTask, match="pybullet.*differentiable"):
        differentiable_step(
            make_sim("pybullet", get_robot("cartpole"), SimConfig(n_envs=1, control="torque")),
            torch.zeros(1, 4),
            torch.zeros(1, 1),
        )
    h1 = make_sim("mujoco", get_robot("h1_2"), SimConfig(n_envs=1))
    with pytest.raises(UnsupportedTask, match="h1_2.*free"):
        h1.diff_state()
    import mujoco

    rk4 = cartpole(n=1)
    rk4.model.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    with pytest.raises(UnsupportedTask, match="RK4"):
        rk4.transition(rk4.diff_state(), np.zeros((1, 1)), jacobians=True)


def test_closing_never_joins_the_jacobian_workers_so_a_finalizer_cannot_deadlock():
    """The garbage collector may run a simulator's ``__del__`` on a thread starting up, inside threading's
    ``_active_limbo_lock``; joining workers there deadlocks (they need that lock to exit: it hung a CI run). In a
    subprocess, so that a regression fails here instead of hanging the suite."""
    import subprocess
    import sys

    script = (
        "import threading, numpy as np\n"
        "from embody.robots import get_robot\n"
        "from embody.sims import SimConfig, make_sim\n"
        "sim = make_sim('mujoco', get_robot('cartpole'), SimConfig(n_envs=4, decimation=2, control='torque', "
        "n_threads=2))\n"
        "sim.transition(sim.diff_state(), np.zeros((4, 1)), jacobians=True)  # the workers run\n"
        "with threading._active_limbo_lock:  # as on a thread that the collector interrupts while it starts\n"
        "    sim.close()\n"
        "print('closed')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "closed" in run.stdout, run.stderr[-2000:]
