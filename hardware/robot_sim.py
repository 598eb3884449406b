"""Simulated robots behind the real wire protocol: ``embody robot-sim h1_2 [--iface lo] [--domain 0] [--band]``.

The MuJoCo H1-2 runs in real time (2 ms physics steps) and speaks exactly what the robot
speaks: it reads unitree_hg LowCmd_ on rt/lowcmd (CRC-checked; a motor in mode 1 applies
``tau + kp (q − q_m) + kd (dq − dq_m)``, torque-limited, as the motor drivers do; mode 0 is
passive) and publishes LowState_ on rt/lowstate every step (torso IMU, joint encoders, the
applied torque as tau_est). A client written for the robot drives it unchanged. Unlike the
robot, it puts the CRC of the last command it applied into LowState_.reserve[0], so that
`embody bench hardware` can measure command→state latency.

``band`` holds the robot on an elastic band (a virtual gantry), as the vendor's simulator does
and as the robot hangs from a hoist while it is started; our own topic rt/embody/sim_control
releases or re-engages it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from embody.robots import RobotSpec, get_robot

from .interface import HardwareError

log = logging.getLogger("embody.hardware.robot_sim")

MOTOR_TEMPERATURE_C = 40  # reported constantly: the simulation has no thermal model
MODE_MACHINE = 6  # reported in LowState_; clients must echo it


@dataclass
class Band:
    """A spring-damper pulling a point on the torso toward ``anchor`` (the vendor's ElasticBand,
    attached higher up so that a hanging robot stays upright). ``rest_clearance``: the stiffness is
    chosen so that the robot at its default pose hangs with its pelvis this much above standing."""

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


class H1_2Server:
    """The simulated H1-2 on ``iface`` / DDS ``domain``; ``run`` until ``stop`` or ``duration_s``."""

    def __init__(self, iface: str = "lo", domain: int = 0, band: bool = False, robot: RobotSpec | None = None,
                 physics_dt: float = 0.002, band_config: Band = Band()):
        import mujoco

        from embody.sims.base import SimConfig
        from embody.sims.mujoco.model import build_model, joint_addresses

        self.robot = robot or get_robot("h1_2")
        self.iface, self.domain, self.band_on, self.band = iface, domain, band, band_config
        self.model, self.layout = build_model(self.robot, SimConfig(control="torque", physics_dt=physics_dt))
        self.data = mujoco.MjData(self.model)
        self._mj = mujoco
        self._qadr, self._vadr = joint_addresses(self.model, self.robot)
        self._act = self.robot.actuated
        self.data.qpos[self._qadr] = self.robot.default_pose
        self.data.qpos[:3] = self.robot.default_base_pos
        mujoco.mj_forward(self.model, self.data)
        self._torso = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
        weight = float(self.model.body_subtreemass[0]) * 9.81
        # at the default pose, raised by rest_clearance, the band carries the robot's whole weight
        self._anchor = self._attach_point() + np.array([0.0, 0.0, band_config.rest_clearance + band_config.anchor_height])
        self._stiffness = weight / band_config.anchor_height
        n = 35
        self._cmd = {k: np.zeros(n) for k in ("q", "dq", "tau", "kp", "kd")}
        self._cmd["mode"] = np.zeros(n, dtype=np.uint8)
        self._temperature = np.zeros(35, np.int16)
        self._temperature[:self.robot.n_joints] = MOTOR_TEMPERATURE_C
        self._cmd_crc = self._applied_crc = 0  # CRC of the latest command received / stepped with
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.stats = {"steps": 0, "commands": 0, "crc_errors": 0, "malformed": 0, "mode_machine_mismatch": 0, "late_steps": 0}

    # -- physics -----------------------------------------------------------------------------
    def _attach_point(self) -> np.ndarray:
        d = self.data
        return d.xpos[self._torso] + d.xmat[self._torso].reshape(3, 3) @ np.array([0, 0, self.band.attach_offset])

    def _apply_band(self) -> None:
        d, b = self.data, self._torso
        d.xfrc_applied[b] = 0.0
        if not self.band_on:
            return
        attach = self._attach_point()
        vel = np.zeros(6)
        self._mj.mj_objectVelocity(self.model, d, self._mj.mjtObj.mjOBJ_BODY, b, vel, 0)  # world frame [ang, lin]
        ang, lin_com = vel[:3], vel[3:]
        lin = lin_com + np.cross(ang, attach - d.xipos[b])
        force, torque = self.band.wrench(attach, lin, ang, self._anchor, self._stiffness)
        d.xfrc_applied[b, :3] = force
        d.xfrc_applied[b, 3:] = torque + np.cross(attach - d.xipos[b], force)  # xfrc acts at the COM

    def step(self) -> None:
        """One physics step under the latest command."""
        d, n = self.data, len(self._act)
        with self._lock:
            c = {k: v[:n].copy() for k, v in self._cmd.items()}
            self._applied_crc = self._cmd_crc
        q, dq = d.qpos[self._qadr][self._act], d.qvel[self._vadr][self._act]
        tau = c["tau"] + c["kp"] * (c["q"] - q) + c["kd"] * (c["dq"] - dq)
        limit = self.robot.torque_limit[self._act]
        d.ctrl[:] = np.where(c["mode"] == 1, np.clip(tau, -limit, limit), 0.0)
        self._apply_band()
        self._mj.mj_step(self.model, d)
        self.stats["steps"] += 1

    def lowstate(self) -> np.ndarray:
        """The LowState_ the robot would publish now, packed (crc filled)."""
        from embody.rotations import quat_to_rpy

        from .unitree import messages as msg

        d, L, j = self.data, self.layout, self.robot.n_joints
        motors = np.zeros((4, msg.NUM_MOTORS))  # q, dq, ddq, tau_est; motors past j report zeros
        motors[:3, :j] = d.qpos[self._qadr], d.qvel[self._vadr], d.qacc[self._vadr]
        motors[3, self._act] = d.ctrl
        quat = d.sensordata[L.imu_quat]
        return msg.lowstate_record(
            *motors, temperature=self._temperature, quaternion=quat, gyroscope=d.sensordata[L.imu_gyro],
            accelerometer=d.sensordata[L.imu_accel], rpy=quat_to_rpy(quat[None])[0],
            tick=int(round(d.time * 1000)) & 0xFFFFFFFF, mode_machine=MODE_MACHINE, mode_pr=0,
            reserve=(self._applied_crc, 0, 0, 0))

    # -- wire ----------------------------------------------------------------------------------
    def _on_command(self, reader) -> None:
        if reader is None:  # a callback racing the reader's deletion
            return
        from .unitree import messages as msg
        from .unitree import wire

        for data in wire.take(reader):
            try:
                packed = wire.from_cdr(data, "LowCmd_")
            except HardwareError:
                self.stats["malformed"] += 1
                continue
            if not msg.packed_crc_ok(packed):
                self.stats["crc_errors"] += 1
                continue
            a = msg.lowcmd_arrays(packed)
            if a["mode_machine"] != MODE_MACHINE:
                self.stats["mode_machine_mismatch"] += 1
            with self._lock:
                for k in self._cmd:
                    self._cmd[k][:] = a[k]
                self._cmd_crc = int(packed[-4:].view("<u4")[0])
            self.stats["commands"] += 1

    def _on_control(self, reader) -> None:
        for sample in reader.take(N=16):
            self.band_on = bool(sample.band)
            log.info("elastic band %s", "engaged" if self.band_on else "released")

    def run(self, duration_s: float | None = None, ready=None) -> None:
        """Step in real time and publish every step; ``ready()`` is called once the topics exist."""
        from . import dds
        from .unitree import messages as msg
        from .unitree import wire

        wire.check_against_cyclonedds()
        writer, _ = dds.endpoints(self.domain, self.iface, (msg.TOPIC_LOWSTATE, msg.LowState_),
                                  (msg.TOPIC_LOWCMD, msg.LowCmd_), self._on_command)
        from .sim_control import TOPIC_SIM_CONTROL, SimControl_

        self._keep = dds.endpoints(self.domain, self.iface, None, (TOPIC_SIM_CONTROL, SimControl_), self._on_control)
        if ready:
            ready()
        dt = float(self.model.opt.timestep)
        start = next_t = time.monotonic()
        while not self._stop.is_set() and (duration_s is None or time.monotonic() - start < duration_s):
            self.step()
            wire.write(writer, wire.to_cdr(self.lowstate(), "LowState_"))
            next_t += dt
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.05:  # far behind (a loaded machine): resynchronize rather than fast-forward
                self.stats["late_steps"] += 1
                next_t = time.monotonic()

    def stop(self) -> None:
        self._stop.set()


def set_band(domain: int, iface: str, engaged: bool, repeats: int = 5) -> None:
    """Engage or release the simulated robot's band (best effort topic: sent a few times)."""
    from . import dds
    from .sim_control import TOPIC_SIM_CONTROL, SimControl_

    writer, _ = dds.endpoints(domain, iface, (TOPIC_SIM_CONTROL, SimControl_), None)
    for _ in range(repeats):
        writer.write(SimControl_(band=int(engaged)))
        time.sleep(0.01)


SERVERS = {"h1_2": H1_2Server}


def serve(robot: str, iface: str = "lo", domain: int = 0, band: bool = False, duration_s: float | None = None) -> None:
    """The ``embody robot-sim`` command: serve until Ctrl-C (or ``duration_s``)."""
    if robot not in SERVERS:
        raise HardwareError(f"unknown robot {robot!r} for robot-sim; robots: {', '.join(sorted(SERVERS))}")
    server = SERVERS[robot](iface=iface, domain=domain, band=band)
    ready = lambda: print(f"robot-sim {robot}: serving on interface {iface!r}, DDS domain {domain}"  # noqa: E731
                          f"{', on the band' if band else ''}", flush=True)
    try:
        server.run(duration_s, ready=ready)
    except KeyboardInterrupt:
        pass
    print(f"robot-sim {robot}: stopped; {server.stats}", flush=True)
