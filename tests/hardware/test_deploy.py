"""Deploy: the deployed observation is the training observation, and the CLI runs the whole path."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from embody.config import save_yaml
from embody.hardware.deploy import PolicyRunner
from embody.hardware.interface import HardwareError
from embody.policies.actor_critic import ActorCritic
from embody.policies.checkpoint import save_checkpoint
from embody.train import build_env, policy_spec, resolve_config

DOMAIN = 200 + os.getpid() % 30


def untrained_run(task: str, out):
    """A run directory as `embody train` writes it, with freshly initialized weights."""
    cfg = resolve_config(task, overrides=["n_envs=1"])
    env = build_env(cfg, evaluation=True)
    out.mkdir(parents=True)
    save_yaml(cfg, out / "config.yaml")
    torch.manual_seed(0)
    policy = ActorCritic(env.observation_size, env.action_size, env.privileged_size, cfg.policy)
    save_checkpoint(out / "checkpoint", policy, policy_spec(env), {"env_steps": 0})
    env.close()
    return out


@pytest.fixture(scope="module")
def velocity_run(tmp_path_factory):
    return untrained_run("h1_2-velocity", tmp_path_factory.mktemp("deploy") / "run")


@pytest.mark.parametrize("task", ["h1_2-velocity", "h1_2-stand"])
def test_deployed_observation_equals_training_observation_bit_for_bit(task, tmp_path):
    run = untrained_run(task, tmp_path / "run")
    runner = PolicyRunner(run, commands=np.array([0.5, 0.0, 0.2]) if task == "h1_2-velocity" else None)
    cfg = resolve_config(task, overrides=["n_envs=1", "env.randomization.enabled=false"])
    env = build_env(cfg, evaluation=True, seed=cfg.seed)
    env.reset()
    # both tasks start their episode from the same random stream: same commands, clips and frames
    env.task.rng, runner.task.rng = np.random.default_rng(7), np.random.default_rng(7)
    env.task.on_reset(np.array([0]))
    runner.reset()
    if runner.commands is not None:
        env.task.set_commands(np.array([0]), runner.commands)
    for _ in range(25):
        state = env.sim.state()
        trained = env.task.observe(state)
        deployed = runner.observe(state.observed())
        assert deployed.dtype == trained.dtype and np.array_equal(deployed, trained)
        command = runner.command(state.observed())
        with torch.no_grad():
            action = runner.policy.act(torch.as_tensor(trained, dtype=torch.float32)).numpy()
        env.step(action)
        if runner.commands is not None:
            env.task.set_commands(np.array([0]), runner.commands)
        assert command.is_finite() and command.q.shape == (runner.robot.n_joints,)
    env.close()


def deploy_cli(*args, timeout=180):
    return subprocess.run(
        [sys.executable, "-m", "embody.cli", "deploy", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def test_deploy_refuses_a_robot_the_run_was_not_trained_for(velocity_run):
    out = deploy_cli(velocity_run, "--robot", "peg_arm")
    assert out.returncode == 2 and "trained for robot 'h1_2', not 'peg_arm'" in out.stderr


def test_deploy_refuses_a_log_that_is_neither_rerun_nor_mcap(velocity_run, tmp_path):
    out = deploy_cli(velocity_run, "--robot", "h1_2", "--log", tmp_path / "log.txt")
    assert out.returncode == 2 and "log.txt: a log is a Rerun .rrd or an MCAP .mcap file" in out.stderr


def test_deploy_refuses_a_command_the_task_cannot_take(velocity_run):
    out = deploy_cli(velocity_run, "--robot", "h1_2", "--command", "0.5,0")  # was a ValueError traceback
    assert (
        out.returncode == 2
        and "--command 0.5,0: h1_2-velocity: commands must be finite with shape (1, 3)" in out.stderr
    )
    with pytest.raises(HardwareError, match="--command 9,0,0: .* vx = 9 lies outside the trained range"):
        PolicyRunner(velocity_run, commands=np.array([9.0, 0.0, 0.0]))


def test_deploy_refuses_an_unknown_target(velocity_run):
    out = deploy_cli(velocity_run, "--robot", "h1_2", "--target", "serial:/dev/ttyUSB0")
    assert out.returncode == 2 and "unknown deploy target 'serial:/dev/ttyUSB0'" in out.stderr


@pytest.mark.slow
def test_deploy_runs_the_whole_sequence_on_the_simulated_robot(velocity_run, tmp_path):
    """zero torque → ramp → hold → band released → policy → damping at exit, over loopback DDS,
    recorded into a dataset."""
    out = deploy_cli(
        velocity_run,
        "--robot",
        "h1_2",
        "--target",
        "sim",
        "--domain",
        DOMAIN,
        "--duration",
        1.0,
        "--ramp",
        0.5,
        "--command",
        "0,0,0",
        "--record",
        tmp_path / "deployed",
        "--log",
        tmp_path / "deploy.mcap",
    )
    summary = json.loads(out.stdout[out.stdout.index("{") :])
    phases = [(e["from"], e["to"]) for e in summary["events"]]
    assert phases[:3] == [("ZERO_TORQUE", "RAMP"), ("RAMP", "HOLD"), ("HOLD", "POLICY")], summary["events"]
    # an untrained policy may fall once the band is released: then the supervisor must have damped it
    if summary["ended_in"] == "DAMPING":
        assert out.returncode == 1 and "fall" in summary["events"][-1]["reason"]
    else:
        assert out.returncode == 0 and summary["policy_s"] >= 1.0
    assert summary["policy_steps"] > 0 and summary["driver"]["crc_errors"] == 0
    assert "'band': False" in summary["robot_sim"]  # released when the policy started
    assert "'base_pos_m': [" in summary["robot_sim"]  # where the simulated robot ended up
    from embody.datasets.format import load

    episode = load(tmp_path / "deployed").episode(0)
    assert len(episode["action"]) == summary["policy_steps"]
    assert np.isfinite(episode["embody.sent.q"]).all() and episode["embody.sent.kp"][0].any()
    assert_log_holds_the_supervisor_events(tmp_path, summary)


def assert_log_holds_the_supervisor_events(tmp_path, summary):
    """The MCAP log written by --log, and the same recording written as Rerun: the supervisor's phase changes with
    their reasons on the recording's timeline, the asked and sent targets of every joint."""
    pytest.importorskip("foxglove", reason="needs the viz extra")
    from mcap.reader import make_reader
    from mcap_protobuf.decoder import DecoderFactory
    from rerun.chunk import RrdReader

    from embody.hardware.recorder import write_log

    with open(tmp_path / "deploy.mcap", "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        logged = [m.message for _, _, _, m in reader.iter_decoded_messages(topics=["/events"])]
        topics = {c.topic for c in reader.get_summary().channels.values()}
    assert any("supervisor HOLD -> POLICY" in text for text in logged), logged
    assert {"/joints/asked_target", "/joints/sent_target", "/signals/supervisor", "/joint_states"} <= topics
    write_log(tmp_path / "deployed", summary["events"], tmp_path / "deploy.rrd")
    entities = {c.entity_path for c in RrdReader(tmp_path / "deploy.rrd").stream().to_chunks()}
    assert {
        "/events",
        "/joints/left_leg/left_knee_joint/asked_target",
        "/signals/supervisor/clamped_joints",
    } <= entities
