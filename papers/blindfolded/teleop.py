"""Human demonstrations of ``peg-insert`` by teleoperation, recorded as a cloned policy would see them.

``embody blindfolded collect --teleop keyboard|gamepad|spacemouse [--target sim|dds:IFACE] ...``
(``add_teleop_arguments`` / ``run_teleop``). ``embody blindfolded import --dataset DIR`` (``teleop_demos`` /
``run_import``) turns a recorded dataset into the peg study's ``demos.Demos`` (successful episodes only).

The arm is driven only through its RobotInterface and the safety supervisor, as ``embody deploy``
drives it: the supervisor ramps it to its default pose and holds; then, per episode, a homing move
(Cartesian straight lines, lifted out of the hole first, sent as supervised PD targets) takes the
peg tip to the task's start pose (the task's own ``reset_distribution``), and the human moves it.
Each tick is the VecEnv's task sequence on the live state, exactly as ``PolicyRunner`` does it:
``observe`` → the human's move as the action → ``action_to_command`` → ``after_step``. The
recorded pairs (the 33-dim observation, the 3-dim move in [-1, 1]) are therefore what a cloned
policy sees and emits.

An episode ends on success (the task's own test, which needs the true hole pose: the known board
of the simulated arm, or ``hole_pos`` measured on a real one; the human is never shown it), when
the human presses "done", or at ``max_steps``. It is then written as one dataset episode (the
writer's atomic save). "abort" (Esc), a supervisor fault (the arm is damped) or an exception
discards the episode being recorded: frames are kept in memory and only a finished episode
reaches the dataset, so nothing is ever half-written. Abort and faults also end the session.

Blindfolds: the human sees only the learner's view (tip height above the nominal mouth, the tared
wrist wrench) and, when told one, a ``Region`` known to contain the hole (a square around a point
relative to the nominal mouth; ``information.box_information`` gives its bits).

Dataset (LeRobot v3.0 layout, ``embody.datasets``; fps = ``rate_hz``): ``observation.state`` the
task observation (33, float32), ``action`` the move (3, float32), ``next.done``; the robot state
each observation was built from (``embody.state.*``, float64, exact), the command the supervisor
sent (``embody.sent.q``, ``embody.sent.kp``); per episode (constant over its frames):
``embody.teleop.device``, ``embody.teleop.region`` (told, cx, cy, half width; m, relative to the
nominal mouth), ``embody.teleop.outcome`` (success, done, timeout) and, for analysis only,
``embody.teleop.hole`` (the true mouth x, y, z and yaw, base frame; never an observation).

Input devices share ``read() -> (move (3,) in [-1, 1], buttons)``; buttons are a set of "done",
"abort" (and "slow" for the keyboard's Shift). pygame(-ce) is imported lazily; without a display
SDL's dummy video driver is used, so everything runs headless.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from embody.exits import CommandError

log = logging.getLogger("embody.blindfolded.teleop")

DATASET_DIR = Path("runs/blindfolded/teleop")
DEVICES = ("keyboard", "gamepad", "spacemouse", "scripted")
OUTCOMES = ("success", "done", "timeout")
BUTTONS = frozenset({"done", "abort", "grip", "slow"})
SLOW = 0.3  # the keyboard's Shift: fine positioning
_OBS_NAMES = ([f"q{i}" for i in range(7)] + [f"dq{i}" for i in range(7)] + ["tip_x", "tip_y", "tip_z"]
              + ["quat_w", "quat_x", "quat_y", "quat_z"] + ["fx", "fy", "fz", "mx", "my", "mz"]
              + ["last_x", "last_y", "last_z"] + ["target_x", "target_y", "target_z"])


class DeviceError(RuntimeError):
    """An input device that is missing, unsupported or not connected."""


class TeleopError(RuntimeError):
    """The session could not run (the supervisor damped the arm, the homing move failed)."""


class InputDevice(Protocol):
    name: str

    def read(self) -> tuple[np.ndarray, set[str]]:
        """(move (3,) in [-1, 1]: +x away from the arm's base, +y to its left, +z up; buttons held or pressed)."""

    def close(self) -> None: ...


# -- pygame ---------------------------------------------------------------------------------------------

def init_pygame(window: bool = True, size: tuple[int, int] = (480, 160)):
    """pygame(-ce), initialized; SDL's dummy video driver when there is no display (headless)."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as e:
        raise DeviceError("keyboard and gamepad teleoperation need pygame-ce (pip install pygame-ce)") from e
    for part in (pygame.display, pygame.joystick, pygame.font):  # not pygame.init(): no audio wanted
        part.init()
    if window and pygame.display.get_surface() is None:
        pygame.display.set_mode(size)
        pygame.display.set_caption("embody teleop: peg-insert (the learner's view)")
    return pygame


def dead_zone(value: np.ndarray | float, zone: float) -> np.ndarray:
    """|v| < zone → 0, beyond it rescaled to reach ±1 at ±1 (no jump at the zone's edge); clipped to [-1, 1]."""
    v = np.clip(np.asarray(value, dtype=np.float64), -1.0, 1.0)
    return np.where(np.abs(v) < zone, 0.0, np.sign(v) * (np.abs(v) - zone) / (1.0 - zone))


class KeyboardInput:
    """Keys held in the pygame window: arrows or WASD move x/y (Up/W +x, Left/A +y), R/PageUp and
    F/PageDown z; Shift slows to 30%; Enter (or Space) ends the episode ("done"), Esc or closing the
    window aborts. Held keys are tracked from KEYDOWN/KEYUP events (what a real keyboard and
    ``pygame.event.post`` both produce); losing the window's focus releases them all."""

    name = "keyboard"

    def __init__(self):
        self.pg = pg = init_pygame()
        self.axes = {pg.K_UP: (0, 1), pg.K_w: (0, 1), pg.K_DOWN: (0, -1), pg.K_s: (0, -1),
                     pg.K_LEFT: (1, 1), pg.K_a: (1, 1), pg.K_RIGHT: (1, -1), pg.K_d: (1, -1),
                     pg.K_r: (2, 1), pg.K_PAGEUP: (2, 1), pg.K_f: (2, -1), pg.K_PAGEDOWN: (2, -1)}
        self.held: set[int] = set()
        self.shift = False

    def read(self) -> tuple[np.ndarray, set[str]]:
        pg, buttons = self.pg, set()
        for e in pg.event.get():
            if e.type == pg.KEYDOWN:
                if e.key == pg.K_ESCAPE:
                    buttons.add("abort")
                elif e.key in (pg.K_RETURN, pg.K_KP_ENTER, pg.K_SPACE):
                    buttons.add("done")
                elif e.key in (pg.K_LSHIFT, pg.K_RSHIFT):
                    self.shift = True
                else:
                    self.held.add(e.key)
            elif e.type == pg.KEYUP:
                self.held.discard(e.key)
                if e.key in (pg.K_LSHIFT, pg.K_RSHIFT):
                    self.shift = False
            elif e.type == pg.QUIT:
                buttons.add("abort")
            elif e.type == pg.WINDOWFOCUSLOST:
                self.held.clear()
                self.shift = False
        move = np.zeros(3)
        for key in self.held:
            if key in self.axes:
                axis, sign = self.axes[key]
                move[axis] += sign
        move = np.clip(move, -1.0, 1.0)
        if self.shift:
            buttons.add("slow")
            move *= SLOW
        return move, buttons

    def close(self) -> None:
        pass


class GamepadInput:
    """A pygame joystick: left stick x/y (stick up = +x, left = +y), right stick vertical z (up = +z),
    each with a dead zone; button 0 (A / cross) or 7 (start) = "done", button 1 (B / circle) or 6
    (back) = "abort". Axes are tracked from JOYAXISMOTION events. ``joystick``: an index into
    pygame's joysticks or an opened joystick (anything with ``get_instance_id()``)."""

    name = "gamepad"
    AXES = {0: (1, -1.0), 1: (0, -1.0), 3: (2, -1.0)}  # SDL axis → (move axis, sign); SDL's stick up is -1
    DONE, ABORT = (0, 7), (1, 6)

    def __init__(self, joystick=0, dead_zone: float = 0.15):
        if not 0 <= dead_zone < 1:
            raise ValueError(f"dead_zone must lie in [0, 1), got {dead_zone}")
        self.pg = pg = init_pygame()
        if isinstance(joystick, int):
            pg.joystick.init()
            if pg.joystick.get_count() <= joystick:
                raise DeviceError(f"no gamepad {joystick}: pygame sees {pg.joystick.get_count()} joystick(s); "
                                  "plug one in, or use --teleop keyboard")
            joystick = pg.joystick.Joystick(joystick)
        self.joystick, self.zone = joystick, dead_zone
        self.instance = joystick.get_instance_id()
        self.raw = np.zeros(3)

    def read(self) -> tuple[np.ndarray, set[str]]:
        pg, buttons = self.pg, set()
        for e in pg.event.get():
            if getattr(e, "instance_id", self.instance) != self.instance:
                continue
            if e.type == pg.JOYAXISMOTION and e.axis in self.AXES:
                axis, sign = self.AXES[e.axis]
                self.raw[axis] = sign * float(e.value)
            elif e.type == pg.JOYBUTTONDOWN:
                buttons.add("done" if e.button in self.DONE else "abort" if e.button in self.ABORT else "grip")
            elif e.type == pg.JOYDEVICEREMOVED:
                self.raw[:] = 0.0
                buttons.add("abort")
            elif e.type == pg.QUIT:
                buttons.add("abort")
        return dead_zone(self.raw, self.zone), buttons

    def close(self) -> None:
        pass


class SpaceMouseInput:
    """A 3Dconnexion SpaceMouse through ``pyspacemouse`` (optional: DeviceError naming it when missing):
    translation x/y/z with a dead zone; left button "done", right button "abort"."""

    name = "spacemouse"

    def __init__(self, dead_zone: float = 0.1):
        try:
            import pyspacemouse
        except ImportError as e:
            raise DeviceError("SpaceMouseInput needs the 'pyspacemouse' package (pip install pyspacemouse, and "
                              "hidapi for your system); use --teleop keyboard or gamepad without it") from e
        self.lib, self.zone = pyspacemouse, dead_zone
        if not pyspacemouse.open():
            raise DeviceError("pyspacemouse found no SpaceMouse (is it plugged in, and readable by this user?)")

    def read(self) -> tuple[np.ndarray, set[str]]:
        s = self.lib.read()
        buttons = set()
        pressed = list(getattr(s, "buttons", []) or [])
        if pressed[:1] == [1]:
            buttons.add("done")
        if pressed[1:2] == [1]:
            buttons.add("abort")
        return dead_zone([s.y, -s.x, s.z], self.zone), buttons

    def close(self) -> None:
        close = getattr(self.lib, "close", None)
        if close is not None:
            close()


def make_device(name: str) -> InputDevice:
    if name == "keyboard":
        return KeyboardInput()
    if name == "gamepad":
        return GamepadInput()
    if name == "spacemouse":
        return SpaceMouseInput()
    raise DeviceError(f"unknown teleoperation device {name!r}; devices: keyboard, gamepad, spacemouse")


# -- what the human is told and shown -----------------------------------------------------------------

@dataclass(frozen=True)
class Region:
    """The hole's mouth lies within ``half_width`` [m] of ``center`` (x, y) [m, relative to the nominal
    mouth] in x and in y: what a partly blindfolded demonstrator is told."""

    center: tuple[float, float] = (0.0, 0.0)
    half_width: float = 0.008

    def __post_init__(self) -> None:
        if len(self.center) != 2 or not all(math.isfinite(c) for c in self.center):
            raise ValueError(f"Region.center needs 2 finite coordinates, got {self.center}")
        if not (math.isfinite(self.half_width) and self.half_width > 0):
            raise ValueError(f"Region.half_width must be > 0, got {self.half_width}")

    @classmethod
    def parse(cls, text: str) -> "Region":
        """``"cx,cy,half"`` in mm."""
        try:
            cx, cy, h = (float(v) for v in text.split(","))
        except ValueError:
            raise ValueError(f"a region is 'cx,cy,half_width' in mm relative to the nominal hole, got {text!r}") \
                from None
        return cls((cx / 1000, cy / 1000), h / 1000)

    def contains(self, offset: np.ndarray) -> bool:
        return bool((np.abs(np.asarray(offset[:2]) - self.center) <= self.half_width + 1e-9).all())

    def describe(self) -> str:
        return (f"hole within ±{self.half_width * 1000:.1f} mm of x {self.center[0] * 1000:+.1f}, "
                f"y {self.center[1] * 1000:+.1f} mm from the nominal hole")


def _region_row(region: Region | None) -> np.ndarray:
    return np.zeros(4) if region is None else np.array([1.0, *region.center, region.half_width])


def learner_view(obs: np.ndarray, region: Region | None) -> list[str]:
    """The lines a demonstrator sees: only what the learner observes (plus the region told)."""
    from embody.sims.tasks.peg_insert import TIP, WRENCH

    tip, w = obs[TIP], obs[WRENCH]
    lines = [f"tip from the nominal hole: x {tip[0] * 1000:+6.1f}  y {tip[1] * 1000:+6.1f}  "
             f"height {tip[2] * 1000:+6.1f} mm",
             f"wrist force (tared): {np.linalg.norm(w[:3]):5.1f} N   "
             f"[{w[0]:+5.1f} {w[1]:+5.1f} {w[2]:+5.1f}] N"]
    lines.append(region.describe() if region is not None else "hole: somewhere near the nominal position (not told)")
    return lines


class TerminalDisplay:
    """The learner's view as one status line on stderr, a few times a second."""

    def __init__(self, stream=sys.stderr, interval_s: float = 0.2):
        self.stream, self.interval, self.last = stream, interval_s, -math.inf

    def show(self, lines: list[str], status: str = "") -> None:
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.stream.write("\r" + " | ".join(lines + ([status] if status else [])) + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")


class PygameDisplay:
    """The learner's view in the pygame window the keyboard reads."""

    def __init__(self):
        self.pg = pg = init_pygame()
        self.font = pg.font.Font(None, 24)

    def show(self, lines: list[str], status: str = "") -> None:
        pg = self.pg
        surface = pg.display.get_surface()
        if surface is None:
            return
        surface.fill((20, 20, 28))
        for i, text in enumerate(lines + ([status] if status else [])):
            surface.blit(self.font.render(text, True, (230, 230, 230)), (10, 10 + 26 * i))
        pg.display.flip()

    def close(self) -> None:
        pass


# -- the task side ---------------------------------------------------------------------------------------

class TeleopTask:
    """The ``peg-insert`` task with one env on a live arm: ``PolicyRunner`` with a human instead of a policy.
    ``command(state, move)`` makes the VecEnv's per-step task calls in the same order: observe → act →
    action_to_command → after_step."""

    def __init__(self, config=None, seed: int = 0):
        from embody.robots import get_robot
        from embody.sims.tasks.peg_insert import PegInsert, PegInsertConfig

        config = dataclasses.replace(config) if config is not None else PegInsertConfig()
        config.sim = dataclasses.replace(config.sim, n_envs=1)
        if config.sim.control != "pd":
            raise ValueError(f"peg-insert uses {config.sim.control} control; the arm takes PD targets")
        self.config, self.seed = config, seed
        self.robot = get_robot(PegInsert.robot_name, **PegInsert.robot_params(config, seed))
        self.task = PegInsert(config, self.robot, 1, seed)
        self.last: tuple[np.ndarray, np.ndarray] | None = None

    def start(self, hole: np.ndarray, yaw: float = 0.0) -> np.ndarray:
        """A new episode (the task's reset draw and on_reset); returns the joint pose (7,) to home to.
        ``hole``: the true mouth (3,), base frame: the success test needs it, the observation never sees it."""
        task, ids = self.task, np.array([0])
        q = task.reset_distribution(ids).joint_pos[0].copy()
        task.on_reset(ids)
        task.hole[0], task.yaw[0] = hole, yaw
        return q

    def command(self, state, move: np.ndarray):
        from embody.hardware.interface import JointCommand

        # float32 in [-1, 1], as a policy emits it (and is recorded); NaN stays NaN, for the supervisor to refuse
        action = np.clip(np.asarray(move, dtype=np.float64).reshape(1, 3), -1.0, 1.0).astype(np.float32)
        obs = self.task.observe(state)
        self.last = (obs, action)
        targets = self.task.action_to_command(action.astype(np.float64))
        self.task.after_step(action)
        q = self.robot.default_pose.copy()
        q[self.robot.actuated] = targets[0]
        return JointCommand.pd(self.robot, q)

    def success(self, state) -> bool:
        return bool(self.task.success(state)[0])

    def home_command(self, q: np.ndarray):
        """Hold joint pose ``q`` (7,) with gravity compensation (as the task's PD commands are made)."""
        from embody.hardware.interface import JointCommand

        io = self.task.io
        q = np.clip(q, self.robot.lower, self.robot.upper)
        return JointCommand.pd(self.robot, q + io.model.gravity_torque(q[None])[0] / io.kp)


def teleop_features(obs_size: int = 33, n_joints: int = 7) -> dict:
    from embody.datasets.format import feature

    j = [f"joint{i}" for i in range(n_joints)]
    return {"observation.state": feature("float32", (obs_size,), _OBS_NAMES if obs_size == 33 else None),
            "action": feature("float32", (3,), ["x", "y", "z"]),
            "next.done": feature("bool", (1,)),
            "embody.state.joint_pos": feature("float64", (n_joints,), j),
            "embody.state.joint_vel": feature("float64", (n_joints,), j),
            "embody.state.joint_torque": feature("float64", (n_joints,), j),
            "embody.state.ee_pos": feature("float64", (3,), ["x", "y", "z"]),
            "embody.state.ee_quat": feature("float64", (4,), ["w", "x", "y", "z"]),
            "embody.state.wrench": feature("float64", (6,), ["fx", "fy", "fz", "mx", "my", "mz"]),
            "embody.state.time": feature("float64", (1,)),
            "embody.sent.q": feature("float32", (n_joints,), j),
            "embody.sent.kp": feature("float32", (n_joints,), j),
            "embody.teleop.device": feature("int64", (1,), list(DEVICES)),
            "embody.teleop.region": feature("float64", (4,), ["told", "cx", "cy", "half_width"]),
            "embody.teleop.outcome": feature("int64", (1,), list(OUTCOMES)),
            "embody.teleop.hole": feature("float64", (4,), ["x", "y", "z", "yaw"])}


def state_from_frames(ep: dict, i: int):
    """The RobotState (n = 1) a recorded frame's observation was built from."""
    from embody.robots import RobotState

    row = lambda k: np.asarray(ep[f"embody.state.{k}"][i], dtype=np.float64).reshape(1, -1)  # noqa: E731
    return RobotState(joint_pos=row("joint_pos"), joint_vel=row("joint_vel"), joint_torque=row("joint_torque"),
                      time=row("time").reshape(1), ee_pos=row("ee_pos"), ee_quat=row("ee_quat"), wrench=row("wrench"))


# -- the loop --------------------------------------------------------------------------------------------

def _wait_phase(supervisor, phase, timeout_s: float) -> None:
    from embody.hardware.deploy import wait_phase

    try:
        wait_phase(supervisor, phase, timeout_s)
    except (RuntimeError, TimeoutError) as e:
        raise TeleopError(str(e)) from None


def _to_policy(driver) -> None:
    """Ramp and hold through the supervisor if it has not been (as deploy does), then POLICY."""
    from embody.hardware.supervisor import Phase

    sup = driver.supervisor
    if sup.phase is Phase.DAMPING:
        raise TeleopError(f"the supervisor is damping the arm ({sup.events[-1].reason if sup.events else 'e-stop'}); "
                          "reset it and start again")
    if sup.phase is Phase.ZERO_TORQUE:
        sup.start_ramp()
    if sup.phase is Phase.RAMP:
        _wait_phase(sup, Phase.HOLD, sup.config.ramp_s + 5.0)
    if sup.phase is Phase.HOLD:
        time.sleep(0.2)
        sup.start_policy()


def home(driver, runner: TeleopTask, q_goal: np.ndarray, rate_hz: float, speed: float = 0.1,
         lift: float = 0.02, tolerance: float = 0.002, settle_s: float = 3.0, extract_speed: float = 0.02,
         clear: float = 0.005) -> None:
    """Take the peg tip to the pose ``q_goal`` through the supervisor: out of the hole first, then straight up
    to ``lift`` above the start height, across, then down, at ``speed`` m/s (supervised PD targets with
    gravity compensation, IK with the peg pointing down); then wait until the tip is within ``tolerance``.

    Out of the hole: while the tip is below ``clear`` above the true mouth (``runner.start``'s hole), the peg
    is drawn straight up along its axis at ``extract_speed``, keeping the tip's x, y and the hand's measured
    orientation, its target never more than the task's ``max_target_offset`` above the measured tip. After a
    successful episode the peg sits 2 cm deep in a hole with 1 mm of clearance: lifted at ``speed`` there, the
    big joint-target steps (4 mm per tick at 0.1 m/s, 10 mm at 0.25 m/s) wedged it against the hole's wall
    (wrist force up to 28 N over ‖f₀‖ at 0.1 m/s; 63–71 N at 0.25 m/s: over the supervisor's 60 N within
    3 ticks, the arm damped, the session over); drawn out like this, under 6 N. The schedule never catches
    up after a late tick (a burst of steps would be one big jump of the target)."""
    from embody.robots.peg_arm.kinematics import DOWN

    model, period = runner.task.io.model, 1.0 / rate_hz
    goal = model.ee_pose(q_goal[None])[0][0]
    state = driver.read_state()
    tip, q = state.ee_pos[0].copy(), state.joint_pos.copy()
    top = float(runner.task.hole[0, 2]) + clear
    if tip[2] < top:  # in the hole (or near the board)
        tip, q = _draw_out(driver, runner, tip, q, top, extract_speed, period, settle_s)
    z_safe = max(tip[2], goal[2] + lift)
    waypoints = [np.array([tip[0], tip[1], z_safe]), np.array([goal[0], goal[1], z_safe]), goal]
    for a, b in zip([tip] + waypoints[:-1], waypoints):
        n = max(1, int(math.ceil(np.linalg.norm(b - a) / (speed * period))))
        next_t = time.monotonic()
        for k in range(1, n + 1):
            p = a + (b - a) * k / n
            q = model.ik(p[None], DOWN[None], q, iters=20)
            _send_home(driver, runner, q[0] if k < n or b is not goal else q_goal)
            next_t = _pace(next_t, period)
    deadline = time.monotonic() + settle_s
    while np.linalg.norm(driver.read_state().ee_pos[0] - goal) > tolerance:
        _send_home(driver, runner, q_goal)
        if time.monotonic() > deadline:
            raise TeleopError(f"homing: the tip did not reach the start within {tolerance * 1000:g} mm in "
                              f"{settle_s:g} s (at {driver.read_state().ee_pos[0]}, goal {goal})")
        time.sleep(period)


def _draw_out(driver, runner: TeleopTask, tip: np.ndarray, q: np.ndarray, top: float, speed: float,
              period: float, settle_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Draw the peg straight up along its axis to height ``top`` at ``speed`` (the hand's measured
    orientation, the target at most the task's ``max_target_offset`` above the measured tip) → (tip, q)."""
    model = runner.task.io.model
    rot, leash = model.ee_pose(q)[1], runner.config.max_target_offset
    p = tip.copy()
    deadline = time.monotonic() + (top - tip[2]) / speed + settle_s
    next_t = time.monotonic()
    while p[2] < top:
        p[2] = min(top, p[2] + speed * period, driver.read_state().ee_pos[0, 2] + leash)
        q = model.ik(p[None], rot, q, iters=20)
        _send_home(driver, runner, q[0])
        if time.monotonic() > deadline:
            raise TeleopError(f"homing: the peg did not come out of the hole (tip at "
                              f"{driver.read_state().ee_pos[0]}, pulled to {p})")
        next_t = _pace(next_t, period)
    return p, q


def _send_home(driver, runner: TeleopTask, q: np.ndarray) -> None:
    from embody.hardware.supervisor import Phase

    sup = driver.supervisor
    driver.send_command(runner.home_command(q))
    if sup.phase is not Phase.POLICY:
        raise TeleopError(f"homing: the supervisor left POLICY: {sup.events[-1].reason}")


def _pace(next_t: float, period: float) -> float:
    """Sleep until the next tick; when late, start the schedule again from now (a catch-up burst of
    targets would be one big jump)."""
    next_t += period
    now = time.monotonic()
    if next_t > now:
        time.sleep(next_t - now)
        return next_t
    return now


def _record_episode(driver, runner: TeleopTask, device: InputDevice, display, region: Region | None,
                    max_steps: int, rate_hz: float, label: str) -> tuple[list[dict], str | None, dict]:
    """One episode's control loop at ``rate_hz`` (the arm homed to its start): ``(frames, outcome, stop)``.

    ``frames``: one dict of dataset features per tick (observation, action, the robot state it was
    built from, the command sent); ``outcome``: "success", "done" or "timeout", or None when the
    episode must be discarded and the session end; ``stop`` then says why (the summary's
    ``{"aborted": True}`` or ``{"fault": reason}``), and is ``{}`` otherwise."""
    from embody.hardware.supervisor import Phase

    sup, period = driver.supervisor, 1.0 / rate_hz
    frames: list[dict] = []
    t0 = next_t = time.monotonic()
    while True:
        state = driver.read_state()
        state.time = np.array([time.monotonic() - t0])  # the task's clock: time since the episode began
        if runner.success(state):
            return frames, "success", {}
        move, buttons = device.read()
        if "abort" in buttons:
            return frames, None, {"aborted": True}
        if "done" in buttons:
            return frames, "done", {}
        if len(frames) >= max_steps:
            return frames, "timeout", {}
        sent = driver.send_command(runner.command(state, move))
        if sup.phase is not Phase.POLICY:
            return frames, None, {"fault": sup.events[-1].reason if sup.events else sup.phase.name}
        obs, action = runner.last
        frames.append({"observation.state": obs[0], "action": action[0],
                       "embody.state.joint_pos": state.joint_pos[0], "embody.state.joint_vel": state.joint_vel[0],
                       "embody.state.joint_torque": state.joint_torque[0], "embody.state.ee_pos": state.ee_pos[0],
                       "embody.state.ee_quat": state.ee_quat[0], "embody.state.wrench": state.wrench[0],
                       "embody.state.time": state.time, "embody.sent.q": sent.q, "embody.sent.kp": sent.kp})
        display.show(learner_view(obs[0], region), f"{label}, step {len(frames)}")
        next_t += period
        time.sleep(max(0.0, next_t - time.monotonic()))


def teleoperate(driver, config=None, device: InputDevice | None = None, episodes: int = 1,
                region: Region | None = None, out: str | Path = DATASET_DIR, rate_hz: int = 25,
                hole_pos=None, hole_yaw: float = 0.0, max_steps: int | None = None, seed: int = 0,
                display=None, home_speed: float = 0.1) -> dict:
    """Record up to ``episodes`` human demonstrations of peg-insert into the dataset ``out``; returns a summary.

    driver:   a connected RobotInterface with a ``supervisor`` (ramped and started here if it is not)
    config:   the task's PegInsertConfig (default: the task's defaults); its hole_pos is the nominal hole
    device:   an InputDevice; ``region``: what the human is told (None: nothing)
    hole_pos: the true hole mouth (3,) [m, base frame] for the success test only (default: the board of
              the simulated arm, ``board_params(get_robot("peg_arm"))``); must lie inside ``region``
    max_steps: the episode limit in ticks (default: the task's max_episode_steps)

    The summary: saved episodes with their outcomes and lengths, ``aborted`` (Esc or the window
    closed: the episode in progress was discarded and the session ended), ``fault`` (the supervisor
    damped the arm: the same), the dataset's episode count and the supervisor's counters.
    """
    from embody.datasets.format import DatasetWriter
    from embody.robots import get_robot
    from embody.robots.peg_arm import board_params

    if device is None:
        raise ValueError("teleoperate needs an input device")
    if rate_hz <= 0 or int(rate_hz) != rate_hz:
        raise ValueError(f"rate_hz must be a positive integer (the dataset's fps), got {rate_hz}")
    runner = TeleopTask(config, seed)
    task = runner.task
    if driver.robot.n_joints != runner.robot.n_joints:
        raise ValueError(f"the driver's robot {driver.robot.name!r} is not the task's {runner.robot.name!r}")
    hole = np.asarray(board_params(get_robot("peg_arm")).hole_pos if hole_pos is None else hole_pos, dtype=np.float64)
    if hole.shape != (3,) or not np.isfinite(hole).all():
        raise ValueError(f"hole_pos needs 3 finite coordinates, got {hole_pos}")
    offset = hole - task.nominal
    if region is not None and not region.contains(offset):
        raise ValueError(f"the region told ({region.describe()}) does not contain the hole, which is at "
                         f"{offset[0] * 1000:+.1f}, {offset[1] * 1000:+.1f} mm from the nominal one")
    max_steps = int(max_steps or runner.config.max_episode_steps)
    device_id = DEVICES.index(device.name) if device.name in DEVICES else DEVICES.index("scripted")
    display = display if display is not None else TerminalDisplay()
    recording = {"source": "teleop", "task": task.name, "robot": runner.robot.name, "seed": seed,
                 "device": device.name, "region": None if region is None else dataclasses.asdict(region),
                 "rate_hz": int(rate_hz), "max_steps": max_steps, "task_config": dataclasses.asdict(runner.config),
                 "note": "embody.teleop.hole is the true hole pose, for analysis only: never an observation"}
    writer = None
    sup = driver.supervisor
    summary = {"episodes": [], "aborted": False, "fault": None, "dataset": str(out)}
    try:
        _to_policy(driver)
        for ep in range(episodes):
            q_start = runner.start(hole, hole_yaw)
            home(driver, runner, q_start, rate_hz, speed=home_speed)
            device.read()  # drop what was pressed while homing
            frames, outcome, stop = _record_episode(driver, runner, device, display, region, max_steps, rate_hz,
                                                    f"episode {ep + 1}/{episodes}")
            summary.update(stop)
            if outcome is None:  # aborted or damped: the episode is dropped, the session ends
                log.warning("episode %d discarded (%s)", ep, "aborted" if summary["aborted"] else summary["fault"])
                break
            if not frames:
                log.warning("episode %d ended (%s) before its first step: nothing to record", ep, outcome)
                continue
            constant = {"embody.teleop.device": np.array([device_id]), "embody.teleop.region": _region_row(region),
                        "embody.teleop.outcome": np.array([OUTCOMES.index(outcome)]),
                        "embody.teleop.hole": np.array([*hole, hole_yaw])}
            if writer is None:
                writer = DatasetWriter(out, fps=int(rate_hz), features=teleop_features(task.observation_size,
                                                                                       runner.robot.n_joints),
                                       robot_type=runner.robot.name, recording=recording)
            for i, frame in enumerate(frames):
                writer.add_frame({**frame, **constant, "next.done": np.array([i == len(frames) - 1])}, task=task.name)
            index = writer.save_episode()
            summary["episodes"].append({"index": index, "outcome": outcome, "steps": len(frames)})
            log.info("episode %d saved as %d: %s after %d steps", ep, index, outcome, len(frames))
    finally:
        if writer is not None:
            writer.close()
            summary["dataset_episodes"] = writer.num_episodes
        display.close()
    summary["counters"] = dict(sup.counters)
    summary["phase"] = sup.phase.name
    return summary


# -- into the study: teleop dataset → peg Demos --------------------------------------------------------

_NEEDED = ("observation.state", "action", "embody.teleop.region", "embody.teleop.outcome", "embody.teleop.hole")


def human_level(region: Region | None) -> str:
    """The information level of demonstrations told ``region``: "human" (nothing told), or
    "human-region-<side>mm" with side = 2·half_width, as peg's ``region-<side>mm`` levels name theirs."""
    if region is None:
        return "human"
    return f"human-region-{round(2 * region.half_width * 1000, 3):g}mm"


def region_information(region: Region | None) -> float:
    """Bits the region told gives about the hole, as ``peg.information_bits`` counts them: the prior
    square (±``HOLE_XY_RANGE``, 8 mm) against the told square (side 2·half_width, at least δ = 1 mm, at
    most the prior), ``information.box_information``; nothing told: 0 bits."""
    from .information import box_information
    from .peg import DELTA, HOLE_XY_RANGE

    if region is None:
        return 0.0
    prior = 2 * HOLE_XY_RANGE
    known = min(max(2 * region.half_width, DELTA), prior)
    return box_information((prior, prior), (known, known))


def _open_teleop(path: Path):
    """(dataset, its recording metadata, the nominal hole xy (2,)) of the teleop dataset at ``path``, or a
    DatasetFormatError naming it."""
    from embody.datasets.format import DatasetFormatError, load
    from embody.sims.tasks.peg_insert import OBS_SIZE

    if not path.is_dir():
        raise DatasetFormatError(path, "no such dataset folder (record one with `embody blindfolded collect "
                                       "--teleop keyboard`)")
    ds = load(path)
    missing = [k for k in _NEEDED if k not in ds.features]
    if missing:
        raise DatasetFormatError(path, f"not a teleop dataset: missing feature(s) {', '.join(missing)} "
                                       "(written by `embody blindfolded collect --teleop`)")
    recording = ds.info.get("embody", {}).get("recording", {}) or {}
    if recording.get("source") != "teleop":
        raise DatasetFormatError(path, f"not a teleop dataset: its recording source is "
                                       f"{recording.get('source')!r}, not 'teleop'")
    shapes = {k: tuple(ds.features[k]["shape"]) for k in _NEEDED}
    expected = {"observation.state": (OBS_SIZE,), "action": (3,), "embody.teleop.region": (4,),
                "embody.teleop.outcome": (1,), "embody.teleop.hole": (4,)}
    for k, shape in expected.items():
        if shapes[k] != shape:
            what = " (the peg learner's observation)" if k == "observation.state" else ""
            raise DatasetFormatError(path, f"{k} has shape {shapes[k]} per frame, expected {shape}{what}")
    try:
        nominal = np.asarray(recording["task_config"]["hole_pos"], dtype=np.float64)[:2]
    except (KeyError, TypeError, ValueError):
        raise DatasetFormatError(path, "its recording has no task_config.hole_pos (the nominal hole)") from None
    return ds, recording, nominal


def teleop_demos(dataset_dir: str | Path, outcomes=("success",), episodes=None):
    """A teleop dataset (``teleoperate``'s) as peg ``demos.Demos``, for ``PegDomain.train`` and the study:
    the core ``Demonstrations.from_dataset`` reads the rows, this chooses the episodes and writes the meta.

    Keeps the episodes whose ``embody.teleop.outcome`` is in ``outcomes`` (default: successes only),
    of ``episodes`` (dataset episode indices; default all). ``obs["obs"]`` = ``observation.state``
    (N, 33) and ``actions`` = ``action`` (N, 3), float32 as recorded (exactly). ``meta``: domain
    "peg", ``level`` (``human_level`` of the region told), ``information_bits``
    (``region_information``), ``tasks`` (the distinct true holes, xy [m] from the nominal one, in
    order of appearance), ``episode_tasks`` (each kept episode's index into tasks), ``region``,
    ``dataset`` (its resolved path), ``dataset_episodes`` (the kept indices), ``outcomes`` (theirs),
    ``expert_success`` / ``expert_steps`` (every selected episode's), ``rate_hz``, ``max_steps``.

    Raises ``DatasetFormatError`` (naming the path) for a folder that is no teleop dataset, lacks a
    feature or has observations of another size than the learner's; ValueError (naming it too)
    when no episode is left, or when the kept ones were told different regions (convert those
    separately with ``episodes``).
    """
    from embody.policies.datasets import Demonstrations

    from .demos import Demos

    path = Path(dataset_dir)
    bad = [o for o in outcomes if o not in OUTCOMES]
    if bad or not outcomes:
        raise ValueError(f"outcomes must be some of {list(OUTCOMES)}, got {list(outcomes)}")
    ds, recording, nominal = _open_teleop(path)
    if episodes is None:
        episodes = range(ds.num_episodes)
    selected = [int(i) for i in episodes]
    for i in selected:
        if not 0 <= i < ds.num_episodes:
            raise ValueError(f"{path}: episode {i} out of range (the dataset has {ds.num_episodes})")
    lo, hi = ds.episode_bounds
    outcome_col = ds.column("embody.teleop.outcome").reshape(-1)
    ep_outcome = {i: OUTCOMES[int(outcome_col[lo[i]])] if 0 <= int(outcome_col[lo[i]]) < len(OUTCOMES) else "?"
                  for i in selected}
    keep = [i for i in selected if ep_outcome[i] in outcomes]
    if not keep:
        counts = {o: [ep_outcome[i] for i in selected].count(o) for o in OUTCOMES}
        raise ValueError(f"{path}: no {' or '.join(outcomes)} episode to convert among its {len(selected)} "
                         f"({', '.join(f'{n} {o}' for o, n in counts.items() if n)})")
    rows = ds.column("embody.teleop.region")
    regions = {tuple(float(v) for v in rows[lo[i]]) for i in keep}
    if len(regions) > 1:
        raise ValueError(f"{path}: the episodes to convert were told different regions ({sorted(regions)}); "
                         "convert each region's episodes separately (teleop_demos(..., episodes=[...]))")
    told, cx, cy, half = regions.pop()
    region = Region((cx, cy), half) if told > 0.5 else None
    holes = ds.column("embody.teleop.hole")
    tasks: list[list[float]] = []
    episode_tasks = []
    for i in keep:
        offset = [float(v) for v in holes[lo[i], :2] - nominal]
        if offset not in tasks:
            tasks.append(offset)
        episode_tasks.append(tasks.index(offset))
    data = Demonstrations.from_dataset(ds, {"obs": "observation.state"}, "action", episodes=keep)
    data.meta = {"domain": "peg", "level": human_level(region), "information_bits": region_information(region),
                 "tasks": tasks, "episode_tasks": episode_tasks,
                 "region": None if region is None else {"center": list(region.center),
                                                        "half_width": region.half_width},
                 "source": "teleop", "dataset": str(path.resolve()), "dataset_episodes": keep,
                 "outcomes": [ep_outcome[i] for i in keep],
                 "expert_success": [int(ep_outcome[i] == "success") for i in selected],
                 "expert_steps": [int(hi[i] - lo[i]) for i in selected],
                 "rate_hz": int(ds.fps), "max_steps": recording.get("max_steps"),
                 "device": recording.get("device")}
    return Demos.from_demonstrations(data)


def run_import(args) -> int:
    """``embody blindfolded import [--dataset DIR] [--out DIR | FILE.npz] [--seed S]``: a teleop dataset
    (default OUT/teleop) as peg demonstrations, saved to FILE.npz or OUT/demos/<level>_seed<S>.npz."""
    from .demos import save
    from .study import demos_path

    out = Path(args.out)
    try:
        if args.dataset is None and out.suffix == ".npz":
            raise ValueError("import --out FILE.npz needs --dataset DIR (the teleop dataset)")
        dataset = Path(args.dataset) if args.dataset else out / "teleop"
        d = teleop_demos(dataset)
        target = out if out.suffix == ".npz" else demos_path(out, d.meta["level"], args.seed)
        save(d, target)
    except (ValueError, OSError) as e:  # DatasetFormatError is a ValueError
        raise CommandError(str(e)) from None
    m = d.meta
    print(f"blindfolded import: {len(d.episode_lengths)} episode(s) ({'/'.join(sorted(set(m['outcomes'])))}; "
          f"{int(d.episode_lengths.sum())} steps, {len(m['tasks'])} hole(s)) of {dataset}, level {m['level']} "
          f"({m['information_bits']:g} bits) -> {target}", file=sys.stderr, flush=True)
    return 0


# -- command line ----------------------------------------------------------------------------------------

def add_teleop_arguments(parser) -> None:
    """The options of ``embody blindfolded collect --teleop DEVICE``."""
    from embody.commands import nonneg_int, positive_int

    g = parser.add_argument_group("teleoperation (collect --teleop: human demonstrations of peg-insert)")
    g.add_argument("--teleop", choices=("keyboard", "gamepad", "spacemouse"),
                   help="collect human demonstrations with this device instead of the scripted experts")
    g.add_argument("--episodes", type=positive_int, default=10, help="teleop: episodes to record (default 10)")
    g.add_argument("--region", metavar="CX,CY,HALF",
                   help="teleop: tell the demonstrator the hole lies within ±HALF mm of (CX, CY) mm from the nominal "
                        "hole (default: tell nothing)")
    g.add_argument("--target", default="sim", help="teleop: sim (starts `embody robot-sim peg_arm`) or dds:IFACE")
    g.add_argument("--dds-domain", type=nonneg_int, default=0, help="teleop: DDS domain (default 0)")
    g.add_argument("--hole-pos", metavar="X,Y,Z",
                   help="teleop: the true hole mouth in m, base frame (a real arm: measured; default the simulated board)")
    g.add_argument("--hole-offset", metavar="DX,DY",
                   help="teleop, sim: shift the nominal hole by -DX,-DY mm, so the true hole is DX,DY mm from it")
    g.add_argument("--rate-hz", type=positive_int, default=25, help="teleop: control and recording rate (default 25, the task's)")
    g.add_argument("--max-steps", type=positive_int, help="teleop: episode limit in ticks (default the task's, 150 = 6 s)")
    g.add_argument("--dataset", metavar="DIR", help="teleop: dataset folder (default OUT/teleop)")


def run_teleop(args) -> int:
    """``embody blindfolded collect --teleop DEVICE``: start the (simulated) arm, connect, record, stop."""
    from embody.hardware.deploy import make_driver, parse_target, start_robot_sim, stop_robot_sim
    from embody.sims.tasks.peg_insert import PegInsertConfig

    try:
        region = Region.parse(args.region) if args.region else None
        start_sim, iface = parse_target(args.target)
        hole = [float(v) for v in args.hole_pos.split(",")] if args.hole_pos else None
        if hole is not None and len(hole) != 3:
            raise ValueError(f"--hole-pos needs X,Y,Z, got {args.hole_pos!r}")
        if hole is None and not start_sim:
            raise ValueError("a real arm needs --hole-pos X,Y,Z (the measured hole mouth, m, base frame): the "
                             "success test uses it (the demonstrator is never shown it)")
        config = PegInsertConfig()
        if args.hole_offset:
            dx, dy = (float(v) / 1000 for v in args.hole_offset.split(","))
            if not start_sim:
                raise ValueError("--hole-offset is for the simulated arm; on a real one move the board and give --hole-pos")
            config.hole_pos = [config.hole_pos[0] - dx, config.hole_pos[1] - dy, config.hole_pos[2]]
        device = make_device(args.teleop)
    except (ValueError, DeviceError) as e:
        raise CommandError(str(e)) from None
    display = PygameDisplay() if args.teleop in ("keyboard", "gamepad") else TerminalDisplay()
    out = Path(args.dataset) if args.dataset else Path(args.out) / "teleop"
    runner = TeleopTask(config, args.seed)
    sim = start_robot_sim("peg_arm", iface, args.dds_domain, band=False) if start_sim else None
    try:
        driver = make_driver(runner.robot, iface, args.dds_domain, None)
        driver.connect(10.0)
        with driver:
            driver.supervisor.install_signal_handlers()
            try:
                summary = teleoperate(driver, config, device, args.episodes, region, out, args.rate_hz, hole,
                                      max_steps=args.max_steps, seed=args.seed, display=display)
            finally:
                driver.supervisor.uninstall_signal_handlers()
    except (TeleopError, ValueError) as e:
        raise CommandError(str(e)) from None
    finally:
        device.close()
        if sim is not None:
            stop_robot_sim(sim)
    outcomes = [e["outcome"] for e in summary["episodes"]]
    print(f"blindfolded teleop: {len(outcomes)} episodes saved to {out} ({outcomes.count('success')} successes); "
          f"dataset now {summary.get('dataset_episodes', 0)} episodes"
          + ("; aborted" if summary["aborted"] else "") + (f"; arm damped: {summary['fault']}" if summary["fault"] else ""),
          file=sys.stderr, flush=True)
    return 1 if summary["fault"] else 0
