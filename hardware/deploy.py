"""``embody deploy RUN --robot h1_2 --target sim|dds:IFACE``: a trained policy on a robot, safely.

The observation builder and action mapping are the training task's own (``PolicyRunner``
holds the task with one env and calls exactly what the VecEnv calls), so the deployed
observation equals the training observation for the same RobotState. The sequence is the
``SupervisedSession``'s (hardware/session.py), all through the safety supervisor: zero torque →
ramp to the default pose → hold → (release the band of a simulated robot) → policy at 50 Hz →
damping on exit, fault, Ctrl-C or SIGTERM; a fault in any stage ends in the summary with its reason.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from embody.robots import RobotSpec, RobotState

from .interface import HardwareError, JointCommand
from .recorder import RunRecording
from .session import SessionConfig, SupervisedSession
from .supervisor import SafetySupervisor, SupervisorConfig, tilt_rad

log = logging.getLogger("embody.hardware.deploy")

# Deployment turns off what only training wants: randomized physics, action delays, pushes.
DEPLOY_OVERRIDES = ("env.randomization.enabled=false",)


class PolicyRunner:
    """A run's checkpoint with its task's observation builder and action mapping, for one robot.

    ``command(state)`` performs the VecEnv's per-step task calls in the same order:
    observe → act → action_to_command → after_step.
    """

    def __init__(self, run: Path, overrides: list[str] = (), commands: np.ndarray | None = None):
        from embody.config import apply_overrides, from_dict
        from embody.robots import get_robot
        from embody.runs import load_run, load_run_checkpoint
        from embody.sims.tasks import TASKS

        cfg, _ = load_run(run)
        overrides = [o for o in DEPLOY_OVERRIDES if o.split("=")[0].split(".")[1] in cfg.env] + list(overrides)
        apply_overrides(cfg, texts=overrides)
        task_cls = TASKS.get(cfg.task)
        task_cfg = from_dict(task_cls.config_class, cfg.env, "env")
        task_cfg.sim.n_envs = 1
        if task_cfg.sim.control != "pd":
            raise HardwareError(
                f"{run}: task {cfg.task!r} uses {task_cfg.sim.control} control; deploy sends PD targets"
            )
        self.robot = get_robot(task_cls.robot_name, **task_cls.robot_params(task_cfg, cfg.seed))
        self.task = task_cls(task_cfg, self.robot, 1, cfg.seed)
        self.policy = load_run_checkpoint(run, expect=self.task).policy
        self.commands = None if commands is None else np.asarray(commands, dtype=np.float64).reshape(1, -1)
        if self.commands is not None and not callable(getattr(self.task, "set_commands", None)):
            raise HardwareError(f"--command: {run}'s task {cfg.task!r} takes no velocity command")
        self.reset()

    def reset(self) -> None:
        """Start an episode: the task's on_reset (fixed commands re-applied) and the policy's recurrent state
        cleared."""
        self.task.on_reset(np.array([0]))
        self._fix_commands()
        self.policy.reset()

    def _fix_commands(self) -> None:
        if self.commands is None:
            return
        try:
            self.task.set_commands(np.array([0]), self.commands)
        except ValueError as e:  # the task refuses the command: its shape or its trained range
            raise HardwareError(f"--command {','.join(f'{v:g}' for v in self.commands[0])}: {e}") from None

    def observe(self, state: RobotState) -> np.ndarray:
        """The task's policy observation (1, o) for ``state``."""
        return self.task.observe(state)

    @torch.no_grad()
    def command(self, state: RobotState) -> JointCommand:
        """The joint command for ``state``; the observation and action stay in ``last``."""
        obs = self.observe(state)
        action = self.policy.act(torch.as_tensor(obs, dtype=torch.float32), deterministic=True).numpy()
        self.last = (obs, action)
        targets = self.task.action_to_command(action.astype(np.float64))
        self.task.after_step(action)
        self._fix_commands()  # the task would resample commands on its own schedule
        return JointCommand.pd_actuated(self.robot, targets[0])


@dataclass
class DeployConfig:
    """``embody deploy`` settings; durations in seconds of wall time."""

    robot: str = "h1_2"
    target: str = "sim"  # sim (starts `embody robot-sim`) | dds:IFACE
    domain: int = 0
    duration_s: float = 10.0  # policy time
    policy_hz: float = 50.0
    hold_s: float = 1.0
    connect_timeout_s: float = 10.0
    band: bool = True  # sim: start on the band, release it when the policy starts
    ramp_s: float = 2.0  # to the default pose
    supervisor: SupervisorConfig | None = None  # None: the driver's default for the robot (ramp_s applies)
    record: Path | None = None  # a dataset to record the deployment into (one episode)
    log: Path | None = None  # .rrd (Rerun) or .mcap (Foxglove): the recording with the supervisor's events
    teleop: str | None = None  # an input device (keyboard, gamepad, spacemouse) whose moves the task's teleop() takes
    armature: str = "model"  # sim: the simulated robot's rotor inertia, the model file's or the motor table's


def parse_target(target: str) -> tuple[bool, str]:
    """(start a simulated robot?, interface) from ``sim`` or ``dds:IFACE``."""
    if target == "sim":
        return True, "lo"
    if target.startswith("dds:") and len(target) > 4:
        return False, target[4:]
    raise HardwareError(f"unknown deploy target {target!r}: use 'sim' or 'dds:IFACE' (for example dds:eth0)")


def start_robot_sim(
    robot: str,
    iface: str,
    domain: int,
    band: bool,
    armature: str = "model",
    timeout_s: float = 60.0,
    realtime: int | None = None,
) -> subprocess.Popen:
    """``embody robot-sim`` as a child process; returns once it serves (its ready line). Its output is
    drained from then on (a full pipe would stall it) into ``proc.output``, last lines kept."""
    cmd = [sys.executable, "-m", "embody.cli", "robot-sim", robot, "--iface", iface, "--domain", str(domain)]
    cmd += ["--armature", armature] + ([] if realtime is None else ["--realtime", str(realtime)])
    proc = subprocess.Popen(
        cmd + (["--band"] if band else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline, seen = time.monotonic() + timeout_s, []
    for line in proc.stdout:
        seen.append(line)
        if "serving" in line:
            proc.output = collections.deque(seen, maxlen=50)
            proc.drain = threading.Thread(target=proc.output.extend, args=(proc.stdout,), daemon=True)
            proc.drain.start()
            return proc
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise HardwareError(f"robot-sim {robot} did not start: {' '.join(cmd)}\n{''.join(seen[-20:])}")


def stop_robot_sim(proc: subprocess.Popen) -> str:
    """Stop a robot-sim child (SIGTERM); returns its last line (its statistics)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.drain.join(5.0)  # it ends at the pipe's end, after the final line
    return proc.output[-1].strip() if proc.output else ""


@dataclass
class Target:
    """A robot at a deploy target: its driver (not connected yet), the DDS interface, and the robot-sim
    child for ``sim`` (None otherwise; ``robot_sim`` holds its last line once stopped)."""

    driver: object
    iface: str
    sim: subprocess.Popen | None
    robot_sim: str | None = None


@contextlib.contextmanager
def open_target(
    robot: RobotSpec, target: str, domain: int, band: bool = False, armature: str = "model"
) -> Iterator[Target]:
    """``robot`` at ``target`` (``sim`` or ``dds:IFACE``) for one session: for ``sim`` a robot-sim child is
    started first (``band``: held by the band) and stopped on exit, whatever happened."""
    start_sim, iface = parse_target(target)
    sim = start_robot_sim(robot.name, iface, domain, band, armature) if start_sim else None
    t = Target(None, iface, sim)
    try:
        t.driver = make_driver(robot, iface, domain, None)
        yield t
    finally:
        if sim is not None:
            t.robot_sim = stop_robot_sim(sim)


def make_driver(robot: RobotSpec, iface: str, domain: int, supervisor: SafetySupervisor | None):
    """The DDS driver of ``robot`` (the H1-2 on unitree_hg, or the simulated peg arm)."""
    if robot.name == "h1_2":
        from .unitree.h1_2 import H1_2Driver

        return H1_2Driver(iface=iface, domain=domain, supervisor=supervisor, robot=robot)
    if robot.name == "peg_arm":
        from .arms.sim import PegArmDriver

        return PegArmDriver(iface=iface, domain=domain, supervisor=supervisor, robot=robot)
    raise HardwareError(
        f"no DDS driver for robot {robot.name!r}; robots: h1_2, peg_arm (real UR and Franka arms: embody.hardware.arms)"
    )


class PolicyStep:
    """Deploy's step (a session ``Step``): the live state, stamped with the task's clock (time since
    the episode began) → ``runner.command`` → the driver (→ the recorder); tracks the torso tilt. With a
    ``device``, its move and buttons go to the task's ``teleop(move, buttons)`` first (a teleoperated
    reference, e.g. ALMI's hand targets)."""

    def __init__(self, driver, runner: PolicyRunner, recorder=None, device=None):
        self.driver, self.runner, self.recorder, self.device = driver, runner, recorder, device
        self.max_tilt = 0.0  # [rad]

    def __call__(self, tick: int, t: float) -> bool:
        if self.device is not None:
            self.runner.task.teleop(*self.device.read())
        state = self.driver.read_state()
        state.time = np.array([t])
        age = self.driver.state_age()
        asked = self.runner.command(state)
        sent = self.driver.send_command(asked)
        if self.recorder is not None:
            supervisor = self.driver.supervisor
            self.recorder.add(state, *self.runner.last, asked, sent, supervisor.phase, age, supervisor.now())
        if state.imu_quat is not None:
            self.max_tilt = max(self.max_tilt, tilt_rad(state.imu_quat[0]))
        return True


def deploy(run: Path, cfg: DeployConfig, overrides: list[str] = (), commands: np.ndarray | None = None) -> dict:
    """Deploy ``run`` to ``cfg.robot`` at ``cfg.target``; returns the summary (also printed by the CLI)."""
    parse_target(cfg.target)  # refused before anything is loaded or created
    runner = PolicyRunner(run, overrides, commands)
    if runner.robot.name != cfg.robot:
        raise HardwareError(f"{run} was trained for robot {runner.robot.name!r}, not {cfg.robot!r}")
    if cfg.teleop is not None and not callable(getattr(runner.task, "teleop", None)):
        raise HardwareError(f"--teleop: {run}'s task {runner.task.name!r} takes no teleoperated reference")
    band = cfg.band and cfg.robot == "h1_2"
    summary: dict = {}
    device = _device(cfg.teleop)
    recording = {"task": runner.task.name, "run": str(run), "robot": cfg.robot, "target": cfg.target}
    recorder = RunRecording(runner.robot, round(cfg.policy_hz), recording, runner.task, cfg.record, cfg.log)
    try:
        with open_target(runner.robot, cfg.target, cfg.domain, band, cfg.armature) as target:
            driver = target.driver
            config = dataclasses.replace(cfg.supervisor or driver.supervisor.config, ramp_s=cfg.ramp_s)
            driver.supervisor = SafetySupervisor(runner.robot, config)
            step = PolicyStep(driver, runner, recorder, device)
            session = SupervisedSession(
                driver,
                SessionConfig(
                    rate_hz=cfg.policy_hz,
                    hold_s=cfg.hold_s,
                    duration_s=cfg.duration_s,
                    connect_timeout_s=cfg.connect_timeout_s,
                ),
                on_hold=release_band(cfg.domain, target.iface) if target.sim and band else None,
            )
            runner.reset()
            result = session.run(step)
        summary.update(
            result.as_dict(),
            policy_s=result.loop_s,
            policy_steps=result.ticks,
            max_torso_tilt_deg=float(np.degrees(step.max_tilt)),
            driver=dict(driver.stats),
        )
    finally:
        summary.update(recorder.finish(summary.get("events", [])))
        if device is not None:
            device.close()
    if target.sim is not None:
        summary["robot_sim"] = target.robot_sim
    log.info("deploy summary: %s", json.dumps(summary))
    return summary


def _device(name: str | None):
    """The teleoperation input device ``name`` (None: none)."""
    if name is None:
        return None
    from .teleop import make_device

    return make_device(name)


def release_band(domain: int, iface: str):
    """An ``on_hold`` that releases a simulated humanoid's elastic band as the policy starts."""

    def release() -> None:
        from .robot_sim import sim_control

        sim_control(domain, iface, band=False)

    return release
