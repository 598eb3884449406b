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

Physics: both robots run in embody's MuJoCo adapter (``embody.sims`` "mujoco", one env, torque
control, one 2 ms physics step per ``step``): their reset, stepping and RobotState are the
adapter's; robot-sim adds the motor drivers' PD, the peg arm's brakes (gravity-compensated, from
the adapter's model) and the sensors the adapter has no model of (motor temperature). The H1-2's
band is a spring-damper wrench on the torso, computed from the adapter's state before every
physics step and applied through the adapter's ``apply_wrench`` (capability ``applied_wrench``,
MuJoCo's xfrc_applied) while the band is on (``BandPhysics``).

On loopback robot-sim also meets clients configured as the vendor's SDK configures itself
(multicast on "lo", no peers): see hardware/dds.py.

Unlike a robot, the simulation puts the id (CRC) of the last command it applied into the state,
so that ``embody bench hardware`` can measure command→state latency.
"""

from __future__ import annotations

import dataclasses
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


class AdapterPhysics:
    """A robot in embody's MuJoCo adapter: one env, torque control, one physics step per ``step``."""

    def __init__(self, robot: RobotSpec, physics_dt: float, armature: str = "model"):
        from embody.sims import SimConfig, make_sim
        from embody.sims.mujoco.model import joint_addresses

        self.robot = robot
        cfg = SimConfig(n_envs=1, physics_dt=physics_dt, control="torque", n_threads=1, armature=armature)
        self.sim = make_sim("mujoco", robot, cfg)
        self.model = self.sim.model
        self.dt = float(self.model.opt.timestep)
        self._qadr, self._vadr = joint_addresses(self.model, robot)
        self._scratch = None  # an MjData for the brakes' gravity compensation, made on first use

    def reset(self) -> None:
        """The adapter's start state: default pose (standing, for a floating base), at rest."""
        from embody.sims import InitState

        j = self.robot.n_joints
        self.sim.reset(np.array([0]), InitState(joint_pos=self.robot.default_pose[None], joint_vel=np.zeros((1, j))))
        self._state = self.sim.state()

    def step(self, tau: np.ndarray) -> None:
        """One physics step with joint torques ``tau`` (actuated,)."""
        self.sim.step(tau[None])
        self._state = self.sim.state()

    def state(self) -> RobotState:
        return self._state

    def bias(self) -> np.ndarray:
        """Gravity and Coriolis torques (j,) at the current state (fixed-base robots: the joints are qpos)."""
        import mujoco

        if self.robot.floating_base:
            raise HardwareError("brakes with gravity compensation are for fixed-base arms")
        if self._scratch is None:
            self._scratch = mujoco.MjData(self.model)
        d, s = self._scratch, self._state
        d.qpos[self._qadr], d.qvel[self._vadr] = s.joint_pos[0], s.joint_vel[0]
        for stage in (mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_comVel):  # what RNE needs, no collisions
            stage(self.model, d)
        bias = np.zeros(self.model.nv)
        mujoco.mj_rne(self.model, d, 0, bias)
        return bias[self._vadr]


class SimServer:
    """A robot in MuJoCo behind ``codec``'s topics on ``iface`` / DDS ``domain``."""

    def __init__(
        self,
        robot: RobotSpec,
        codec,
        iface: str = "lo",
        domain: int = 0,
        physics_dt: float = 0.002,
        brakes: bool = False,
        physics=None,
        armature: str = "model",
    ):
        self.robot, self.codec, self.iface, self.domain = robot, codec, iface, domain
        self.physics = physics or AdapterPhysics(robot, physics_dt, armature)
        self._act = robot.actuated
        self.brakes = brakes  # a disabled joint is held by its brake (arms) rather than passive (the H1-2)
        self._lock = threading.Lock()
        self._reset_requested = False
        self._stop = threading.Event()
        self._endpoints: list = []
        self.realtime_priority: int | None = None  # SCHED_FIFO for the stepping loop and DDS receive threads
        self.stats = {"steps": 0, "commands": 0, "crc_errors": 0, "malformed": 0, "late_steps": 0}
        self.reset()

    # -- physics -----------------------------------------------------------------------------
    def reset(self) -> None:
        """The start state: default pose (standing, for a floating base), motors disabled."""
        self.physics.reset()
        self._brake_q = self.physics.state().joint_pos[0][self._act].copy()
        with self._lock:
            self._cmd = JointCommand.zero_torque(self.robot.n_joints)
            self._cmd.enable[:] = False  # passive (or braked) until the next command
            self._cmd_id = self._applied_id = 0  # id of the latest command received / stepped with

    def step(self) -> None:
        """One physics step under the latest command."""
        a, s = self._act, self.physics.state()
        with self._lock:
            c, self._applied_id = self._cmd, self._cmd_id
        q, dq = s.joint_pos[0][a], s.joint_vel[0][a]
        tau = c.tau[a] + c.kp[a] * (c.q[a] - q) + c.kd[a] * (c.dq[a] - dq)
        limit = self.robot.torque_limit[a]
        if self.brakes:  # a braked joint holds where its motor was last enabled (stiffly, gravity included)
            self._brake_q = np.where(c.enable[a], q, self._brake_q)
            hold = self.physics.bias()[a] + self.robot.kp[a] * (self._brake_q - q) - self.robot.kd[a] * dq
            tau = np.where(c.enable[a], tau, hold)
        self.physics.step(np.where(c.enable[a] | self.brakes, np.clip(tau, -limit, limit), 0.0))
        self.stats["steps"] += 1

    def state(self) -> RobotState:
        """What the robot's sensors report now (n = 1); the simulation has no thermal model."""
        s = self.physics.state()
        return dataclasses.replace(s, motor_temperature=np.full((1, self.robot.n_joints), MOTOR_TEMPERATURE_C))

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

        writer, reader = dds.endpoints(
            self.domain,
            self.iface,
            (c.state_topic, c.state_type),
            (c.command_topic, c.command_type),
            self._on_command,
            self.realtime_priority,
        )
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
        dt = self.physics.dt
        start = next_t = time.monotonic()
        while not self._stop.is_set() and (duration_s is None or time.monotonic() - start < duration_s):
            if self._reset_requested:
                self._reset_requested = False
                self.reset()
                log.info("reset to the start state")
            self.step()
            state = self.state()
            write(writer, self.codec.encode_state(state, self._applied_id, int(round(state.time[0] * 1000))))
            next_t += dt
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.05:  # far behind (a loaded machine): resynchronize rather than fast-forward
                self.stats["late_steps"] += 1
                next_t = time.monotonic()

    def stop(self) -> None:
        """Ask the serving loop to stop (returns at once)."""
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

    def wrench(
        self, attach: np.ndarray, vel: np.ndarray, ang_vel: np.ndarray, anchor: np.ndarray, stiffness: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Force (3,) at ``attach`` and torque (3,) in the world frame."""
        d = anchor - attach
        dist = np.linalg.norm(d)
        direction = d / max(dist, 1e-9)
        force = (stiffness * dist - self.damping * (vel @ direction)) * direction
        return force, -self.angular_damping * ang_vel


class BandPhysics(AdapterPhysics):
    """The H1-2 in the adapter (AdapterPhysics), with the band's wrench on the torso at every physics step while it
    is on: computed from the adapter's state before each step and passed through its ``apply_wrench``."""

    def __init__(self, robot: RobotSpec, physics_dt: float, band: Band, armature: str = "model"):
        import mujoco

        super().__init__(robot, physics_dt, armature)
        if "applied_wrench" not in self.sim.capabilities:
            raise HardwareError(f"the {self.sim.name} adapter cannot apply the band's wrench")
        self._mj, self.band, self.on, self._applied = mujoco, band, False, False
        self._torso = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
        self._kin = mujoco.MjData(self.model)  # the torso's pose and velocity from the adapter's state row
        self._row_spec = mujoco.mjtState.mjSTATE_FULLPHYSICS.value  # the MuJoCo adapter's get_state layout
        self._env0 = np.array([0])
        self.reset()
        # at the default pose, raised by rest_clearance, the band carries the robot's whole weight
        self._kinematics(velocity=False)
        self._anchor = self._attach_point() + np.array([0.0, 0.0, band.rest_clearance + band.anchor_height])
        self._stiffness = float(self.model.body_subtreemass[0]) * 9.81 / band.anchor_height

    def step(self, tau: np.ndarray) -> None:
        """One physics step with joint torques ``tau`` (actuated,) plus the band's torso wrench when it is on."""
        if self.on:
            force, torque = self._band_wrench()
            self.sim.apply_wrench(self._env0, "torso_link", force[None], torque[None])
            self._applied = True
        elif self._applied:  # released: remove the wrench once
            self.sim.apply_wrench(self._env0, "torso_link", np.zeros((1, 3)), np.zeros((1, 3)))
            self._applied = False
        super().step(tau)

    def _kinematics(self, velocity: bool = True) -> None:
        """Body poses (and, with ``velocity``, velocities) of the adapter's current state in ``self._kin``."""
        mj, m, d = self._mj, self.model, self._kin
        mj.mj_setState(m, d, self.sim.get_state()[0], self._row_spec)
        mj.mj_kinematics(m, d)
        if velocity:
            mj.mj_comPos(m, d)
            mj.mj_comVel(m, d)

    def _attach_point(self) -> np.ndarray:
        d, b = self._kin, self._torso
        return d.xpos[b] + d.xmat[b].reshape(3, 3) @ np.array([0, 0, self.band.attach_offset])

    def _band_wrench(self) -> tuple[np.ndarray, np.ndarray]:
        """The band's force (3,) and torque (3,) at the torso's centre of mass, world frame (xfrc_applied)."""
        self._kinematics()
        d, b = self._kin, self._torso
        attach = self._attach_point()
        vel = np.zeros(6)
        self._mj.mj_objectVelocity(self.model, d, self._mj.mjtObj.mjOBJ_BODY, b, vel, 0)  # at the COM: [ang, lin]
        arm = attach - d.xipos[b]
        ang, lin = vel[:3], vel[3:] + _cross(vel[:3], arm)
        force, torque = self.band.wrench(attach, lin, ang, self._anchor, self._stiffness)
        return force, torque + _cross(arm, force)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of two 3-vectors (np.cross costs ~15x more on vectors this small, inside the 2 ms tick)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


class H1_2Server(SimServer):
    """The simulated H1-2, optionally on the elastic band."""

    def __init__(
        self,
        iface: str = "lo",
        domain: int = 0,
        band: bool = False,
        robot: RobotSpec | None = None,
        physics_dt: float = 0.002,
        band_config: Band = Band(),
        armature: str = "model",
    ):
        from .unitree.h1_2 import UnitreeHgCodec

        robot = robot or get_robot("h1_2")
        self.band_started = band
        super().__init__(
            robot,
            UnitreeHgCodec(H1_2_MODE_MACHINE),
            iface,
            domain,
            physics_dt,
            physics=BandPhysics(robot, physics_dt, band_config, armature),
        )

    @property
    def band_on(self) -> bool:
        return self.physics.on

    @band_on.setter
    def band_on(self, on: bool) -> None:
        self.physics.on = self.stats["band"] = on  # reported with the statistics when robot-sim stops

    def reset(self) -> None:
        """Also put the band back as robot-sim started it."""
        super().reset()
        self.band_on = self.band_started

    def control(self, sample) -> None:
        """Also engage or release the band on a SimControl_ sample's ``band``."""
        from .sim_control import KEEP

        super().control(sample)
        if sample.band != KEEP and bool(sample.band) != self.band_on:
            self.band_on = bool(sample.band)
            log.info("elastic band %s", "engaged" if self.band_on else "released")


class PegArmServer(SimServer):
    """The simulated peg arm (the Panda holding its peg above the board), at its default pose, its joints
    braked until their motors are enabled (as an arm's brakes hold it while it is not controlled)."""

    def __init__(
        self,
        iface: str = "lo",
        domain: int = 0,
        robot: RobotSpec | None = None,
        physics_dt: float = 0.002,
        armature: str = "model",
    ):
        from .arms.sim import ArmCodec

        robot = robot or get_robot("peg_arm")
        super().__init__(robot, ArmCodec(robot.n_joints), iface, domain, physics_dt, brakes=True, armature=armature)


def sim_control(domain: int, iface: str, band: bool | None = None, reset: bool = False, repeats: int = 5) -> None:
    """Release/engage the simulated H1-2's band and/or reset a simulated robot (best effort topic:
    sent a few times; a reset is idempotent)."""
    from . import dds
    from .sim_control import KEEP, TOPIC_SIM_CONTROL, SimControl_

    writer, _ = dds.endpoints(domain, iface, (TOPIC_SIM_CONTROL, SimControl_), None)
    for _ in range(repeats):
        writer.write(SimControl_(band=KEEP if band is None else int(band), reset=int(reset)))
        time.sleep(0.01)


def make_server(
    robot: str, iface: str = "lo", domain: int = 0, band: bool = False, armature: str = "model"
) -> SimServer:
    """The robot-sim server for ``robot`` (h1_2 or peg_arm); HardwareError for another robot, or ``band`` on the arm.
    ``armature``: the model file's rotor inertia or the motor table's (``SimConfig.armature``; the H1-2's)."""
    if robot == "h1_2":
        return H1_2Server(iface=iface, domain=domain, band=band, armature=armature)
    if robot == "peg_arm":
        if band:
            raise HardwareError("--band holds a humanoid; the peg arm is fixed to its base")
        return PegArmServer(iface=iface, domain=domain, armature=armature)
    raise HardwareError(f"unknown robot {robot!r} for robot-sim; robots: h1_2, peg_arm")


def serve(
    robot: str,
    iface: str = "lo",
    domain: int = 0,
    band: bool = False,
    duration_s: float | None = None,
    armature: str = "model",
    realtime: int | None = None,
) -> None:
    """The ``embody robot-sim`` command: serve until Ctrl-C or SIGTERM (or ``duration_s``); ``realtime``:
    step under SCHED_FIFO at that priority."""
    import signal

    from .realtime import make_realtime

    server = make_server(robot, iface, domain, band, armature)
    # both stop the loop, also where SIGINT was ignored at start (children of non-interactive shells)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: server.stop())
    ready = lambda: print(
        f"robot-sim {robot}: serving on interface {iface!r}, DDS domain {domain}"  # noqa: E731
        f"{', on the band' if band else ''}",
        flush=True,
    )
    server.realtime_priority = realtime
    server.stats["realtime"] = make_realtime(realtime, f"robot-sim {robot}")
    server.run(duration_s, ready=ready)
    if server.robot.floating_base:  # where the robot ended up: a deploy's walk, measured by the simulator
        server.stats["base_pos_m"] = [round(float(x), 3) for x in server.physics.state().privileged.base_pos[0]]
    print(f"robot-sim {robot}: stopped; {server.stats}", flush=True)
