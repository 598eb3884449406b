"""Simulated robots behind a robot's wire protocol: ``embody robot-sim h1_2|peg_arm [--iface lo] [--domain 0]``.

MuJoCo runs in real time (2 ms physics steps) and speaks what the robot speaks (a ``Codec``):
it reads commands (CRC-checked; an enabled motor applies ``tau + kp (q − q_m) + kd (dq − dq_m)``,
torque-limited, as motor drivers do; a disabled one is passive) and publishes the robot's state
every step. A client written for the robot drives it unchanged.

- ``h1_2``: unitree_hg LowCmd_/LowState_ on rt/lowcmd, rt/lowstate (torso IMU, joint encoders,
  the applied torque as tau_est). ``--band`` holds the robot on an elastic band (a virtual
  gantry), as the vendor's simulator does and as the robot hangs from a hoist while it is
  started; our own topic rt/embody/sim_control releases or re-engages it.
- ``peg_arm``: the Panda with its peg above the board, on embody's arm topics (hardware/arms/sim.py),
  with the wrist F/T sensor and the end-effector pose.

Unlike a robot, the simulation puts the id (CRC) of the last command it applied into the state,
so that ``embody bench hardware`` can measure command→state latency.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from embody.robots import RobotSpec, RobotState, get_robot

from .interface import HardwareError, JointCommand

log = logging.getLogger("embody.hardware.robot_sim")

MOTOR_TEMPERATURE_C = 40.0  # reported constantly: the simulation has no thermal model
H1_2_MODE_MACHINE = 6  # reported in LowState_; clients must echo it


class SimServer:
    """A robot in MuJoCo behind ``codec``'s topics on ``iface`` / DDS ``domain``."""

    def __init__(self, robot: RobotSpec, codec, iface: str = "lo", domain: int = 0, physics_dt: float = 0.002,
                 brakes: bool = False):
        import mujoco

        from embody.sims.base import SimConfig
        from embody.sims.mujoco.model import build_model, joint_addresses

        self.robot, self.codec, self.iface, self.domain = robot, codec, iface, domain
        self.model, self.layout = build_model(robot, SimConfig(control="torque", physics_dt=physics_dt))
        self.data = mujoco.MjData(self.model)
        self._mj = mujoco
        self._qadr, self._vadr = joint_addresses(self.model, robot)
        self._act = robot.actuated
        self.brakes = brakes  # a disabled joint is held by its brake (arms) rather than passive (the H1-2)
        self._lock = threading.Lock()
        self._reset_requested = False
        self._stop = threading.Event()
        self._endpoints: list = []
        self.stats = {"steps": 0, "commands": 0, "crc_errors": 0, "malformed": 0, "late_steps": 0}
        self.reset()

    # -- physics -----------------------------------------------------------------------------
    def reset(self) -> None:
        """The start state: default pose (standing, for a floating base), motors disabled."""
        d = self.data
        self._mj.mj_resetData(self.model, d)
        d.qpos[self._qadr] = self.robot.default_pose
        if self.robot.floating_base:
            d.qpos[:3] = self.robot.default_base_pos
        self._mj.mj_forward(self.model, d)
        self._brake_q = d.qpos[self._qadr][self._act].copy()
        with self._lock:
            self._cmd = JointCommand.zero_torque(self.robot.n_joints)
            self._cmd.enable[:] = False  # passive (or braked) until the next command
            self._cmd_id = self._applied_id = 0  # id of the latest command received / stepped with

    def external_forces(self) -> None:
        """Set ``data.xfrc_applied`` before each step (the H1-2's band); none by default."""

    def step(self) -> None:
        """One physics step under the latest command."""
        d, a = self.data, self._act
        with self._lock:
            c, self._applied_id = self._cmd, self._cmd_id
        q, dq = d.qpos[self._qadr][a], d.qvel[self._vadr][a]
        tau = c.tau[a] + c.kp[a] * (c.q[a] - q) + c.kd[a] * (c.dq[a] - dq)
        limit = self.robot.torque_limit[a]
        if self.brakes:  # a braked joint holds where its motor was last enabled (stiffly, gravity included)
            self._brake_q = np.where(c.enable[a], q, self._brake_q)
            hold = d.qfrc_bias[self._vadr][a] + self.robot.kp[a] * (self._brake_q - q) - self.robot.kd[a] * dq
            tau = np.where(c.enable[a], tau, hold)
        d.ctrl[:] = np.where(c.enable[a] | self.brakes, np.clip(tau, -limit, limit), 0.0)
        self.external_forces()
        self._mj.mj_step(self.model, d)
        self.stats["steps"] += 1

    def state(self) -> RobotState:
        """What the robot's sensors report now (n = 1)."""
        d, L, j = self.data, self.layout, self.robot.n_joints
        torque = np.zeros(j)
        torque[self._act] = d.ctrl
        pick = lambda sl: None if sl is None else d.sensordata[sl][None].copy()  # noqa: E731
        return RobotState(joint_pos=d.qpos[self._qadr][None].copy(), joint_vel=d.qvel[self._vadr][None].copy(),
                          joint_torque=torque[None], time=np.array([d.time]), imu_quat=pick(L.imu_quat),
                          imu_gyro=pick(L.imu_gyro), imu_accel=pick(L.imu_accel), ee_pos=pick(L.ee_pos),
                          ee_quat=pick(L.ee_quat), wrench=pick(L.wrench),
                          motor_temperature=np.full((1, j), MOTOR_TEMPERATURE_C))

    # -- wire ----------------------------------------------------------------------------------
    def _on_command(self, reader) -> None:
        from .dds_driver import CrcMismatch, take

        if reader is None:  # a callback racing the reader's deletion
            return
        for data in take(reader):
            try:
                cmd, cmd_id, _ = self.codec.decode_command(data)
            except CrcMismatch:
                self.stats["crc_errors"] += 1
                continue
            except HardwareError:
                self.stats["malformed"] += 1
                continue
            with self._lock:
                self._cmd, self._cmd_id = cmd, cmd_id
            self.stats["commands"] += 1

    def open_topics(self):
        """Create the state writer and command reader (and any extra topics); returns the writer."""
        from . import dds

        c = self.codec
        c.check()
        from .sim_control import TOPIC_SIM_CONTROL, SimControl_

        writer, reader = dds.endpoints(self.domain, self.iface, (c.state_topic, c.state_type),
                                       (c.command_topic, c.command_type), self._on_command)
        _, control = dds.endpoints(self.domain, self.iface, None, (TOPIC_SIM_CONTROL, SimControl_), self._on_control)
        self._endpoints += [reader, control]
        return writer

    def _on_control(self, reader) -> None:
        if reader is None:
            return
        from .sim_control import SimControl_

        for sample in reader.take(N=16):
            if isinstance(sample, SimControl_):  # not the InvalidSample a departing writer leaves
                self.control(sample)

    def control(self, sample) -> None:
        """Apply a SimControl_ (reset; the H1-2 also handles the band)."""
        if sample.reset:
            self._reset_requested = True

    def run(self, duration_s: float | None = None, ready=None) -> None:
        """Step in real time and publish every step; ``ready()`` is called once the topics exist."""
        from .dds_driver import write

        writer = self.open_topics()
        if ready:
            ready()
        dt = float(self.model.opt.timestep)
        start = next_t = time.monotonic()
        while not self._stop.is_set() and (duration_s is None or time.monotonic() - start < duration_s):
            if self._reset_requested:
                self._reset_requested = False
                self.reset()
                log.info("reset to the start state")
            self.step()
            write(writer, self.codec.encode_state(self.state(), self._applied_id, int(round(self.data.time * 1000))))
            next_t += dt
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.05:  # far behind (a loaded machine): resynchronize rather than fast-forward
                self.stats["late_steps"] += 1
                next_t = time.monotonic()

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Band:
    """A spring-damper pulling a point on the torso toward an anchor (the vendor's ElasticBand,
    attached higher up so that a hanging robot stays upright). The stiffness is chosen so that the
    robot at its default pose hangs with its pelvis ``rest_clearance`` above standing."""

    anchor_height: float = 2.0  # m above the attach point of the hanging robot
    attach_offset: float = 0.4  # m above the torso link origin, along the torso's z axis
    damping: float = 100.0  # N·s/m
    angular_damping: float = 20.0  # N·m·s/rad on the torso
    rest_clearance: float = 0.02  # m

    def wrench(self, attach: np.ndarray, vel: np.ndarray, ang_vel: np.ndarray, anchor: np.ndarray,
               stiffness: float) -> tuple[np.ndarray, np.ndarray]:
        """Force (3,) at ``attach`` and torque (3,) in the world frame."""
        d = anchor - attach
        dist = np.linalg.norm(d)
        direction = d / max(dist, 1e-9)
        force = (stiffness * dist - self.damping * (vel @ direction)) * direction
        return force, -self.angular_damping * ang_vel


class H1_2Server(SimServer):
    """The simulated H1-2, optionally on the elastic band."""

    def __init__(self, iface: str = "lo", domain: int = 0, band: bool = False, robot: RobotSpec | None = None,
                 physics_dt: float = 0.002, band_config: Band = Band()):
        from .unitree.h1_2 import UnitreeHgCodec

        super().__init__(robot or get_robot("h1_2"), UnitreeHgCodec(H1_2_MODE_MACHINE), iface, domain, physics_dt)
        self.band_on = self.band_started = band
        self.band = band_config
        self._torso = self._mj.mj_name2id(self.model, self._mj.mjtObj.mjOBJ_BODY, "torso_link")
        weight = float(self.model.body_subtreemass[0]) * 9.81
        # at the default pose, raised by rest_clearance, the band carries the robot's whole weight
        self._anchor = self._attach_point() + np.array([0.0, 0.0, band_config.rest_clearance + band_config.anchor_height])
        self._stiffness = weight / band_config.anchor_height

    def _attach_point(self) -> np.ndarray:
        d, b = self.data, self._torso
        return d.xpos[b] + d.xmat[b].reshape(3, 3) @ np.array([0, 0, self.band.attach_offset])

    def external_forces(self) -> None:
        d, b = self.data, self._torso
        d.xfrc_applied[b] = 0.0
        if not self.band_on:
            return
        attach = self._attach_point()
        vel = np.zeros(6)
        self._mj.mj_objectVelocity(self.model, d, self._mj.mjtObj.mjOBJ_BODY, b, vel, 0)  # world frame [ang, lin]
        ang, lin = vel[:3], vel[3:] + np.cross(vel[:3], attach - d.xipos[b])
        force, torque = self.band.wrench(attach, lin, ang, self._anchor, self._stiffness)
        d.xfrc_applied[b, :3] = force
        d.xfrc_applied[b, 3:] = torque + np.cross(attach - d.xipos[b], force)  # xfrc acts at the COM

    @property
    def band_on(self) -> bool:
        return self.stats.get("band", False)

    @band_on.setter
    def band_on(self, on: bool) -> None:
        self.stats["band"] = on  # reported with the statistics when robot-sim stops

    def reset(self) -> None:
        super().reset()
        self.band_on = getattr(self, "band_started", False)

    def control(self, sample) -> None:
        from .sim_control import KEEP

        super().control(sample)
        if sample.band != KEEP and bool(sample.band) != self.band_on:
            self.band_on = bool(sample.band)
            log.info("elastic band %s", "engaged" if self.band_on else "released")


class PegArmServer(SimServer):
    """The simulated peg arm (the Panda holding its peg above the board), at its default pose, its joints
    braked until their motors are enabled (as an arm's brakes hold it while it is not controlled)."""

    def __init__(self, iface: str = "lo", domain: int = 0, robot: RobotSpec | None = None, physics_dt: float = 0.002):
        from .arms.sim import ArmCodec

        robot = robot or get_robot("peg_arm")
        super().__init__(robot, ArmCodec(robot.n_joints), iface, domain, physics_dt, brakes=True)


def sim_control(domain: int, iface: str, band: bool | None = None, reset: bool = False, repeats: int = 5) -> None:
    """Release/engage the simulated H1-2's band and/or reset a simulated robot (best effort topic:
    sent a few times; a reset is idempotent)."""
    from . import dds
    from .sim_control import KEEP, TOPIC_SIM_CONTROL, SimControl_

    writer, _ = dds.endpoints(domain, iface, (TOPIC_SIM_CONTROL, SimControl_), None)
    for _ in range(repeats):
        writer.write(SimControl_(band=KEEP if band is None else int(band), reset=int(reset)))
        time.sleep(0.01)


def make_server(robot: str, iface: str = "lo", domain: int = 0, band: bool = False) -> SimServer:
    if robot == "h1_2":
        return H1_2Server(iface=iface, domain=domain, band=band)
    if robot == "peg_arm":
        if band:
            raise HardwareError("--band holds a humanoid; the peg arm is fixed to its base")
        return PegArmServer(iface=iface, domain=domain)
    raise HardwareError(f"unknown robot {robot!r} for robot-sim; robots: h1_2, peg_arm")


def serve(robot: str, iface: str = "lo", domain: int = 0, band: bool = False, duration_s: float | None = None) -> None:
    """The ``embody robot-sim`` command: serve until Ctrl-C or SIGTERM (or ``duration_s``)."""
    import signal

    server = make_server(robot, iface, domain, band)
    # both stop the loop, also where SIGINT was ignored at start (children of non-interactive shells)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stop())
    ready = lambda: print(f"robot-sim {robot}: serving on interface {iface!r}, DDS domain {domain}"  # noqa: E731
                          f"{', on the band' if band else ''}", flush=True)
    server.run(duration_s, ready=ready)
    print(f"robot-sim {robot}: stopped; {server.stats}", flush=True)
