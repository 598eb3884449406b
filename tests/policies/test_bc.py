"""Behavior cloning and demonstrations: a scripted linear expert on cartpole-swingup."""

import pytest
import torch
from policy_helpers import cartpole, linear_expert, small_mlp, small_rnn

from embody.policies.bc import BCConfig, _windows, action_mse, train_bc
from embody.policies.datasets import DatasetError, Demonstrations


@pytest.fixture(scope="module")
def demos() -> tuple[Demonstrations, Demonstrations]:
    """(train, held-out): 8 and 4 envs x 250 steps, the expert's actions plus exploration noise."""
    train = Demonstrations.from_rollouts(cartpole(n_envs=8, seed=0), linear_expert, 250, noise_std=0.3, seed=0)
    test = Demonstrations.from_rollouts(cartpole(seed=1), linear_expert, 250, noise_std=0.3, seed=1)
    return train, test


def test_from_rollouts_layout():
    env = cartpole(n_envs=3, max_episode_steps=10)
    seen = []

    def expert(obs):
        seen.append(obs.clone())
        return linear_expert(obs)

    d = Demonstrations.from_rollouts(env, expert, 25)
    assert len(d) == 75 and d.obs_size == 5 and d.action_size == 1
    # env-major: rows [25 k, 25 k + 25) are env k's steps; episodes of 10 steps start at 0, 10, 20
    starts = torch.zeros(25, dtype=torch.bool)
    starts[[0, 10, 20]] = True
    torch.testing.assert_close(d.episode_starts, starts.repeat(3))
    torch.testing.assert_close(d.obs.reshape(3, 25, 5).transpose(0, 1), torch.stack(seen))
    torch.testing.assert_close(d.actions, linear_expert(d.obs))


def test_mlp_clones_the_expert(demos):
    train, test = demos
    policy = small_mlp(5, 1)
    before = action_mse(policy, test)
    metrics = train_bc(policy, train, BCConfig(epochs=20, batch_size=128, lr=3e-3))
    after = action_mse(policy, test)
    assert before > 0.5 and after < 0.05, (before, after, metrics)
    torch.testing.assert_close(policy.obs_norm.mean, train.obs.mean(0), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rnn_type", ["gru", "lstm"])
def test_recurrent_clones_the_expert(demos, rnn_type):
    train, test = demos
    policy = small_rnn(5, 1, rnn_type=rnn_type)
    before = action_mse(policy, test)
    train_bc(policy, train, BCConfig(epochs=20, batch_size=256, lr=3e-3, seq_len=16, burn_in=4))
    after = action_mse(policy, test)
    assert before > 0.5 and after < 0.06, (before, after)  # it sees history, so it overfits more


def test_gaussian_nll_also_fits_the_std(demos):
    train, test = demos
    policy = small_mlp(5, 1)
    std0 = policy.log_std.exp().item()
    train_bc(policy, train, BCConfig(epochs=20, batch_size=128, lr=3e-3, loss="gaussian-nll"))
    assert policy.log_std.exp().item() < 0.7 * std0  # Adam moves log_std about lr per step
    assert action_mse(policy, test) < 0.1


def test_progress_callback_and_refusals(demos):
    train, _ = demos
    seen = []
    m = train_bc(small_mlp(5, 1), train, BCConfig(epochs=10), lambda e: seen.append(e) or e["epoch"] == 2)
    assert m["epochs"] == 2 and [e["epoch"] for e in seen] == [1, 2]
    with pytest.raises(ValueError, match="obs/action sizes"):
        train_bc(small_mlp(4, 1), train)
    with pytest.raises(ValueError, match="unknown BC loss"):
        train_bc(small_mlp(5, 1), train, BCConfig(loss="huber"))


def test_windows_score_steps_with_context():
    starts = torch.zeros(12, dtype=torch.bool)
    starts[[0, 6]] = True
    obs = torch.arange(12.0)[:, None]
    cfg = BCConfig(seq_len=4, burn_in=2, batch_size=400)
    rows = []
    for o, _, done, scored in _windows(obs, obs, starts, cfg, torch.Generator().manual_seed(3)):
        assert o.shape[0] == 4 and done.shape == scored.shape == o.shape[:2]
        for b in range(o.shape[1]):
            idx = o[:, b, 0].long()
            rows.append(idx[0].item())
            assert torch.equal(done[:, b], starts[idx])
            context = torch.tensor([t >= 2 or bool(starts[idx[: t + 1]].any()) for t in range(4)])
            assert torch.equal(scored[:, b], context)
    assert len(rows) == len(set(rows)) >= 2  # non-overlapping windows


def test_save_and_load(tmp_path, demos):
    train, _ = demos
    path = train.save(tmp_path / "demos.safetensors")
    back = Demonstrations.load(path)
    for k in ("obs", "actions", "episode_starts"):
        assert torch.equal(getattr(back, k), getattr(train, k))
    assert back.meta == train.meta and len(back.meta["episode_returns"]) == 8
    with pytest.raises(DatasetError, match="no such demonstrations file"):
        Demonstrations.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(DatasetError, match="cannot read"):
        Demonstrations.load(tmp_path / "junk.safetensors")
    from safetensors.torch import save_file

    save_file({"obs": torch.zeros(2, 2)}, str(tmp_path / "foreign.safetensors"))
    with pytest.raises(DatasetError, match="not an embody demonstrations file"):
        Demonstrations.load(tmp_path / "foreign.safetensors")


def test_concat_marks_segment_starts():
    a = Demonstrations(torch.zeros(3, 2), torch.zeros(3, 1), torch.zeros(3, dtype=torch.bool))
    b = Demonstrations(torch.ones(2, 2), torch.ones(2, 1), torch.zeros(2, dtype=torch.bool))
    c = Demonstrations.concat([a, b])
    assert c.episode_starts.tolist() == [True, False, False, True, False]
