"""Human demonstrations of ``peg-insert`` by teleoperation, recorded as a cloned policy would see them.

``embody blindfolded collect --teleop keyboard|gamepad|spacemouse [--target sim|dds:IFACE] ...``
(``add_teleop_arguments`` / ``run_teleop``). ``embody blindfolded import --dataset DIR`` (``teleop_demos`` /
``run_import``) turns a recorded dataset into the peg study's ``demos.Demos`` (successful episodes only).

The devices, displays, homing and the supervised session are the core's (``embody.hardware.teleop``:
the arm is driven only through its RobotInterface and the safety supervisor, as ``embody deploy``
drives it; each tick is the task's own observe → action → action_to_command → after_step). This file
holds what is blindfolded's: what the human is told (a ``Region``) and shown (``learner_view``), the
true hole for the success test, the dataset schema, the conversion into peg demonstrations, and the CLI.

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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.exits import CommandError
from embody.hardware import teleop as core
from embody.hardware.teleop import DeviceError, InputDevice, PygameDisplay, TerminalDisplay, make_device
from embody.hardware.teleop.episodes import OUTCOMES

log = logging.getLogger("embody.blindfolded.teleop")

DATASET_DIR = Path("runs/blindfolded/teleop")
DEVICES = (*core.DEVICES, "scripted")  # embody.teleop.device's names
CLEAR = 0.005  # m above the true mouth: below it, homing draws the peg straight out first
_OBS_NAMES = (
    [f"q{i}" for i in range(7)]
    + [f"dq{i}" for i in range(7)]
    + ["tip_x", "tip_y", "tip_z"]
    + ["quat_w", "quat_x", "quat_y", "quat_z"]
    + ["fx", "fy", "fz", "mx", "my", "mz"]
    + ["last_x", "last_y", "last_z"]
    + ["target_x", "target_y", "target_z"]
)


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
    def parse(cls, text: str) -> Region:
        """``"cx,cy,half"`` in mm."""
        try:
            cx, cy, h = (float(v) for v in text.split(","))
        except ValueError:
            raise ValueError(
                f"a region is 'cx,cy,half_width' in mm relative to the nominal hole, got {text!r}"
            ) from None
        return cls((cx / 1000, cy / 1000), h / 1000)

    def contains(self, offset: np.ndarray) -> bool:
        """Whether the hole offset (x, y, ...) [m] lies in the region."""
        return bool((np.abs(np.asarray(offset[:2]) - self.center) <= self.half_width + 1e-9).all())

    def describe(self) -> str:
        """The region in words for the demonstrator (mm)."""
        return (
            f"hole within ±{self.half_width * 1000:.1f} mm of x {self.center[0] * 1000:+.1f}, "
            f"y {self.center[1] * 1000:+.1f} mm from the nominal hole"
        )


def _region_row(region: Region | None) -> np.ndarray:
    return np.zeros(4) if region is None else np.array([1.0, *region.center, region.half_width])


def learner_view(obs: np.ndarray, region: Region | None) -> list[str]:
    """The lines a demonstrator sees: only what the learner observes (plus the region told)."""
    from embody.sims.tasks.peg_insert import TIP, WRENCH

    tip, w = obs[TIP], obs[WRENCH]
    lines = [
        f"tip from the nominal hole: x {tip[0] * 1000:+6.1f}  y {tip[1] * 1000:+6.1f}  height {tip[2] * 1000:+6.1f} mm",
        f"wrist force (tared): {np.linalg.norm(w[:3]):5.1f} N   [{w[0]:+5.1f} {w[1]:+5.1f} {w[2]:+5.1f}] N",
    ]
    lines.append(region.describe() if region is not None else "hole: somewhere near the nominal position (not told)")
    return lines


# -- the task side ---------------------------------------------------------------------------------------


class TeleopTask(core.TeleopRunner):
    """The ``peg-insert`` task with one env on a live arm (``TeleopRunner``: ``PolicyRunner`` with a human)."""

    def __init__(self, config=None, seed: int = 0):
        from embody.robots import get_robot
        from embody.sims.tasks.peg_insert import PegInsert, PegInsertConfig

        config = dataclasses.replace(config) if config is not None else PegInsertConfig()
        config.sim = dataclasses.replace(config.sim, n_envs=1)
        if config.sim.control != "pd":
            raise ValueError(f"peg-insert uses {config.sim.control} control; the arm takes PD targets")
        self.config, self.seed = config, seed
        robot = get_robot(PegInsert.robot_name, **PegInsert.robot_params(config, seed))
        super().__init__(PegInsert(config, robot, 1, seed), robot)

    def start(self, hole: np.ndarray, yaw: float = 0.0) -> np.ndarray:
        """A new episode; returns the joint pose (7,) to home to. ``hole``: the true mouth (3,), base
        frame: the success test needs it, the observation never sees it."""
        q = super().start()
        self.task.place_hole(np.array([0]), hole, yaw)
        return q


def teleop_features(obs_size: int = 33, n_joints: int = 7) -> dict:
    """The dataset features of a teleop recording: the policy observation as ``observation.state``, the move as
    ``action``, ``next.done``, and the robot state and sent command as ``embody.*`` columns."""
    from embody.datasets.format import feature

    j = [f"joint{i}" for i in range(n_joints)]
    return {
        "observation.state": feature("float32", (obs_size,), _OBS_NAMES if obs_size == 33 else None),
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
        "embody.teleop.hole": feature("float64", (4,), ["x", "y", "z", "yaw"]),
    }


def state_from_frames(ep: dict, i: int):
    """The RobotState (n = 1) a recorded frame's observation was built from."""
    from embody.robots import RobotState

    row = lambda k: np.asarray(ep[f"embody.state.{k}"][i], dtype=np.float64).reshape(1, -1)  # noqa: E731
    return RobotState(
        joint_pos=row("joint_pos"),
        joint_vel=row("joint_vel"),
        joint_torque=row("joint_torque"),
        time=row("time").reshape(1),
        ee_pos=row("ee_pos"),
        ee_quat=row("ee_quat"),
        wrench=row("wrench"),
    )


# -- the session -----------------------------------------------------------------------------------------


def _frame(state, obs: np.ndarray, action: np.ndarray, sent) -> dict:
    return {
        "observation.state": obs[0],
        "action": action[0],
        "embody.state.joint_pos": state.joint_pos[0],
        "embody.state.joint_vel": state.joint_vel[0],
        "embody.state.joint_torque": state.joint_torque[0],
        "embody.state.ee_pos": state.ee_pos[0],
        "embody.state.ee_quat": state.ee_quat[0],
        "embody.state.wrench": state.wrench[0],
        "embody.state.time": state.time,
        "embody.sent.q": sent.q,
        "embody.sent.kp": sent.kp,
    }


def teleoperate(
    driver,
    config=None,
    device: InputDevice | None = None,
    episodes: int = 1,
    region: Region | None = None,
    out: str | Path = DATASET_DIR,
    rate_hz: int = 25,
    hole_pos=None,
    hole_yaw: float = 0.0,
    max_steps: int | None = None,
    seed: int = 0,
    display=None,
    home_speed: float = 0.1,
) -> dict:
    """Record up to ``episodes`` human demonstrations of peg-insert into the dataset ``out``; returns a summary.

    driver:   a RobotInterface with a ``supervisor`` (connected, ramped and started by the session if not)
    config:   the task's PegInsertConfig (default: the task's defaults); its hole_pos is the nominal hole
    device:   an InputDevice; ``region``: what the human is told (None: nothing)
    hole_pos: the true hole mouth (3,) [m, base frame] for the success test only (default: the board of
              the simulated arm, ``board_params(get_robot("peg_arm"))``); must lie inside ``region``
    max_steps: the episode limit in ticks (default: the task's max_episode_steps)

    The summary: saved episodes with their outcomes and lengths, ``aborted`` (Esc or the window
    closed: the episode in progress was discarded and the session ended), ``fault`` (the session
    ended in damping: the same), ``phase`` (the supervisor's when it ended), ``exit_code``, the
    dataset's episode count and the supervisor's counters.
    """
    if device is None:
        raise ValueError("teleoperate needs an input device")
    if rate_hz <= 0 or int(rate_hz) != rate_hz:
        raise ValueError(f"rate_hz must be a positive integer (the dataset's fps), got {rate_hz}")
    runner = TeleopTask(config, seed)
    if driver.robot.n_joints != runner.robot.n_joints:
        raise ValueError(f"the driver's robot {driver.robot.name!r} is not the task's {runner.robot.name!r}")
    hole = _true_hole(runner, hole_pos, region)
    max_steps = int(max_steps or runner.config.max_episode_steps)
    recording = {
        "source": "teleop",
        "task": runner.task.name,
        "robot": runner.robot.name,
        "seed": seed,
        "device": device.name,
        "region": None if region is None else dataclasses.asdict(region),
        "rate_hz": int(rate_hz),
        "max_steps": max_steps,
        "task_config": dataclasses.asdict(runner.config),
        "note": "embody.teleop.hole is the true hole pose, for analysis only: never an observation",
    }
    constant = {
        "embody.teleop.device": np.array([DEVICES.index(device.name if device.name in DEVICES else "scripted")]),
        "embody.teleop.region": _region_row(region),
        "embody.teleop.hole": np.array([*hole, hole_yaw]),
    }
    display = display if display is not None else TerminalDisplay()
    dataset = _Dataset(Path(out), int(rate_hz), runner, recording, constant)
    plan = core.TeleopPlan(
        episodes,
        max_steps,
        rate_hz,
        core.Homing(speed=home_speed, leash=runner.config.max_target_offset),
        start=lambda i: runner.start(hole, hole_yaw),
        floor_z=lambda i: hole[2] + CLEAR,
        on_step=lambda ep: dataset.recorder(ep, runner, display, region, episodes),
        on_episode=dataset.save,
    )
    try:
        result = core.teleoperate(driver, runner, device, plan)
    finally:
        dataset.close()
        display.close()
    if plan.aborted or result.fault:
        log.warning("episode discarded (%s)", "aborted" if plan.aborted else result.fault)
    return {
        **dataset.summary,
        "aborted": plan.aborted,
        "fault": result.fault,
        "counters": result.counters,
        "phase": result.ended_in,
        "exit_code": result.exit_code,
    }


def _true_hole(runner: TeleopTask, hole_pos, region: Region | None) -> np.ndarray:
    from embody.robots import get_robot
    from embody.robots.peg_arm import board_params

    hole = np.asarray(board_params(get_robot("peg_arm")).hole_pos if hole_pos is None else hole_pos, dtype=np.float64)
    if hole.shape != (3,) or not np.isfinite(hole).all():
        raise ValueError(f"hole_pos needs 3 finite coordinates, got {hole_pos}")
    offset = hole - runner.task.nominal
    if region is not None and not region.contains(offset):
        raise ValueError(
            f"the region told ({region.describe()}) does not contain the hole, which is at "
            f"{offset[0] * 1000:+.1f}, {offset[1] * 1000:+.1f} mm from the nominal one"
        )
    return hole


class _Dataset:
    """Finished episodes into the dataset at ``out`` (created at the first one); frames wait in memory."""

    def __init__(self, out: Path, fps: int, runner: TeleopTask, recording: dict, constant: dict):
        self.out, self.fps, self.runner, self.recording, self.constant = out, fps, runner, recording, constant
        self.frames: list[dict] = []
        self.writer = None
        self.summary = {"episodes": [], "dataset": str(out)}

    def recorder(self, ep: core.Episode, runner: TeleopTask, display, region: Region | None, episodes: int):
        self.frames = []
        label = f"episode {ep.index + 1}/{episodes}"

        def record(state, sent) -> None:
            obs, action = runner.last
            self.frames.append(_frame(state, obs, action, sent))
            display.show(learner_view(obs[0], region), f"{label}, step {len(self.frames)}")

        return record

    def save(self, ep: core.Episode) -> None:
        from embody.datasets.format import DatasetWriter

        if not self.frames:
            log.warning("episode %d ended (%s) before its first step: nothing to record", ep.index, ep.outcome)
            return
        if self.writer is None:
            task = self.runner.task
            self.writer = DatasetWriter(
                self.out,
                fps=self.fps,
                features=teleop_features(task.observation_size, self.runner.robot.n_joints),
                robot_type=self.runner.robot.name,
                recording=self.recording,
            )
        constant = {**self.constant, "embody.teleop.outcome": np.array([OUTCOMES.index(ep.outcome)])}
        for i, frame in enumerate(self.frames):
            self.writer.add_frame(
                {**frame, **constant, "next.done": np.array([i == len(self.frames) - 1])}, task=self.runner.task.name
            )
        index = self.writer.save_episode()
        self.summary["episodes"].append({"index": index, "outcome": ep.outcome, "steps": len(self.frames)})
        log.info("episode %d saved as %d: %s after %d steps", ep.index, index, ep.outcome, len(self.frames))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.summary["dataset_episodes"] = self.writer.num_episodes


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
        raise DatasetFormatError(
            path, "no such dataset folder (record one with `embody blindfolded collect --teleop keyboard`)"
        )
    ds = load(path)
    missing = [k for k in _NEEDED if k not in ds.features]
    if missing:
        raise DatasetFormatError(
            path,
            f"not a teleop dataset: missing feature(s) {', '.join(missing)} "
            "(written by `embody blindfolded collect --teleop`)",
        )
    recording = ds.info.get("embody", {}).get("recording", {}) or {}
    if recording.get("source") != "teleop":
        raise DatasetFormatError(
            path, f"not a teleop dataset: its recording source is {recording.get('source')!r}, not 'teleop'"
        )
    shapes = {k: tuple(ds.features[k]["shape"]) for k in _NEEDED}
    expected = {
        "observation.state": (OBS_SIZE,),
        "action": (3,),
        "embody.teleop.region": (4,),
        "embody.teleop.outcome": (1,),
        "embody.teleop.hole": (4,),
    }
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
    ep_outcome = {
        i: OUTCOMES[int(outcome_col[lo[i]])] if 0 <= int(outcome_col[lo[i]]) < len(OUTCOMES) else "?" for i in selected
    }
    keep = [i for i in selected if ep_outcome[i] in outcomes]
    if not keep:
        counts = {o: [ep_outcome[i] for i in selected].count(o) for o in OUTCOMES}
        raise ValueError(
            f"{path}: no {' or '.join(outcomes)} episode to convert among its {len(selected)} "
            f"({', '.join(f'{n} {o}' for o, n in counts.items() if n)})"
        )
    rows = ds.column("embody.teleop.region")
    regions = {tuple(float(v) for v in rows[lo[i]]) for i in keep}
    if len(regions) > 1:
        raise ValueError(
            f"{path}: the episodes to convert were told different regions ({sorted(regions)}); "
            "convert each region's episodes separately (teleop_demos(..., episodes=[...]))"
        )
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
    data.meta = {
        "domain": "peg",
        "level": human_level(region),
        "information_bits": region_information(region),
        "tasks": tasks,
        "episode_tasks": episode_tasks,
        "region": None if region is None else {"center": list(region.center), "half_width": region.half_width},
        "source": "teleop",
        "dataset": str(path.resolve()),
        "dataset_episodes": keep,
        "outcomes": [ep_outcome[i] for i in keep],
        "expert_success": [int(ep_outcome[i] == "success") for i in selected],
        "expert_steps": [int(hi[i] - lo[i]) for i in selected],
        "rate_hz": int(ds.fps),
        "max_steps": recording.get("max_steps"),
        "device": recording.get("device"),
    }
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
    print(
        f"blindfolded import: {len(d.episode_lengths)} episode(s) ({'/'.join(sorted(set(m['outcomes'])))}; "
        f"{int(d.episode_lengths.sum())} steps, {len(m['tasks'])} hole(s)) of {dataset}, level {m['level']} "
        f"({m['information_bits']:g} bits) -> {target}",
        file=sys.stderr,
        flush=True,
    )
    return 0


# -- command line ----------------------------------------------------------------------------------------


def add_teleop_arguments(parser) -> None:
    """The options of ``embody blindfolded collect --teleop DEVICE``."""
    from embody.commands import nonneg_int, positive_int

    g = parser.add_argument_group("teleoperation (collect --teleop: human demonstrations of peg-insert)")
    g.add_argument(
        "--teleop",
        choices=("keyboard", "gamepad", "spacemouse"),
        help="collect human demonstrations with this device instead of the scripted experts",
    )
    g.add_argument("--episodes", type=positive_int, default=10, help="teleop: episodes to record (default 10)")
    g.add_argument(
        "--region",
        metavar="CX,CY,HALF",
        help="teleop: tell the demonstrator the hole lies within ±HALF mm of (CX, CY) mm from the nominal "
        "hole (default: tell nothing)",
    )
    g.add_argument("--target", default="sim", help="teleop: sim (starts `embody robot-sim peg_arm`) or dds:IFACE")
    g.add_argument("--dds-domain", type=nonneg_int, default=0, help="teleop: DDS domain (default 0)")
    g.add_argument(
        "--hole-pos",
        metavar="X,Y,Z",
        help="teleop: the true hole mouth in m, base frame (a real arm: measured; default the simulated board)",
    )
    g.add_argument(
        "--hole-offset",
        metavar="DX,DY",
        help="teleop, sim: shift the nominal hole by -DX,-DY mm, so the true hole is DX,DY mm from it",
    )
    g.add_argument(
        "--rate-hz", type=positive_int, default=25, help="teleop: control and recording rate (default 25, the task's)"
    )
    g.add_argument(
        "--max-steps", type=positive_int, help="teleop: episode limit in ticks (default the task's, 150 = 6 s)"
    )
    g.add_argument("--dataset", metavar="DIR", help="teleop: dataset folder (default OUT/teleop)")


def run_teleop(args) -> int:
    """``embody blindfolded collect --teleop DEVICE``: start the (simulated) arm, record, stop; exit 1 when
    a fault ended the session (the arm damped)."""
    from embody.hardware.deploy import open_target, parse_target
    from embody.sims.tasks.peg_insert import PegInsertConfig

    try:
        region = Region.parse(args.region) if args.region else None
        start_sim, _ = parse_target(args.target)
        hole = [float(v) for v in args.hole_pos.split(",")] if args.hole_pos else None
        if hole is not None and len(hole) != 3:
            raise ValueError(f"--hole-pos needs X,Y,Z, got {args.hole_pos!r}")
        if hole is None and not start_sim:
            raise ValueError(
                "a real arm needs --hole-pos X,Y,Z (the measured hole mouth, m, base frame): the "
                "success test uses it (the demonstrator is never shown it)"
            )
        config = PegInsertConfig()
        if args.hole_offset:
            dx, dy = (float(v) / 1000 for v in args.hole_offset.split(","))
            if not start_sim:
                raise ValueError(
                    "--hole-offset is for the simulated arm; on a real one move the board and give --hole-pos"
                )
            config.hole_pos = [config.hole_pos[0] - dx, config.hole_pos[1] - dy, config.hole_pos[2]]
        device = make_device(args.teleop)
    except (ValueError, DeviceError) as e:
        raise CommandError(str(e)) from None
    display = PygameDisplay() if args.teleop in ("keyboard", "gamepad") else TerminalDisplay()
    out = Path(args.dataset) if args.dataset else Path(args.out) / "teleop"
    try:
        with open_target(TeleopTask(config, args.seed).robot, args.target, args.dds_domain) as target:
            summary = teleoperate(
                target.driver,
                config,
                device,
                args.episodes,
                region,
                out,
                args.rate_hz,
                hole,
                max_steps=args.max_steps,
                seed=args.seed,
                display=display,
            )
    except ValueError as e:
        raise CommandError(str(e)) from None
    finally:
        device.close()
    outcomes = [e["outcome"] for e in summary["episodes"]]
    print(
        f"blindfolded teleop: {len(outcomes)} episodes saved to {out} ({outcomes.count('success')} successes); "
        f"dataset now {summary.get('dataset_episodes', 0)} episodes"
        + ("; aborted" if summary["aborted"] else "")
        + (f"; arm damped: {summary['fault']}" if summary["fault"] else ""),
        file=sys.stderr,
        flush=True,
    )
    return summary["exit_code"]
