"""The sim-to-sim gate reports a simulator that cannot serve a task instead of failing."""

import json

import pytest

from embody.sims import installed_simulators


@pytest.mark.slow
@pytest.mark.skipif("genesis" not in installed_simulators(), reason="needs the genesis extra (no F/T sensing)")
def test_sim2sim_names_an_unsupported_simulator_and_still_reports(tmp_path):
    from embody.sim2sim import compare, write_report
    from embody.train import resolve_config, train

    cfg = resolve_config("arm-reach", overrides=["steps=1", "n_envs=8", "video=false", "eval_episodes=2"])
    train(cfg, tmp_path / "run")
    rows = compare(tmp_path / "run", ["mujoco", "genesis"], episodes=2)
    assert rows[0]["sim"] == "mujoco" and rows[0]["return_vs_trained_sim"] == 1.0
    assert rows[1]["sim"] == "genesis" and "wrench" in rows[1]["unsupported"]
    write_report(rows, tmp_path / "report")
    assert "| genesis | unsupported:" in (tmp_path / "report" / "report.md").read_text()
    assert len(json.loads((tmp_path / "report" / "report.json").read_text())) == 2
