"""``embody bench sac``: both SACs (embody's and stable-baselines3's, from the dev extra) train on the same task
with the same settings and the report carries both rates."""

import json
import math

import pytest


def test_a_short_sac_bench_measures_both_sides(tmp_path, capsys):
    from embody.benchmarks.sac import main

    argv = ["--steps", "600", "--envs", "4", "--learning-starts", "200", "--hidden", "16", "16", "--out", str(tmp_path)]
    assert main(argv) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    for side in ("embody", "sb3"):
        row = result["rows"][side]
        assert row["updates"] == 200 and row["env_steps_per_s"] > 0 and row["grad_steps_per_s"] > 0, side
    assert math.isfinite(result["speed_ratio"]) and "speed at equal return" in capsys.readouterr().out
    assert set(result["equal_return"]["time_s"]) == {"embody", "sb3"}


def test_speed_at_equal_return_times_each_side_to_the_lower_final_return():
    from embody.benchmarks.sac import _returns_by_fifth, equal_return

    def side(rate: float, slope: float):  # an episode every 100 env steps, return = slope · steps
        return [(s, slope * s, s / rate) for s in range(100, 1001, 100)]

    points = {"embody": side(rate=10.0, slope=2.0), "sb3": side(rate=5.0, slope=1.0)}
    rows = {k: {"returns_by_fifth": _returns_by_fifth(p, 1000)} for k, p in points.items()}
    eq = equal_return(rows, points, 1000)
    assert eq["level"] == 950.0  # SB3's last fifth: episodes at 900 and 1000
    # embody's trailing-fifth mean (2·(s − 50)) first reaches 950 at s = 600, 60 s in; SB3 at 1000, 200 s in
    assert eq["time_s"] == {"embody": 60.0, "sb3": 200.0} and eq["ratio"] == pytest.approx(200 / 60)


def test_embodys_sac_update_moves_the_networks_as_sb3s_does(monkeypatch):
    """Same weights, batches and sampling noise: embody's ``SAC.update`` and SB3's ``SAC.train`` take the same step
    (the critics to Adam's ε, the temperature exactly); the actors differ only where a gradient is ~0 and Adam's
    first step turns float noise into ±lr (a few weights in 10⁴). What is left of a learning gap is not the update."""
    pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    from embody.benchmarks.her import _flat_sb3, _Handed
    from embody.benchmarks.sac import embody_config
    from embody.policies.sac import SAC, SACPolicy

    torch.manual_seed(0)
    O, A, B = 31, 4, 64  # FetchPickAndPlace's flat observation and action
    s = {"hidden": [64, 64], "batch_size": B, "lr": 1e-3, "gamma": 0.95, "tau": 0.005, "learning_starts": 0}
    s |= {"utd": 0.5, "envs": 4}
    sb3, policy = _flat_sb3(O, A, s, 0), SACPolicy(O, A, s["hidden"], normalize_obs=False, init="torch")
    ours = SAC(None, policy, embody_config(s, buffer_size=1), seed=0)
    ours.buffer = _Handed()
    _copy_sb3_weights(sb3, policy)
    noise: list = []  # each side draws its two samples (state, next state) in its own order
    monkeypatch.setattr(torch, "randn_like", lambda x, **_: noise.pop(0))
    monkeypatch.setattr(torch.distributions.Normal, "rsample", lambda d, shape=(): d.loc + d.scale * noise.pop(0))
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        obs, nxt, eps, eps2 = (torch.randn(B, n, generator=g) for n in (O, O, A, A))
        act, rew = torch.rand(B, A, generator=g) * 2 - 1, -(torch.rand(B, generator=g) < 0.8).float()
        done = (torch.rand(B, generator=g) < 0.05).float()
        sb3.replay_buffer.batch = ReplayBufferSamples(obs, act, nxt, done[:, None], rew[:, None], None)
        noise[:] = [eps, eps2]  # SB3: the state's action first
        sb3.train(gradient_steps=1, batch_size=B)
        ours.buffer.batch = {"obs": obs, "actions": act, "rewards": rew, "next_obs": nxt, "terminal": done}
        noise[:] = [eps2, eps]  # embody: the next state's first
        ours.update()
    assert sb3.log_ent_coef.item() == pytest.approx(policy.log_alpha.item(), abs=1e-7)
    linear = [m for m in policy.actor if isinstance(m, torch.nn.Linear)]
    theirs = [m for m in sb3.actor.latent_pi if isinstance(m, torch.nn.Linear)]
    far = [((a.weight - b.weight).abs() > 1e-5).float().mean().item() for a, b in zip(theirs, linear)]
    assert max(far) < 0.01, far
    for net, ensemble, tol in ((sb3.critic, policy.critics, 5e-4), (sb3.critic_target, policy.targets, 2e-5)):
        for k, q in enumerate(net.q_networks):
            for i, m in enumerate(x for x in q if isinstance(x, torch.nn.Linear)):
                assert (m.weight.T - ensemble.weights[i][k]).abs().max() < tol


def _copy_sb3_weights(sb3, policy) -> None:
    """SB3's actor (hidden layers, mean and log-std heads), twin critics and targets, and temperature into a
    ``SACPolicy`` (one output layer for mean and log-std; critics as one batched ensemble)."""
    import torch

    def linear(seq):
        return [m for m in seq if isinstance(m, torch.nn.Linear)]

    with torch.no_grad():
        ours = linear(policy.actor)
        for a, b in zip(linear(sb3.actor.latent_pi), ours[:-1]):
            b.weight.copy_(a.weight), b.bias.copy_(a.bias)
        ours[-1].weight.copy_(torch.cat([sb3.actor.mu.weight, sb3.actor.log_std.weight]))
        ours[-1].bias.copy_(torch.cat([sb3.actor.mu.bias, sb3.actor.log_std.bias]))
        for net, ensemble in ((sb3.critic, policy.critics), (sb3.critic_target, policy.targets)):
            for k, q in enumerate(net.q_networks):
                for i, m in enumerate(linear(q)):
                    ensemble.weights[i][k].copy_(m.weight.T), ensemble.biases[i][k, 0].copy_(m.bias)
        policy.log_alpha.copy_(sb3.log_ent_coef.reshape(policy.log_alpha.shape))
