"""Blindfolded experts, peg domain: a cloned peg student written as a run directory deploys through
`embody deploy RUN --robot peg_arm --target sim` (loopback DDS, the safety supervisor with its wrist
force limit active)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
pytest.importorskip("cyclonedds", reason="needs the hardware extra")

from embody.papers.blindfolded import peg  # noqa: E402

DOMAIN = 190 + os.getpid() % 10


@pytest.fixture(scope="module")
def student_run(tmp_path_factory):
    torch.set_num_threads(1)
    demos = peg.collect("informed", np.array([[0.003, -0.002]]), episodes_per_task=1, seed=0, n_envs=1)
    student = peg.train_student(demos, hidden=16, epochs=2, seq_len=16, seed=0)
    return peg.write_student_run(student, tmp_path_factory.mktemp("bf-peg") / "run", {"level": "informed", "m": 1})


def test_the_run_directory_holds_a_peg_insert_config_and_a_loadable_student(student_run):
    from embody.runs import build_env, load_run_checkpoint
    from embody.train import resolve_config

    assert (student_run / "config.yaml").exists() and (student_run / "checkpoint").is_dir()
    policy, meta = peg.load_student_run(student_run)
    assert meta == {"level": "informed", "m": 1}
    cfg = resolve_config("peg-insert", file=str(student_run / "config.yaml"))
    assert cfg.task == "peg-insert" and cfg.env["max_episode_steps"] == peg.MAX_EPISODE_STEPS
    env = build_env(cfg, n_envs=1, evaluation=True)
    load_run_checkpoint(student_run, expect=env)  # fits the plain peg-insert env
    obs, _ = env.reset()
    assert policy.act(torch.as_tensor(obs)).shape == (1, 3)
    env.close()


@pytest.mark.slow
def test_a_cloned_student_deploys_on_the_simulated_arm_under_the_wrist_force_limit(student_run):
    from embody.hardware.arms.sim import MAX_WRIST_FORCE_N, ArmCodec

    # the deploy path's supervisor is the driver's default: the wrist-force limit is on
    assert ArmCodec.supervisor_config(None).max_wrench_n == MAX_WRIST_FORCE_N > 0
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "embody.cli",
            "deploy",
            str(student_run),
            "--robot",
            "peg_arm",
            "--target",
            "sim",
            "--domain",
            str(DOMAIN),
            "--duration",
            "2.0",
            "--ramp",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "{" in out.stdout, out.stderr[-2000:]
    summary = json.loads(out.stdout[out.stdout.index("{") :])
    phases = [(e["from"], e["to"]) for e in summary["events"]]
    assert phases[:3] == [("ZERO_TORQUE", "RAMP"), ("RAMP", "HOLD"), ("HOLD", "POLICY")], summary["events"]
    assert summary["policy_steps"] > 0
    if summary["ended_in"] == "DAMPING":  # a fault must have damped it, for a stated reason
        assert out.returncode == 1 and summary["counters"].get("faults", 0) >= 1 and summary["events"][-1]["reason"]
    else:  # ran its 2 s without a wrist-force (or any other) fault; the exit damps on "driver closing"
        assert out.returncode == 0 and summary["ended_in"] == "POLICY" and summary["policy_s"] >= 2.0
        assert summary["counters"].get("wrench", 0) == 0 and summary["events"][-1]["reason"] == "driver closing"
