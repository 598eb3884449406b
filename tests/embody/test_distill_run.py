"""``embody distill``: the scripted peg-insertion expert distilled into a recurrent student."""

import json

import pytest

from embody.cli import main
from embody.config import ConfigError
from embody.distill import resolve_distill_config
from embody.train import evaluate_run


def test_distill_config_resolution_and_errors():
    cfg = resolve_distill_config("peg-insert", "tiny", ["dagger.iterations=2", "env.hole_xy_range=0.005"], seed=3)
    assert (cfg.dagger.iterations, cfg.env["hole_xy_range"], cfg.seed, cfg.n_envs) == (2, 0.005, 3, 16)
    assert (cfg.teacher, cfg.reference) == ("contact", "hole")
    assert resolve_distill_config("peg-insert", "paper").dagger.iterations > cfg.dagger.iterations
    with pytest.raises(ConfigError, match="no scripted expert for task 'cartpole-swingup'"):
        resolve_distill_config("cartpole-swingup")
    with pytest.raises(ConfigError, match="unknown scale 'huge'"):
        resolve_distill_config("peg-insert", "huge")
    with pytest.raises(ConfigError, match="unknown config key"):
        resolve_distill_config("peg-insert", "tiny", ["dagger.nope=1"])


def test_distill_cli_reports_bad_config(capsys, tmp_path):
    out = tmp_path / "run"
    assert main(["distill", "peg-insert", "--out", str(out), "--set", "env.clearance=-0.001"]) == 2
    assert "clearance must lie in" in capsys.readouterr().err
    assert not out.exists()  # nothing left behind


@pytest.mark.slow
def test_tiny_distillation_end_to_end(tmp_path):
    """`embody distill peg-insert --scale tiny` (~1 min on 2 cores) writes a run that `embody eval` reads."""
    run = tmp_path / "run"
    assert (
        main(
            [
                "distill",
                "peg-insert",
                "--scale",
                "tiny",
                "--out",
                str(run),
                "--set",
                "dagger.iterations=2",
                "--set",
                "eval_episodes=16",
            ]
        )
        == 0
    )
    for name in ("config.yaml", "distill.yaml", "metrics.jsonl", "metrics.csv", "eval.json", "checkpoint"):
        assert (run / name).exists(), name
    result = json.loads((run / "eval.json").read_text())
    assert result["expert"]["success_rate"] >= 0.9  # the privileged expert inserts
    assert result["teacher"]["success_rate"] >= 0.9
    assert 0.0 <= result["student"]["success_rate"] <= 1.0 and "peak_force_max" in result["student"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2] and rows[-1]["samples"] == 2 * 16 * 150
    summary = evaluate_run(run, episodes=4)  # the student loads like any trained run
    assert summary["task"] == "peg-insert" and "success_rate" in summary
