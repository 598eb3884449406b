"""RecurrentActorCritic: per-env state in act/reset, and forward_sequence for BPTT."""

import pytest
import torch
from policy_helpers import small_rnn

from embody.policies.base import Policy

RNN_TYPES = ["gru", "lstm"]


@pytest.mark.parametrize("rnn_type", RNN_TYPES)
def test_is_a_policy_with_per_env_state(rnn_type):
    pol = small_rnn(3, 2, rnn_type=rnn_type, rnn_layers=2)
    assert isinstance(pol, Policy)
    a = pol.act(torch.randn(5, 3))
    assert a.shape == (5, 2)
    assert pol._hidden.shape == (2, 5, pol.state_size)
    assert pol.state_size == (64 if rnn_type == "lstm" else 32)
    assert pol.act(torch.randn(5, 3), deterministic=False).shape == (5, 2)


@pytest.mark.parametrize("rnn_type", RNN_TYPES)
def test_forward_sequence_matches_stepwise_act_with_resets(rnn_type):
    pol = small_rnn(3, 2, rnn_type=rnn_type)
    T, n = 12, 4
    obs = torch.randn(T, n, 3)
    done = torch.zeros(T, n, dtype=torch.bool)
    done[0] = True
    done[4, 1] = done[7, 2] = done[7, 3] = True
    stepwise = []
    for t in range(T):
        if t > 0 and done[t].any():
            pol.reset(done[t].nonzero().flatten())
        stepwise.append(pol.act(obs[t]))
    out = pol.forward_sequence(obs, None, done)
    torch.testing.assert_close(out.mean, torch.stack(stepwise), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.hidden, pol._hidden, atol=1e-5, rtol=1e-5)


def test_reset_zeroes_only_the_given_envs():
    pol = small_rnn(3, 1)
    fresh = small_rnn(3, 1)
    fresh.load_state_dict(pol.state_dict())
    for _ in range(5):
        pol.act(torch.randn(3, 3))
    before = pol._hidden.clone()
    pol.reset(torch.tensor([1]))
    assert torch.all(pol._hidden[:, 1] == 0)
    torch.testing.assert_close(pol._hidden[:, [0, 2]], before[:, [0, 2]])
    x = torch.randn(3, 3)
    torch.testing.assert_close(pol.act(x)[1], fresh.act(x)[1])  # env 1 behaves as if just started
    pol.reset()  # all envs
    torch.testing.assert_close(pol.act(x), pol.forward_sequence(x[None]).mean[0])


@pytest.mark.parametrize("rnn_type", RNN_TYPES)
def test_gradients_do_not_cross_an_episode_start(rnn_type):
    pol = small_rnn(3, 1, rnn_type=rnn_type, normalize_obs=False)
    obs = torch.randn(6, 2, 3, requires_grad=True)
    done = torch.zeros(6, 2, dtype=torch.bool)
    done[3, 0] = True  # env 0 starts a new episode at t = 3; env 1 does not
    pol.forward_sequence(obs, None, done).mean[-1].sum().backward()
    g = obs.grad.abs().sum(-1)  # (T, n)
    assert torch.all(g[:3, 0] == 0) and torch.all(g[3:, 0] > 0)
    assert torch.all(g[:, 1] > 0)


def test_value_head_sees_privileged_obs():
    pol = small_rnn(3, 1, priv=2)
    out = pol.forward_sequence(torch.randn(4, 5, 3))
    v = pol.value(out.features, torch.randn(4, 5, 2))
    assert v.shape == (4, 5)
    with pytest.raises(ValueError, match="rnn_type"):
        small_rnn(3, 1, rnn_type="transformer")
