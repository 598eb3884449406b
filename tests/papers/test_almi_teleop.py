"""ALMI's teleoperated upper body: hand targets from an input device through IK into the reference the upper
policy tracks, in the task and in a deploy session driven by posted keyboard events."""

import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from embody.papers.almi.teleop import HandTargets
from embody.robots import get_robot


def test_hand_targets_move_the_selected_wrist_within_reach_ranges_and_speeds():
    spec = get_robot("h1_2")
    hands = HandTargets(spec, dt=0.02, speed=0.25, reach=0.1)
    start = {s: hands.wrist_position(s) for s in ("left", "right")}
    refs = [hands.update(np.array([1.0, 0.0, 0.0]), set()) for _ in range(100)]  # 2 s forward: reach caps it
    assert hands.wrist_position("left")[0] - start["left"][0] == pytest.approx(0.1, abs=0.01)
    np.testing.assert_allclose(hands.wrist_position("right"), start["right"], atol=1e-6)  # the other hand stays
    q = np.array(refs)
    assert (q >= spec.lower - 1e-12).all() and (q <= spec.upper + 1e-12).all()
    assert (np.abs(np.diff(q, axis=0)) <= spec.velocity_limit * 0.02 + 1e-12).all()
    moved = np.flatnonzero(np.abs(q[-1] - spec.default_pose) > 1e-6)
    assert set(spec.joint_names[j] for j in moved) <= {
        f"left_{j}_joint" for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch")
    }
    hands.update(np.zeros(3), {"grip"})  # switch hands
    for _ in range(50):
        hands.update(np.array([0.0, 0.0, 1.0]), set())
    assert hands.wrist_position("right")[2] - start["right"][2] == pytest.approx(0.1, abs=0.01)


def test_the_teleoperated_reference_replaces_the_clips():
    from embody.papers.almi.tasks import TRACKED, AlmiConfig
    from embody.sims.vec_env import make_env

    cfg = AlmiConfig()
    cfg.randomization.enabled = False
    env = make_env("almi", n_envs=1, seed=0, config=cfg)
    env.reset()
    task = env.task
    for _ in range(20):
        task.teleop(np.array([1.0, 0.0, 0.5]), set())
    env.step(np.zeros((1, 21)))
    ref = task.hands.q
    np.testing.assert_allclose(task.reference[0, task.upper], ref[task.upper])
    tracked = [task.robot.joint_names.index(n) for n in TRACKED]
    obs = task.upper_observe(env.sim.state())
    np.testing.assert_allclose(obs[0, 6:15], ref[tracked] - task.q0[tracked], atol=1e-6)


@pytest.mark.slow
def test_a_deploy_session_takes_posted_keyboard_events_as_hand_targets(tmp_path):
    """Over loopback DDS on robot-sim: a held Up key moves the left hand's reference forward all session."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    pygame = pytest.importorskip("pygame")
    from embody.datasets.format import load
    from embody.hardware.deploy import DeployConfig, deploy
    from embody.hardware.teleop import init_pygame
    from embody.papers.almi.train import compose, make_config, untrained_run

    whole = tmp_path / "whole"
    compose(
        untrained_run("almi-lower", tmp_path / "lower"),
        untrained_run("almi-upper", tmp_path / "upper"),
        whole,
        make_config("tiny"),
    )
    init_pygame()
    pygame.event.clear()
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_UP, mod=0, unicode="", scancode=0))
    cfg = DeployConfig(
        robot="h1_2",
        domain=170 + os.getpid() % 30,  # DDS domain ids stay below 233
        duration_s=1.0,
        ramp_s=0.5,
        teleop="keyboard",
        record=tmp_path / "ds",
    )
    summary = deploy(whole, cfg, commands=np.zeros(3))
    assert summary["policy_steps"] > 10, summary
    obs = load(tmp_path / "ds").episode(0)["embody.observation"]
    reference = obs[:, 77 + 6 : 77 + 15]  # the tracked joints' reference − q0, in the upper observation
    assert np.abs(reference[-1]).max() > np.abs(reference[0]).max() + 0.05  # it moved with the key held


def test_the_committed_almi_policy_walks_forward_while_boxing():
    """The committed checkpoint (paper-scale study, seed 0) against today's tasks: 5 s at 0.5 m/s forward with a
    clip of a family no stage trained on (boxing), randomization off: no fall, and forward progress (a regression
    guard; its numbers and its deploy status are in the README)."""
    import torch

    from embody.papers.almi import POLICY
    from embody.robots.motion import generate_library
    from embody.runs import build_env, load_run, load_run_checkpoint

    cfg, _ = load_run(POLICY)
    cfg.env["randomization"]["enabled"] = False
    clip = generate_library(get_robot("h1_2"), seed=0, families=("boxing",))[0]
    cfg.env["motion"]["clip"] = str(clip.save(Path(tempfile.mkdtemp()) / "boxing.safetensors"))
    env = build_env(cfg, n_envs=2, seed=0, evaluation=True)
    policy = load_run_checkpoint(POLICY, expect=env).policy
    env.reset()
    start = env.sim.state().privileged.base_pos.copy()
    for _ in range(250):
        env.task.set_commands(np.arange(2), np.tile([0.5, 0.0, 0.0], (2, 1)))  # as `embody deploy --command`
        obs = env.task.observe(env.sim.state())
        _, _, terminated, truncated, _ = env.step(policy.act(torch.as_tensor(obs)).numpy())
        assert not (terminated | truncated).any()
    covered = env.sim.state().privileged.base_pos[:, 0] - start[:, 0]
    env.close()
    assert (covered > 0.5).all(), covered


def _deploy_committed(tmp_path, teleop: str | None) -> tuple[dict, np.ndarray]:
    """The committed checkpoint on robot-sim over loopback DDS for 20 s at 0.5 m/s forward, the upper body on a
    boxing clip (a family no stage trained on) or on a teleop device; the summary and where the robot ended."""
    from embody.hardware.deploy import DeployConfig, deploy
    from embody.papers.almi import POLICY
    from embody.robots.motion import generate_library

    clip = generate_library(get_robot("h1_2"), seed=0, families=("boxing",))[0].save(tmp_path / "boxing.safetensors")
    cfg = DeployConfig(
        robot="h1_2", domain=140 + os.getpid() % 30, duration_s=20.0, teleop=teleop, record=tmp_path / "ds"
    )
    summary = deploy(POLICY, cfg, [f"env.motion.clip={clip}"], commands=np.array([0.5, 0.0, 0.0]))
    assert summary["exit_code"] == 0 and summary["fault"] is None, summary
    assert summary["policy_steps"] > 950, summary  # 20 s at 50 Hz
    faults = [k for k in ("faults", "fall", "over_speed", "stale_state") if summary["counters"][k]]
    assert not faults, summary["counters"]
    end = re.search(r"'base_pos_m': \[([^\]]+)\]", summary["robot_sim"]).group(1)
    return summary, np.array([float(x) for x in end.split(",")])


@pytest.mark.slow
def test_the_committed_almi_policy_deploys_20_s_walking_while_boxing(tmp_path):
    """The issue's deploy check: no supervisor fault, and it walks forward, upright (5.6-5.8 m measured)."""
    _, end = _deploy_committed(tmp_path, teleop=None)
    assert end[0] > 2.0 and end[2] > 0.9, end


@pytest.mark.slow
def test_the_committed_almi_policy_deploys_20_s_under_keyboard_teleop(tmp_path):
    """The same in a teleop session: a posted, held Up key takes the left hand's target 0.3 m forward (the reach
    limit) within 1.2 s and keeps it there; no fault, upright. It turns right instead of walking forward (0.4 m back,
    1.4 m to the right; README)."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    pygame = pytest.importorskip("pygame")
    from embody.datasets.format import load
    from embody.hardware.teleop import init_pygame

    init_pygame()
    pygame.event.clear()
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_UP, mod=0, unicode="", scancode=0))
    _, end = _deploy_committed(tmp_path, teleop="keyboard")
    assert end[2] > 0.9, end
    reference = load(tmp_path / "ds").episode(0)["embody.observation"][:, 77 + 6 : 77 + 15]
    assert np.abs(reference[-1]).max() > np.abs(reference[0]).max() + 0.05  # the hand's reference moved
