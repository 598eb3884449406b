"""papers/blindfolded/teleop.py: human demonstrations of peg-insert through the arm's RobotInterface.

End to end on the real path: `embody robot-sim peg_arm` in its own process on loopback DDS, the peg
arm's DDS driver with its safety supervisor, the real KeyboardInput reading real pygame events (SDL's
dummy video driver: headless). Only the human is scripted: a ScriptedHuman posts the key events a
person would type, or a faulty device reports out-of-range and NaN moves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import time

import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")

from embody.hardware.teleop import SLOW, KeyboardInput  # noqa: E402
from embody.papers.blindfolded import teleop as T  # noqa: E402
from embody.sims.tasks.peg_insert import OBS_SIZE, PegInsert, PegInsertConfig  # noqa: E402

DOMAIN = 120 + os.getpid() % 25
SEED = 3
# the simulated board's hole is at the nominal place: starting right above it, pressing F inserts
CONFIG = PegInsertConfig(start_xy_noise=0.0)
FAST = {"rate_hz": 25, "home_speed": 0.25, "seed": SEED}


def key(kind, k):
    return pygame.event.Event(kind, key=k, mod=0, unicode="", scancode=0)


class ScriptedHuman:
    """The human at the keyboard: before the n-th read of the real KeyboardInput, posts the pygame
    events ``script[n]`` (the first read of each episode is the one after homing)."""

    name = "keyboard"

    def __init__(self, script: dict[int, list]):
        self.keyboard, self.script, self.reads = KeyboardInput(), script, 0
        pygame.event.clear()

    def read(self):
        for event in self.script.get(self.reads, []):
            pygame.event.post(event)
        self.reads += 1
        return self.keyboard.read()

    def close(self):
        self.keyboard.close()


class FaultyDevice:
    """A broken gamepad: far out-of-range moves for a while, then NaN."""

    name = "gamepad"

    def __init__(self, good_reads: int):
        self.reads, self.good = 0, good_reads

    def read(self):
        self.reads += 1
        return (np.array([50.0, -50.0, 0.0]) if self.reads <= self.good else np.full(3, np.nan)), set()

    def close(self):
        pass


def tree_digest(root) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- on loopback DDS against robot-sim -------------------------------------------------------------------


def connected_driver(connect):
    return connect(T.TeleopTask(CONFIG, SEED).robot)


@pytest.fixture(scope="module")
def recorded(peg_robot_sim, tmp_path_factory):
    """Two demonstrations by keyboard: +x for a while then Enter ("done"); then F held until inserted."""
    out = tmp_path_factory.mktemp("teleop") / "demos"
    script = {
        0: [key(pygame.KEYDOWN, pygame.K_w)],  # episode 0, first read after homing
        8: [key(pygame.KEYUP, pygame.K_w), key(pygame.KEYDOWN, pygame.K_LSHIFT), key(pygame.KEYDOWN, pygame.K_r)],
        12: [key(pygame.KEYDOWN, pygame.K_RETURN)],  # done: reads 1..11 made 11 frames
        13: [key(pygame.KEYUP, pygame.K_r), key(pygame.KEYUP, pygame.K_LSHIFT), key(pygame.KEYDOWN, pygame.K_f)],
    }  # episode 1: down until the task's success test
    human, view = ScriptedHuman(script), io.StringIO()
    t0 = time.monotonic()
    with connected_driver(peg_robot_sim) as driver:
        summary = T.teleoperate(
            driver,
            CONFIG,
            human,
            episodes=2,
            out=out,
            max_steps=200,
            display=T.TerminalDisplay(view, interval_s=0.0),
            **FAST,
        )
    return out, summary, view.getvalue(), time.monotonic() - t0


def test_keyboard_demonstrations_are_recorded_end_to_end(recorded):
    from embody.datasets import load

    out, summary, view, seconds = recorded
    assert not summary["aborted"] and summary["fault"] is None, summary
    assert [e["outcome"] for e in summary["episodes"]] == ["done", "success"], summary
    assert summary["counters"]["faults"] == 0 and summary["phase"] == "POLICY"
    ds = load(out)
    assert ds.num_episodes == 2 == summary["dataset_episodes"]
    assert ds.features["observation.state"]["shape"] == (OBS_SIZE,) and ds.features["action"]["shape"] == (3,)
    obs, act = ds.column("observation.state"), ds.column("action")
    assert obs.shape == (ds.num_frames, OBS_SIZE) and act.shape == (ds.num_frames, 3)
    lo, hi = ds.episode_bounds
    assert (hi - lo).tolist() == [11, summary["episodes"][1]["steps"]]
    ep0, ep1 = ds.episode(0), ds.episode(1)
    np.testing.assert_array_equal(ep0["action"][:7], np.tile([1.0, 0.0, 0.0], (7, 1)))  # W held
    np.testing.assert_allclose(ep0["action"][7:], np.tile([0.0, 0.0, SLOW], (4, 1)), rtol=1e-6)  # Shift+R
    np.testing.assert_array_equal(ep1["action"], np.tile([0.0, 0.0, -1.0], (len(ep1["action"]), 1)))  # F held
    assert ep0["next.done"].tolist() == [False] * 10 + [True]
    assert [T.OUTCOMES[int(ep["embody.teleop.outcome"][0])] for ep in (ep0, ep1)] == ["done", "success"]
    assert (ep0["embody.teleop.device"] == T.DEVICES.index("keyboard")).all()
    assert (ep0["embody.teleop.region"] == 0).all()  # nothing told
    np.testing.assert_allclose(ep1["embody.teleop.hole"][0], [0.5, 0.0, 0.0, 0.0])  # the simulated board
    assert ep1["embody.state.ee_pos"][-1, 2] < 0.0  # going into the hole at the end
    assert ds.info["embody"]["recording"]["device"] == "keyboard"
    assert "height" in view and "wrist force" in view and "(not told)" in view  # learner_view(obs, region) only
    print(f"\nteleop: 2 episodes ({ds.num_frames} frames) on loopback DDS in {seconds:.1f} s")


def test_recorded_observations_are_the_task_observation_of_the_recorded_states(recorded):
    """A fresh task replayed over the recorded states and actions builds the recorded observations bit for bit."""
    from embody.datasets import load
    from embody.robots import get_robot

    ds = load(recorded[0])
    robot = get_robot("peg_arm", **PegInsert.robot_params(CONFIG, SEED))
    task = PegInsert(dataclasses.replace(CONFIG), robot, 1, SEED)
    for i in range(ds.num_episodes):
        ep = ds.episode(i)
        task.reset_distribution(np.array([0]))
        task.on_reset(np.array([0]))
        for k in range(len(ep["action"])):
            obs = task.observe(T.state_from_frames(ep, k))
            np.testing.assert_array_equal(obs[0], ep["observation.state"][k])
            action = ep["action"][k][None]  # float32, as PolicyRunner hands a policy's action over
            task.action_to_command(action.astype(np.float64))
            task.after_step(action)


def test_an_aborted_episode_leaves_the_dataset_intact(recorded, peg_robot_sim):
    from embody.datasets import load

    out = recorded[0]
    before = tree_digest(out)
    human = ScriptedHuman({0: [key(pygame.KEYDOWN, pygame.K_f)], 6: [key(pygame.KEYDOWN, pygame.K_ESCAPE)]})
    with connected_driver(peg_robot_sim) as driver:
        summary = T.teleoperate(
            driver,
            CONFIG,
            human,
            episodes=2,
            out=out,
            region=T.Region((0.0, 0.0), 0.004),
            display=T.TerminalDisplay(io.StringIO()),
            **FAST,
        )
    assert summary["aborted"] and summary["episodes"] == [] and summary["fault"] is None
    assert tree_digest(out) == before
    assert load(out).num_episodes == 2


def test_the_supervisor_is_in_the_loop_for_a_faulty_device(recorded, peg_robot_sim):
    """Out-of-range moves are bounded by the task (clipped to [-1, 1]: at most 5 mm of target per tick);
    a NaN move makes a non-finite command, which the supervisor refuses: it damps the arm, the episode
    is dropped, the dataset is untouched."""
    from embody.hardware.interface import JointCommand

    out = recorded[0]
    before = tree_digest(out)
    device = FaultyDevice(good_reads=6)
    with connected_driver(peg_robot_sim) as driver:
        summary = T.teleoperate(
            driver, CONFIG, device, episodes=1, out=out, display=T.TerminalDisplay(io.StringIO()), **FAST
        )
        assert summary["fault"] is not None and "non-finite command" in summary["fault"], summary
        assert summary["counters"]["non_finite_command"] == 1 and summary["phase"] == "DAMPING"
        assert summary["counters"]["faults"] == 1  # the out-of-range moves were no fault
        sent = driver.send_command(JointCommand.pd(driver.robot, driver.robot.default_pose))
        assert not sent.kp.any() and (sent.kd == driver.supervisor.config.damping_kd).all()
    assert summary["episodes"] == [] and tree_digest(out) == before


def test_out_of_range_moves_are_clipped_before_the_task_maps_them():
    from embody.robots import RobotState

    runner = T.TeleopTask(CONFIG, SEED)
    q = runner.start(np.array([0.5, 0.0, 0.0]))
    tip, quat = runner.task.io.model.ee_pose(q[None])
    state = RobotState(
        joint_pos=q[None],
        joint_vel=np.zeros((1, 7)),
        joint_torque=np.zeros((1, 7)),
        time=np.zeros(1),
        ee_pos=tip,
        ee_quat=np.array([[0.0, 1.0, 0.0, 0.0]]),
        wrench=np.zeros((1, 6)),
    )
    for _ in range(3):  # past the tare steps
        runner.command(state, np.zeros(3))
    target = runner.task.target.copy()
    runner.command(state, np.array([50.0, -50.0, 0.0]))
    np.testing.assert_array_equal(runner.last[1], [[1.0, -1.0, 0.0]])
    np.testing.assert_allclose(runner.task.target - target, [[0.003, -0.003, 0.0]], atol=1e-12)  # within the leash


# -- what the human is told -------------------------------------------------------------------------


def test_the_region_told_must_contain_the_hole_and_is_shown():
    from embody.hardware.arms.sim import PegArmDriver

    region = T.Region.parse("5,-2,4")
    assert region == T.Region((0.005, -0.002), 0.004)
    with pytest.raises(ValueError, match="does not contain the hole"):
        T.teleoperate(PegArmDriver(robot=T.TeleopTask(CONFIG).robot), CONFIG, FaultyDevice(0), region=region)
    lines = T.learner_view(np.zeros(OBS_SIZE, np.float32), region)
    assert any("±4.0 mm of x +5.0, y -2.0 mm" in line for line in lines)
    with pytest.raises(ValueError, match="cx,cy,half_width"):
        T.Region.parse("5,5")
