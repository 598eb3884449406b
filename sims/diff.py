"""Gradients through a simulator step: a batched ``torch.autograd.Function`` over an engine's transition Jacobians.

An adapter with the ``differentiable`` capability offers ``transition(x, u, jacobians)``: from states ``x`` (n, d)
and commands ``u`` (n, a), float64 numpy, one control step (``decimation`` physics steps, the command held) gives
the next states (n, d) and, when asked, the Jacobians A = ∂x'/∂x (n, d, d) and B = ∂x'/∂u (n, d, a); without the
Jacobians it must return exactly what ``step`` would. ``diff_state()`` gives the current (n, d) states and
``set_diff_state(x)`` writes them back (the state layout is the adapter's, documented there);
``diff_joint_columns()`` says where the spec's joint positions and velocities (j,) sit in a row.

``differentiable_step(sim, x, u)`` wraps that in autograd: the forward pass runs the real engine, the backward pass
is a vector–Jacobian product with the stored A and B (per env, batched). The engine is never differentiated
symbolically, so whatever it simulates (contacts included) has a gradient; how good that gradient is, is the
adapter's to state.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

from .base import UnsupportedTask


@runtime_checkable
class Differentiable(Protocol):
    """The methods behind capability ``differentiable`` (shapes in the module docstring)."""

    def diff_state(self) -> np.ndarray: ...

    def set_diff_state(self, x: np.ndarray, env_ids: np.ndarray | None = None) -> None: ...

    def diff_joint_columns(self) -> tuple[np.ndarray, np.ndarray]: ...

    def transition(
        self, x: np.ndarray, u: np.ndarray, jacobians: bool
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]: ...


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, u: torch.Tensor, sim) -> torch.Tensor:
        want = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        x_np = x.detach().cpu().numpy().astype(np.float64)
        u_np = u.detach().cpu().numpy().astype(np.float64)
        x_next, A, B = sim.transition(x_np, u_np, jacobians=want)
        if want:
            ctx.save_for_backward(torch.from_numpy(A).to(x), torch.from_numpy(B).to(u))
        return torch.from_numpy(x_next).to(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        A, B = ctx.saved_tensors
        gx = torch.einsum("ni,nij->nj", grad, A) if ctx.needs_input_grad[0] else None
        gu = torch.einsum("ni,nij->nj", grad.to(B), B) if ctx.needs_input_grad[1] else None
        return gx, gu, None


def require_differentiable(sim) -> Differentiable:
    """``sim`` itself, or UnsupportedTask naming the simulator when it cannot give gradients."""
    if "differentiable" not in sim.capabilities or not isinstance(sim, Differentiable):
        raise UnsupportedTask(
            f"simulator {sim.name!r} cannot give gradients through its step: it lacks capability 'differentiable' "
            "(today MuJoCo offers it)"
        )
    return sim


def differentiable_step(sim, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Next states (n, d) of one control step from states ``x`` (n, d) under commands ``u`` (n, a), differentiable
    with respect to both; the simulator's own state is left as it was."""
    require_differentiable(sim)
    if x.ndim != 2 or u.ndim != 2 or x.shape[0] != u.shape[0]:
        raise ValueError(f"differentiable_step: x (n, d) and u (n, a) expected, got {tuple(x.shape)}, {tuple(u.shape)}")
    return _Step.apply(x, u, sim)
