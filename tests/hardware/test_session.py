"""SupervisedSession: a fault in any stage ends the same way (damping, the summary with the reason,
exit code 1, nothing raised), and deploy, replay and teleop end identically because they run it.

Faults are injected into an in-process robot (fake_robot.FakeRobot: the real supervisor stepped by a
writer thread, as DdsDriver does) the first time the supervisor is in a given phase.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from fake_robot import FakeRobot

from embody import exits
from embody.hardware.interface import JointCommand
from embody.hardware.session import SessionConfig, StepFailed, SupervisedSession
from embody.hardware.supervisor import Phase
from embody.robots import get_robot

FAST = SessionConfig(rate_hz=50.0, hold_s=0.3, duration_s=1.0, ramp_timeout_s=2.0)
REASON = {"lost": "stale state", "fall": "fall", "estop": "e-stop button", "nan": "non-finite command"}
COUNTER = {"lost": "stale_state", "fall": "fall", "estop": "estop", "nan": "non_finite_command"}
CASES = [(phase, fault) for phase in (Phase.RAMP, Phase.HOLD, Phase.POLICY) for fault in ("lost", "fall", "estop")]
CASES.append((Phase.POLICY, "nan"))  # outside POLICY the supervisor ignores requests: nothing to refuse


@pytest.fixture(scope="module")
def h1():
    return get_robot("h1_2")


def hold_step(driver):
    """A step that holds the default pose (targets for the actuated joints, as deploy and replay send)."""
    robot = driver.robot
    return lambda tick, t: (
        driver.send_command(JointCommand.pd_actuated(robot, robot.default_pose[robot.actuated])) is not None
    )


def assert_ended_in_damping(summary, driver: FakeRobot, fault: str, stage: str) -> None:
    assert REASON[fault] in summary.fault and summary.stage == stage, summary
    assert summary.ended_in == "DAMPING" and summary.exit_code == exits.FAILED == 1
    assert summary.reached[-1] == "damping" and summary.counters[COUNTER[fault]] == 1
    assert summary.counters["faults"] == 1, summary.counters  # this fault only
    last = driver.supervisor.step(driver.read_state(), 0.0, None)
    assert not last.kp.any() and (last.kd == driver.supervisor.config.damping_kd).all()
    json.dumps(summary.as_dict())  # printable as the CLI prints it


@pytest.mark.parametrize("phase,fault", CASES, ids=[f"{p.name.lower()}-{f}" for p, f in CASES])
def test_a_fault_in_each_stage_ends_in_damping_with_the_summary(h1, phase, fault):
    driver = FakeRobot(h1, fault=fault, at=phase)
    summary = SupervisedSession(driver, FAST).run(hold_step(driver))
    assert driver.injected_in is phase
    assert_ended_in_damping(summary, driver, fault, phase.name.lower())
    stages = ["connect", "ramp", "hold", "policy"]
    assert summary.reached == stages[: stages.index(phase.name.lower()) + 1] + ["damping"]
    assert (summary.ticks > 0) == (phase is Phase.POLICY)


def test_a_clean_session_reaches_every_stage_at_its_rate(h1):
    driver, released = FakeRobot(h1), []
    summary = SupervisedSession(driver, FAST, on_hold=lambda: released.append(driver.supervisor.phase)).run(
        hold_step(driver)
    )
    assert summary.fault is None and summary.exit_code == exits.OK and summary.ended_in == "POLICY"
    assert summary.reached == ["connect", "ramp", "hold", "policy", "damping"] and released == [Phase.HOLD]
    assert summary.counters["faults"] == 0 and summary.events[-1]["reason"] == "driver closing"
    assert 40 <= summary.ticks <= 51 and 40 <= summary.rate_hz <= 51, summary


def test_a_step_can_end_the_session_with_a_reason(h1):
    driver = FakeRobot(h1)

    def step(tick, t):
        if tick == 5:
            raise StepFailed("homing: the tip did not reach the start")
        return True

    summary = SupervisedSession(driver, FAST).run(step)
    assert summary.fault == "homing: the tip did not reach the start" and summary.stage == "policy"
    assert summary.exit_code == 1 and summary.ended_in == "DAMPING" and summary.ticks == 5
    assert any(e["reason"] == summary.fault for e in summary.events)  # the supervisor damped for it


def test_a_ramp_that_never_ends_is_a_fault(h1):
    driver = FakeRobot(h1)
    driver.supervisor.step = lambda *a, **k: JointCommand.zero_torque(h1.n_joints)  # a supervisor that never ticks
    summary = SupervisedSession(driver, dataclasses.replace(FAST, ramp_timeout_s=0.1)).run(hold_step(driver))
    assert "did not reach HOLD" in summary.fault and summary.stage == "ramp" and summary.exit_code == 1


def test_a_bug_in_a_step_damps_and_keeps_its_traceback(h1):
    driver = FakeRobot(h1)
    with pytest.raises(ZeroDivisionError):
        SupervisedSession(driver, FAST).run(lambda tick, t: 1 / 0)
    assert driver._thread is None  # closed: the closing damping was sent
    assert driver.supervisor.phase is Phase.DAMPING


def test_a_damped_supervisor_at_the_start_is_a_fault(h1):
    driver = FakeRobot(h1, fault="estop", at=Phase.ZERO_TORQUE)
    summary = SupervisedSession(driver, FAST).run(hold_step(driver))
    assert summary.exit_code == 1 and "e-stop" in summary.fault and summary.ticks == 0


def test_the_cli_prints_the_summary_and_names_the_fault(capsys):
    from embody.cli import _session_result

    code = _session_result("deploy", {"fault": "stale state (age 0.2 s > 0.1 s)", "stage": "ramp", "exit_code": 1})
    out = capsys.readouterr()
    assert code == 1 and json.loads(out.out)["stage"] == "ramp"
    assert out.err.strip() == "embody deploy: fault in ramp: stale state (age 0.2 s > 0.1 s) (the robot was damped)"


# -- deploy, replay and teleop end a fault identically (they run the same session) -----------------------


@pytest.fixture(scope="module")
def peg_run(tmp_path_factory):
    from test_deploy import untrained_run

    return untrained_run("peg-insert", tmp_path_factory.mktemp("session") / "run")


class Replay:
    """A recorded peg_arm dataset, as replay.to_robot reads one: 50 frames holding the default pose."""

    info, root, num_episodes, fps = {"robot_type": "peg_arm"}, "recording", 1, 25

    def episode(self, e):
        robot = get_robot("peg_arm")
        return {"embody.joint_target": np.tile(robot.default_pose[robot.actuated], (50, 1)).astype(np.float32)}


class Still:
    name = "scripted"

    def read(self):
        return np.zeros(3), set()

    def close(self):
        pass


def deployed(run, monkeypatch, fault, at):
    from embody.hardware import deploy as D

    monkeypatch.setattr(D, "make_driver", lambda robot, iface, domain, sup: FakeRobot(robot, fault=fault, at=at))
    return D.deploy(run, D.DeployConfig(robot="peg_arm", target="dds:fake0", duration_s=1.0, hold_s=0.2, ramp_s=0.3))


def replayed(monkeypatch, fault, at):
    from embody.datasets.replay import to_robot
    from embody.hardware import deploy as D

    monkeypatch.setattr(D, "make_driver", lambda robot, iface, domain, sup: FakeRobot(robot, fault=fault, at=at))
    return to_robot(Replay(), "peg_arm", "dds:fake0")


def teleoperated(fault, at):
    from embody.hardware.teleop import TeleopPlan, TeleopRunner, teleoperate
    from embody.sims.tasks.peg_insert import PegInsert, PegInsertConfig

    config = PegInsertConfig()
    config.sim.n_envs = 1
    robot = get_robot("peg_arm", **PegInsert.robot_params(config))
    runner = TeleopRunner(PegInsert(config, robot, 1), robot)
    return teleoperate(FakeRobot(robot, fault=fault, at=at), runner, Still(), TeleopPlan(1, 50)).as_dict()


@pytest.mark.parametrize("fault,at", [("lost", Phase.RAMP), ("estop", Phase.HOLD), ("nan", Phase.POLICY)])
def test_deploy_replay_and_teleop_end_a_fault_identically(peg_run, monkeypatch, fault, at):
    """The issue's case first: the robot lost during the ramp (robot-sim killed) ended deploy with a
    RuntimeError and no summary; now all three end in damping with the summary and exit code 1."""
    summaries = {
        "deploy": deployed(peg_run, monkeypatch, fault, at),
        "replay": replayed(monkeypatch, fault, at),
        "teleop": teleoperated(fault, at),
    }
    keys = ("reached", "stage", "ended_in", "exit_code")
    same = {name: {k: s[k] for k in keys} for name, s in summaries.items()}
    assert same["deploy"] == same["replay"] == same["teleop"], same
    assert same["deploy"] == {
        "reached": ["connect", "ramp", "hold", "policy"][: ["ramp", "hold", "policy"].index(at.value) + 2]
        + ["damping"],
        "stage": at.value,
        "ended_in": "DAMPING",
        "exit_code": 1,
    }
    for name, s in summaries.items():
        assert REASON[fault] in s["fault"] and s["counters"][COUNTER[fault]] == 1 == s["counters"]["faults"], name


def test_the_step_loop_runs_under_sched_fifo_where_permitted_and_is_restored(h1):
    import os

    from embody.hardware.realtime import POLICY_PRIORITY, permitted

    driver, seen = FakeRobot(h1), []

    def step(tick, t):
        seen.append((os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK, os.sched_getparam(0).sched_priority))
        return tick < 3

    before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority  # a library may have changed it
    assert SupervisedSession(driver, FAST).run(step).fault is None
    assert set(seen) == {(os.SCHED_FIFO, POLICY_PRIORITY) if permitted(POLICY_PRIORITY) else before}
    assert (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) == before
    seen.clear()
    SupervisedSession(FakeRobot(h1), dataclasses.replace(FAST, realtime_priority=None)).run(step)
    assert set(seen) == {before}
