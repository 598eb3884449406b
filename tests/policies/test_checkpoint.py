"""Checkpoints: exact round trips, clear refusals, no pickle, atomic saves."""

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from policy_helpers import small_mlp, small_rnn

from embody.policies import checkpoint as ckpt_mod
from embody.policies.checkpoint import CheckpointError, load_checkpoint, read_meta, save_checkpoint

SPEC = {"task": "toy", "obs_size": 3, "privileged_size": 2, "action_size": 2}


def trained(policy: torch.nn.Module) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """Non-trivial weights, normalizer statistics and Adam state."""
    policy.update_normalizers(torch.randn(64, 3) * 4 + 1, torch.randn(64, 5) * 2 - 1)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _ in range(3):
        loss = sum(p.pow(2).sum() for p in policy.parameters())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return policy, opt


def make(kind: str) -> torch.nn.Module:
    return small_mlp(3, 2, 2) if kind == "mlp" else small_rnn(3, 2, 2, rnn_type=kind)


@pytest.fixture
def saved(tmp_path) -> Path:
    policy, opt = trained(make("mlp"))
    return save_checkpoint(tmp_path / "run" / "checkpoint", policy, SPEC, {"iteration": 7}, opt)


@pytest.mark.parametrize("kind", ["mlp", "gru", "lstm"])
def test_round_trip(tmp_path, kind):
    policy, opt = trained(make(kind))
    save_checkpoint(tmp_path / "ck", policy, SPEC, {"env_steps": 123}, opt)
    ck = load_checkpoint(tmp_path / "ck", expect_spec=SPEC)
    assert type(ck.policy) is type(policy)
    assert ck.spec == SPEC and ck.meta == {"env_steps": 123}
    want, got = policy.state_dict(), ck.policy.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0, msg=k)
    assert float(ck.policy.obs_norm.count) == float(policy.obs_norm.count) > 1
    new_opt = torch.optim.Adam(ck.policy.parameters(), lr=1e-3)
    new_opt.load_state_dict(ck.optimizer_state)
    want_state, got_state = opt.state_dict()["state"], new_opt.state_dict()["state"]
    assert sorted(got_state) == sorted(want_state)
    for i, a in want_state.items():
        for key in a:
            torch.testing.assert_close(torch.as_tensor(got_state[i][key]), torch.as_tensor(a[key]), rtol=0, atol=0)
    assert new_opt.state_dict()["param_groups"][0]["lr"] == 1e-3
    policy.reset()
    ck.policy.reset()
    for _ in range(4):  # identical actions, including any recurrent state built over steps
        x = torch.randn(6, 3)
        torch.testing.assert_close(ck.policy.act(x), policy.act(x), rtol=0, atol=0)


def test_missing_meta(tmp_path):
    (tmp_path / "ck").mkdir()
    with pytest.raises(CheckpointError, match="checkpoint.json is missing"):
        load_checkpoint(tmp_path / "ck")


def test_truncated_weights(saved):
    model = saved / "model.safetensors"
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match the checksum"):
        load_checkpoint(saved)


def test_missing_weights(saved):
    (saved / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model.safetensors is missing"):
        load_checkpoint(saved)


def test_meta_not_json(saved):
    (saved / "checkpoint.json").write_text('{"format": "embody.policy", "format_ver')
    with pytest.raises(CheckpointError, match=r"checkpoint\.json is not valid JSON"):
        load_checkpoint(saved)


@pytest.mark.parametrize("doc", [{"format": "someone.else", "format_version": 1}, [1, 2, 3], "hello"])
def test_foreign_json(saved, doc):
    (saved / "checkpoint.json").write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=r"checkpoint\.json is not an embody policy checkpoint"):
        load_checkpoint(saved)


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_unsupported_format_version(saved, version):
    _edit_meta(saved, format_version=version)
    with pytest.raises(CheckpointError, match=r"checkpoint\.json: checkpoint format version .* is not supported"):
        load_checkpoint(saved)


def test_spec_mismatch(saved):
    with pytest.raises(CheckpointError, match="different observation/action spec") as e:
        load_checkpoint(saved, expect_spec={**SPEC, "obs_size": 4})
    assert str(saved) in str(e.value)
    with pytest.raises(CheckpointError, match="different observation/action spec"):
        load_checkpoint(saved, expect_spec={**SPEC, "task": "other"})


def test_weights_that_do_not_fit_the_class(saved):
    kwargs = read_meta(saved)["policy_kwargs"]
    _edit_meta(saved, policy_kwargs={**kwargs, "config": {**kwargs["config"], "actor_hidden": [16]}})
    with pytest.raises(CheckpointError, match="the weights do not fit policy 'ActorCritic'") as e:
        load_checkpoint(saved)
    assert str(saved) in str(e.value)
    _edit_meta(saved, policy_kwargs=kwargs, policy_class="RecurrentActorCritic")
    with pytest.raises(CheckpointError, match="the weights do not fit policy 'RecurrentActorCritic'"):
        load_checkpoint(saved)


class _Payload:
    """Unpickling this object writes ``marker`` (what a malicious pickle would do)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


def test_stray_pickles_are_never_unpickled(saved, tmp_path):
    armed = tmp_path / "armed"
    run, args = _Payload(armed).__reduce__()
    run(*args)  # the payload works: what unpickling would call plants the marker
    assert armed.exists()
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))
    for folder in (saved, saved.parent):  # the checkpoint dir and the run dir
        for name in ("model.pt", "checkpoint.pkl", "optimizer.pt", "policy.pth"):
            (folder / name).write_bytes(payload)
    ck = load_checkpoint(saved, expect_spec=SPEC)
    assert ck.policy.act(torch.zeros(1, 3)).shape == (1, 2)
    read_meta(saved)
    assert not marker.exists()


def test_crash_while_writing_weights_keeps_the_old_checkpoint(saved, monkeypatch):
    _crash_during_save(saved, monkeypatch, "safetensors.torch.save_file")


def test_crash_while_writing_meta_keeps_the_old_checkpoint(saved, monkeypatch):
    _crash_during_save(saved, monkeypatch, "json.dumps")


def test_save_over_a_leftover_old_directory(saved):
    """A save killed between its two renames leaves ``.checkpoint.old``; the next save must work."""
    leftover = saved.with_name(f".{saved.name}.old")
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"stale")
    save_checkpoint(saved, small_mlp(3, 2, 2), SPEC)
    load_checkpoint(saved, expect_spec=SPEC)
    assert not leftover.exists()


def _crash_during_save(saved: Path, monkeypatch, target: str) -> None:
    before = {p.name: p.read_bytes() for p in saved.iterdir()}
    good = load_checkpoint(saved).policy.state_dict()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(target, crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(saved, small_mlp(3, 2, 2), SPEC, {"iteration": 8})
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == before
    ck = load_checkpoint(saved, expect_spec=SPEC)
    assert ck.meta == {"iteration": 7}
    for k, v in good.items():
        torch.testing.assert_close(ck.policy.state_dict()[k], v, rtol=0, atol=0)
    assert sorted(os.listdir(saved.parent)) == ["checkpoint"]  # no temporary directories left


def _edit_meta(directory: Path, **fields) -> None:
    path = directory / "checkpoint.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_registered_classes():
    assert {"ActorCritic", "RecurrentActorCritic"} <= set(ckpt_mod.POLICY_CLASSES.names())
