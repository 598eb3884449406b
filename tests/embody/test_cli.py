"""CLI smoke runs: list, train, eval, video, resume and the bad-input paths."""

import json
import subprocess
import sys

import pytest

from embody.cli import main
from embody.video import read_frames


def run(*args):
    return subprocess.run([sys.executable, "-m", "embody.cli", *args], capture_output=True, text=True, timeout=300)


def test_list_names_everything(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("cartpole", "h1_2", "peg_arm", "mujoco", "cartpole-swingup", "ActorCritic", "extras"):
        assert word in out


def test_unknown_names_are_one_clear_line(tmp_path):
    r = run("train", "cartpole-swingdown")
    assert r.returncode == 2 and "unknown task 'cartpole-swingdown'; valid: " in r.stderr
    assert "arm-reach, cartpole-swingup" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("train", "cartpole-swingup", "--sim", "nosim", "--steps", "10", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "unknown simulator 'nosim'" in r.stderr
    assert not (tmp_path / "x").exists()  # a bad config leaves no run directory behind
    r = run("eval", "/nonexistent/run")
    assert r.returncode == 2 and "config.yaml is missing" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_train_eval_video_resume(tmp_path):
    out = tmp_path / "run"
    r = run(
        "train",
        "cartpole-swingup",
        "--envs",
        "8",
        "--steps",
        "2048",
        "--out",
        str(out),
        "--set",
        "ppo.n_steps=64",
        "--set",
        "eval_episodes=2",
    )
    assert r.returncode == 0, r.stderr
    for name in (
        "config.yaml",
        "metrics.jsonl",
        "metrics.csv",
        "learning_curve.png",
        "eval.json",
        "eval.mp4",
        "checkpoint/model.safetensors",
        "checkpoint/checkpoint.json",
    ):
        assert (out / name).is_file(), name
    assert "steps/s" in r.stderr and "<" in r.stderr  # progress with rate and ETA
    summary = json.loads((out / "eval.json").read_text())
    assert summary["episodes"] == 2 and summary["max_return"] == 250.0

    r = run("eval", str(out), "--episodes", "2")
    assert r.returncode == 0 and json.loads(r.stdout)["episodes"] == 2
    r = run("video", str(out), "--out", str(tmp_path / "v.mp4"), "--size", "96x64", "--overlay")
    assert r.returncode == 0 and read_frames(tmp_path / "v.mp4").shape[1:] == (64, 96, 3)

    r = run("sim2sim", str(out), "--episodes", "2")  # every installed simulator
    assert r.returncode == 0, r.stderr
    report = json.loads((out / "sim2sim" / "report.json").read_text())
    assert {x["sim"] for x in report} >= {"mujoco"} and (out / "sim2sim" / "returns.png").is_file()
    assert next(x for x in report if x["sim"] == "mujoco")["return_vs_trained_sim"] == 1.0

    rows_before = len((out / "metrics.jsonl").read_text().splitlines())
    r = run("train", "--resume", str(out), "--steps", "4096", "--set", "eval_episodes=3")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) > rows_before and rows[-1]["env_steps"] >= 4096
    assert rows[-1]["iteration"] == rows[rows_before - 1]["iteration"] + (len(rows) - rows_before)
    assert "eval_episodes: 3" in (out / "config.yaml").read_text()  # --set applies on resume

    r = run("train", "cartpole-swingup", "--out", str(out), "--steps", "10")
    assert r.returncode != 0 and "--resume" in r.stderr
