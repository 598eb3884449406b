"""SAC (policies/sac.py): the replay buffer's ring, its safe file format and the refusal of damaged files; the soft
Bellman targets (terminals stop bootstrapping, truncations do not); the temperature tracking the target entropy;
``embody train --algo sac`` writing a run that evaluates, and resuming it with its replay buffer."""

import json

import numpy as np
import pytest
import torch

from embody.policies.sac import SAC, ReplayBuffer, ReplayBufferError, SACConfig, SACPolicy


def rows(k: int, start: int = 0) -> dict[str, np.ndarray]:
    i = np.arange(start, start + k, dtype=np.float32)
    return {
        "obs": np.stack([i, -i], 1),
        "actions": i[:, None] / 100,
        "rewards": i,
        "next_obs": np.stack([i + 1, -i - 1], 1),
        "terminal": (i % 2).astype(np.float32),
    }


def test_the_buffer_is_a_ring_and_round_trips_exactly(tmp_path):
    buf = ReplayBuffer(5, 2, 1)
    buf.add(**rows(3))
    buf.add(**rows(4, start=3))  # 7 rows into 5: rows 5, 6 overwrite 0, 1
    assert buf.size == 5 and buf.ptr == 2
    assert sorted(buf.data["rewards"].tolist()) == [2, 3, 4, 5, 6]
    batch = buf.sample(64, np.random.default_rng(0), "cpu")
    assert batch["obs"].shape == (64, 2) and set(batch["rewards"].tolist()) <= {2, 3, 4, 5, 6}
    torch.testing.assert_close(batch["next_obs"][:, 0], batch["obs"][:, 0] + 1)  # rows stay whole
    buf.save(tmp_path / "replay.safetensors")
    same = ReplayBuffer(5, 2, 1).restore(tmp_path / "replay.safetensors")
    assert (same.size, same.ptr) == (5, 0) and same.data["rewards"].tolist() == [2, 3, 4, 5, 6]  # oldest first
    same.add(**rows(1, start=7))
    assert sorted(same.data["rewards"].tolist()) == [3, 4, 5, 6, 7]  # the oldest goes first, as before saving
    small = ReplayBuffer(3, 2, 1).restore(tmp_path / "replay.safetensors")  # a smaller ring keeps the newest
    assert small.data["rewards"].tolist() == [4, 5, 6] and small.size == 3
    big, again = (ReplayBuffer(c, 2, 1).restore(tmp_path / "replay.safetensors") for c in (100, 5))
    assert (big.size, big.ptr) == (5, 5)
    for k in ReplayBuffer.KEYS:
        np.testing.assert_array_equal(big.data[k][:5], again.data[k])


def test_damaged_or_foreign_buffer_files_are_refused_by_name(tmp_path):
    buf = ReplayBuffer(8, 2, 1)
    buf.add(**rows(4))
    path = tmp_path / "replay.safetensors"
    buf.save(path)
    with pytest.raises(ReplayBufferError, match="obs has shape"):
        ReplayBuffer(10_000, 3, 1).restore(path)  # another task's observation size
    path.write_bytes(path.read_bytes()[:40])  # truncated
    with pytest.raises(ReplayBufferError, match="replay.safetensors: not a readable replay buffer"):
        ReplayBuffer(10_000, 2, 1).restore(path)
    with pytest.raises(ReplayBufferError, match="missing"):
        ReplayBuffer(10_000, 2, 1).restore(tmp_path / "none.safetensors")
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(3, np.float32)}, str(path))
    with pytest.raises(ReplayBufferError, match="not an embody replay buffer"):
        ReplayBuffer(10_000, 2, 1).restore(path)


def test_soft_targets_stop_at_terminals_and_the_temperature_tracks_the_entropy():
    """Reward 1 everywhere, γ 0.5: Q → 1 on terminal transitions, → 1/(1−γ) = 2 (minus the entropy term, kept
    small by a tiny α) where the episode goes on."""
    torch.manual_seed(0)
    policy = SACPolicy(3, 2, [32, 32], init_alpha=1e-4)
    cfg = SACConfig(gamma=0.5, tau=0.05, batch_size=128, lr=1e-3, alpha_lr=0.0, buffer_size=1000)
    sac = SAC(None, policy, cfg)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(1000, 3)).astype(np.float32)
    terminal = (np.arange(1000) < 500).astype(np.float32)
    obs[:, 0] = terminal * 4  # the critics can tell the two kinds apart
    sac.buffer.add(
        obs=obs, actions=rng.uniform(-1, 1, (1000, 2)), rewards=np.ones(1000), next_obs=obs, terminal=terminal
    )
    for _ in range(600):
        sac.update()
    with torch.no_grad():
        q = torch.minimum(*policy.q(torch.as_tensor(obs), torch.zeros(1000, 2))).numpy()
    assert abs(q[:500].mean() - 1.0) < 0.15 and abs(q[500:].mean() - 2.0) < 0.3, (q[:500].mean(), q[500:].mean())
    # the temperature: with a learning rate it falls when the policy's entropy is above the target
    sac2 = SAC(None, SACPolicy(3, 2, [32, 32]), SACConfig(batch_size=64, alpha_lr=1e-2, buffer_size=1000))
    sac2.buffer = sac.buffer
    alphas = [sac2.update()["alpha"] for _ in range(50)]
    assert alphas[-1] < alphas[0] == pytest.approx(1.0)


def test_the_torch_init_is_nn_linears_for_actor_and_critics_and_is_saved_with_the_policy(tmp_path):
    """``init="torch"`` (SB3's SAC): every layer's weights and biases uniform within ±1/√fan_in, the critics'
    batched layers as the actor's; the default stays orthogonal; a new set of critics keeps the choice."""
    from embody.policies.checkpoint import load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    policy = SACPolicy(40, 4, [256, 256], init="torch")
    layers = [(m.weight.T, m.bias) for m in policy.actor if isinstance(m, torch.nn.Linear)]
    layers += [(w[k], b[k, 0]) for w, b in zip(policy.critics.weights, policy.critics.biases) for k in range(2)]
    layers = [(w.detach(), b.detach()) for w, b in layers]
    for w, b in layers:
        bound = w.shape[0] ** -0.5  # (in, out)
        assert float(w.abs().max()) <= bound and float(b.abs().max()) <= bound
        assert float(w.std()) == pytest.approx(bound / 3**0.5, rel=0.1)  # uniform, not clustered at 0
    orthogonal = SACPolicy(40, 4, [256, 256]).critics.weights[1][0]  # (in, out), gain √2
    torch.testing.assert_close(orthogonal.T @ orthogonal, 2 * torch.eye(256), atol=1e-4, rtol=0)
    policy.reset_critics()
    assert policy.critics.weights[0].abs().max() <= 44**-0.5
    save_checkpoint(tmp_path / "ckpt", policy, {"task": "t"})
    assert load_checkpoint(tmp_path / "ckpt").policy.init == "torch"
    with pytest.raises(ValueError, match="unknown init 'xavier'; valid: orthogonal, torch"):
        SACPolicy(40, 4, init="xavier")
    from embody.runs import build_env
    from embody.train import TrainConfig

    with pytest.raises(ValueError, match="sac.init: 'xavier' is not one of orthogonal, torch"):  # before a run folder
        build_env(TrainConfig(task="cartpole-swingup", algo="sac", sac=SACConfig(init="xavier")))


def test_train_with_sac_writes_a_run_and_resumes_with_its_buffer(tmp_path, capsys):
    from embody.cli import main
    from embody.runs import load_run_checkpoint

    out = tmp_path / "run"
    sets = ["sac.learning_starts=300", "sac.log_every=400", "sac.hidden=[32,32]", "sac.utd=0.25", "video=false"]
    argv = ["train", "cartpole-swingup", "--algo", "sac", "--envs", "8", "--steps", "800", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)] + ["--set", "eval_episodes=2"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [400, 800] and rows[-1][
        "updates"
    ] == 126  # (800 − 296) · 0.25: from the vector step that reaches 300
    assert (out / "replay.safetensors").exists() and (out / "eval.json").exists()
    ck = load_run_checkpoint(out)
    assert isinstance(ck.policy, SACPolicy) and ck.meta["env_steps"] == 800
    assert main(["train", "--resume", str(out), "--steps", "1200"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [400, 800, 1200] and rows[-1]["updates"] == 226
    assert ReplayBuffer(10_000, 5, 1).restore(out / "replay.safetensors").size == 1200  # cartpole: 5 observations
    (out / "replay.safetensors").write_bytes(b"garbage")
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--steps", "1600"]) == 2
    assert "replay.safetensors: not a readable replay buffer" in capsys.readouterr().err
