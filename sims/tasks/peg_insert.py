"""peg-insert: peg_arm puts its peg into the board's hole, whose position it does not observe.

Geometry: robots/peg_arm (make_spec): a 12 mm radius peg, 80 mm long, a 40 mm deep hole with
``clearance`` (1 mm) between peg and wall. The hole's mouth is nominally at ``hole_pos`` (base
frame, m); at each reset its x and y are drawn uniformly within ±``hole_xy_range`` of that
(8 mm, eight times the clearance: inserting blind at the nominal position almost always lands
on the rim) and its yaw within ±``hole_yaw_range`` (0: the hole is round). Moving the board per
env needs the simulator capability ``fixture_pose``; with both ranges 0 the task needs none and
runs on every adapter. The clearance is one number per VecEnv: ``clearance``, or, when
``clearance_range`` = [low, high] is given, drawn from it with the env seed (per-env hole
geometry would need per-env collision shapes, which only some engines can change).

Actions (3): a move of the Cartesian target of the peg tip, target += ``action_scale`` · a
(5 mm per step at |a| = 1), with the peg kept pointing down; a = 0 holds the target. Each
coordinate of the target stays within ``max_target_offset`` (3 mm) of the measured tip (a
leash), so a blocked peg is pressed by the arm's stiffness over at most that distance: compliant
by construction. The task turns the target into joint PD targets with the robot-side inverse
kinematics (two damped-least-squares steps from the previous joint target, the redundancy
pulled toward the home pose) plus gravity compensation (tasks/arm_common.py).

Episode: 6 s at 25 Hz (150 control steps of 20 physics steps of 2 ms). The arm starts with the
tip ``start_height`` (4 cm) above the nominal hole, within ±``start_xy_noise`` in x and y.
Success, which ends the episode: the tip is at least ``insert_depth`` (2 cm) below the mouth,
inside the hole.

Observation (33, never the hole pose): q − q_home (7), q̇ (7), tip position relative to the
nominal hole mouth (3), tip orientation quaternion w,x,y,z (4), tared wrist wrench (6, see
arm_common.py), the previous action (3), the Cartesian target relative to the tip (3, the
controller's own state). The hole's z is not randomized, so the tip's height
above the mouth is observed; its lateral offset to the hole is not. With ``contact_history``, 5
more (38): elapsed time, whether and since when the tip touched the board, and where it first did
(``PegInsert.history``): a learner that searches needs them, and only a recurrent policy trained on
whole episodes could work them out by itself.
Privileged observation (5): the true hole mouth relative to the nominal one (3), the hole's yaw
(1) and the clearance (1).

Contact force: the peak norm of the tared wrist force over each finished episode is kept in
``episode_peak_force`` (read with ``take_episode_stats``); the ``force`` reward term penalizes
force above ``force_limit``.

``ScriptedExpert`` (below) is the privileged expert for this task's interface. Measured on MuJoCo
(`embody distill peg-insert --scale paper`, 200 evaluation episodes): both of its approaches
insert 100% (peak wrist force ~1 N aligning in the air, ~6 N sliding on the board); the same
expert told the hole is at its nominal place inserts 0% (tests/sims/test_peg_tasks.py); the
distilled GRU student 93%. On PyBullet the peg jams at 1 mm clearance (its cylinder collides
~1 mm fatter, Bullet's collision margin); it inserts at 2.5 mm.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from embody.config import ConfigError
from embody.robots import RobotState
from embody.robots.peg_arm import PegBoard, board_params
from embody.robots.peg_arm import constants as C
from embody.robots.peg_arm.kinematics import DOWN
from embody.rotations import yaw_quat

from ..base import InitState, SimConfig
from ..task import Task, TaskConfig
from .arm_common import WRENCH_SOURCES, ArmIO
from .arm_reach import check_reachable

# observation layout
Q, DQ, TIP, QUAT, WRENCH, LAST, TARGET = (
    slice(0, 7),
    slice(7, 14),
    slice(14, 17),
    slice(17, 21),
    slice(21, 27),
    slice(27, 30),
    slice(30, 33),
)
HOLE, YAW, CLEARANCE = slice(0, 3), 3, 4  # privileged layout
OBS_SIZE, PRIVILEGED_SIZE = 33, 5
HISTORY_SIZE = 5  # contact_history's extra observation (appended after TARGET)
PROGRESS_SIZE = 2  # search_progress's extra observation (appended last)
SLID_SCALE = 0.1  # m: search_progress reports the distance slid on the face in these units
TOUCH_HEIGHT = 0.15e-3  # m: the tip this close above the face (or lower) counts as touching the board
MAX_CLEARANCE = 0.01  # m


@dataclass
class PegInsertConfig(TaskConfig):
    """peg-insert settings; lengths in metres, positions in the robot base frame (hole geometry, ranges: module
    docstring)."""

    sim: SimConfig = field(default_factory=lambda: SimConfig(decimation=20, control="pd"))
    max_episode_steps: int = 150
    reward_weights: dict[str, float] = field(
        default_factory=lambda: {"align": 0.5, "depth": 1.0, "inserted": 5.0, "force": -0.05, "action_rate": -0.01}
    )
    hole_pos: list[float] = field(default_factory=lambda: [0.5, 0.0, 0.0])  # nominal mouth, m, base frame
    hole_xy_range: float = 0.008  # m, ± around hole_pos in x and y (needs fixture_pose when > 0)
    hole_yaw_range: float = 0.0  # rad, ± (needs fixture_pose when > 0)
    clearance: float = 0.001  # m, radial gap between peg and hole
    clearance_range: list[float] = field(default_factory=list)  # [low, high]: drawn per VecEnv from its seed
    peg_radius: float = 0.012
    peg_length: float = 0.08
    hole_depth: float = 0.04
    insert_depth: float = 0.02  # m below the mouth for success
    start_height: float = 0.04  # m, tip above the nominal mouth at reset
    start_xy_noise: float = 0.003  # m, ± in x and y
    action_scale: float = 0.005  # m of target motion per step and unit action
    max_target_offset: float = 0.003  # m, per coordinate, between the target and the measured tip
    force_limit: float = 30.0  # N, the force reward term penalizes more
    tare_steps: int = 2
    wrench_source: str = "ft"  # ft | joint_torque (see arm_common.py; joint_torque for simulators without F/T)
    contact_history: bool = False  # append HISTORY_SIZE features of the episode so far (observe's docstring)
    search_progress: bool = False  # append PROGRESS_SIZE features: how far a search on the face has got (progress)
    last_action: bool = True  # observe the previous action; False zeroes its 3 columns (observe's docstring)


def observation_size(c: PegInsertConfig) -> int:
    """The learner's observation size: 33, + 5 with ``contact_history``, + 2 with ``search_progress``."""
    return OBS_SIZE + (HISTORY_SIZE if c.contact_history else 0) + (PROGRESS_SIZE if c.search_progress else 0)


def validate(c: PegInsertConfig) -> None:
    """ConfigError naming the first out-of-range value (reach is checked when the task is built)."""
    if len(c.hole_pos) != 3:
        raise ConfigError(f"hole_pos needs 3 coordinates, got {c.hole_pos}")
    if not 0 <= c.clearance <= MAX_CLEARANCE:
        raise ConfigError(f"clearance must lie in [0, {MAX_CLEARANCE}] m, got {c.clearance}")
    if c.clearance_range:
        lo, hi = (list(c.clearance_range) + [None])[:2] if len(c.clearance_range) == 2 else (None, None)
        if lo is None or not 0 <= lo <= hi <= MAX_CLEARANCE:
            raise ConfigError(
                f"clearance_range must be [low, high] with 0 <= low <= high <= {MAX_CLEARANCE} m, "
                f"got {c.clearance_range}"
            )
    for name in ("hole_xy_range", "hole_yaw_range", "start_xy_noise"):
        if getattr(c, name) < 0:
            raise ConfigError(f"{name} must be >= 0, got {getattr(c, name)}")
    if c.hole_xy_range > 0.05:
        raise ConfigError(
            f"hole_xy_range must be <= 0.05 m (the board's hole stays under the arm), got {c.hole_xy_range}"
        )
    for name in ("action_scale", "max_target_offset", "start_height", "force_limit"):
        if not getattr(c, name) > 0:
            raise ConfigError(f"{name} must be > 0, got {getattr(c, name)}")
    if not 0 < c.insert_depth < c.hole_depth:
        raise ConfigError(f"insert_depth must lie in (0, hole_depth = {c.hole_depth}) m, got {c.insert_depth}")
    if c.wrench_source not in WRENCH_SOURCES:
        raise ConfigError(f"wrench_source must be one of {list(WRENCH_SOURCES)}, got {c.wrench_source!r}")
    try:
        PegBoard(tuple(c.hole_pos), 0.0, c.clearance, c.peg_radius, c.peg_length, c.hole_depth)
    except ValueError as e:
        raise ConfigError(f"peg/hole geometry: {e}") from None


class PegInsert(Task):
    """peg_arm inserts its peg into a hole whose pose it does not observe (actions, observation, reward: module
    docstring)."""

    name = "peg-insert"
    learning_bar = ("success", 0.5)
    robot_name = "peg_arm"
    config_class = PegInsertConfig

    @classmethod
    def robot_params(cls, config: PegInsertConfig, seed: int = 0) -> dict:
        """The board geometry for peg_arm's ``make_spec``; the clearance is drawn from ``clearance_range`` with ``seed``
        when given. Raises ConfigError for an invalid config."""
        validate(config)
        clearance = config.clearance
        if config.clearance_range:
            clearance = float(np.random.default_rng([seed, 7]).uniform(*config.clearance_range))
        return {
            "hole_pos": tuple(config.hole_pos),
            "hole_yaw": 0.0,
            "clearance": clearance,
            "peg_radius": config.peg_radius,
            "peg_length": config.peg_length,
            "hole_depth": config.hole_depth,
        }

    def __init__(self, config: PegInsertConfig, robot, n_envs: int, seed: int = 0):
        super().__init__(config, robot, n_envs, seed)
        validate(config)
        c = config
        self.last_action = np.zeros((n_envs, self.action_size))
        self.board = board_params(robot)
        self.nominal = np.asarray(self.board.hole_pos, dtype=np.float64)
        self.io = ArmIO(robot, n_envs, c.tare_steps, c.wrench_source)
        start = self.nominal + [0.0, 0.0, c.start_height]
        self.home = check_reachable(self.io, start[None], robot.default_pose, "start position above hole_pos")[0]
        r = c.hole_xy_range + c.start_xy_noise
        corners = np.array(
            [self.nominal + [x, y, z] for x in (-r, r) for y in (-r, r) for z in (-c.insert_depth, c.start_height)]
        )
        check_reachable(self.io, corners, self.home, "hole position (with hole_xy_range)")
        self.hole = np.tile(self.nominal, (n_envs, 1))  # true mouth centre per env
        self.yaw = np.zeros(n_envs)
        self.peak_force = np.zeros(n_envs)
        self.episode_peak_force: list[float] = []
        self._running = np.zeros(n_envs, dtype=bool)
        self.target = np.tile(self.nominal, (n_envs, 1))  # the controller's tip target
        self.touch_step = np.full(n_envs, -1, dtype=np.int64)  # contact_history: step of the first touch (-1: none)
        self.touch_xy = np.zeros((n_envs, 2))  # ... and the tip's xy then, relative to the nominal mouth
        self.slid = np.zeros(n_envs)  # search_progress: path length [m] slid on the face since the first touch
        self.reach = np.zeros(n_envs)  # ... the farthest Chebyshev distance [m] from the nominal mouth while touching
        self.prev_xy = np.zeros((n_envs, 2))  # ... the tip's xy and step at the last update (one update per step)
        self.prev_step = np.full(n_envs, -1, dtype=np.int64)
        self.q_cmd = np.tile(self.home, (n_envs, 1))  # its joint-space solution

    @property
    def observation_size(self) -> int:
        return observation_size(self.config)

    @property
    def privileged_size(self) -> int:
        return PRIVILEGED_SIZE

    @property
    def action_size(self) -> int:
        """3: a move of the tip's Cartesian target."""
        return 3

    @property
    def randomizes_hole(self) -> bool:
        """Whether the board moves per reset (then the simulator needs ``fixture_pose``)."""
        return self.config.hole_xy_range > 0 or self.config.hole_yaw_range > 0

    # -- for a live robot (teleoperation, hardware/teleop) -------------------------------
    @property
    def arm_model(self):
        """The arm's kinematics (ee_pose, ik, gravity_torque), for moves outside the task's actions."""
        return self.io.model

    def hold_targets(self, q: np.ndarray) -> np.ndarray:
        """Joint PD targets (…, 7) that hold pose ``q`` (…, 7), within the joint limits, with gravity
        compensation: how the task's own commands are made."""
        q = np.clip(q, self.robot.lower, self.robot.upper)
        return q + self.io.model.gravity_torque(np.atleast_2d(q)).reshape(np.shape(q)) / self.io.kp

    def place_hole(self, env_ids: np.ndarray, pos: np.ndarray, yaw: np.ndarray | float = 0.0) -> None:
        """The true hole mouth (k, 3) [m, base frame] and yaw [rad] of ``env_ids``, where the task does not
        place the board itself (a live robot: measured). ``success`` uses it; the observation never does."""
        self.hole[env_ids], self.yaw[env_ids] = pos, yaw

    def requirements(self) -> frozenset[str]:
        extra = self.io.requirements() | ({"fixture_pose"} if self.randomizes_hole else set())
        return super().requirements() | extra

    # -- episode -------------------------------------------------------------------------
    def sample_fixtures(self, env_ids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Draw each env's hole x, y and yaw; the board's new pose, or nothing when the hole is not randomized."""
        k, c = len(env_ids), self.config
        self.hole[env_ids] = self.nominal
        self.hole[env_ids, :2] += self.rng.uniform(-c.hole_xy_range, c.hole_xy_range, (k, 2))
        self.yaw[env_ids] = self.rng.uniform(-c.hole_yaw_range, c.hole_yaw_range, k)
        if not self.randomizes_hole:
            return {}
        return {C.BOARD_BODY: (self.hole[env_ids].copy(), yaw_quat(self.yaw[env_ids]))}

    def reset_distribution(self, env_ids: np.ndarray) -> InitState:
        """The IK pose with the tip ``start_height`` above the nominal hole, ±``start_xy_noise`` in x and y, peg down,
        at rest."""
        k, c = len(env_ids), self.config
        tip = (
            self.nominal
            + [0.0, 0.0, c.start_height]
            + np.c_[self.rng.uniform(-c.start_xy_noise, c.start_xy_noise, (k, 2)), np.zeros(k)]
        )
        q = self.io.model.ik(tip, DOWN[None], np.tile(self.home, (k, 1)), iters=30)
        self.target[env_ids], self.q_cmd[env_ids] = self.io.model.ee_pose(q)[0], q
        return InitState(joint_pos=q, joint_vel=np.zeros((k, 7)))

    def on_reset(self, env_ids: np.ndarray) -> None:
        """Also record the finished episodes' peak force in ``episode_peak_force`` and restart the wrench tare."""
        super().on_reset(env_ids)
        done = env_ids[self._running[env_ids]]
        self.episode_peak_force.extend(self.peak_force[done].tolist())
        self._running[env_ids] = True
        self.peak_force[env_ids] = 0.0
        self.touch_step[env_ids], self.touch_xy[env_ids] = -1, 0.0
        self.slid[env_ids], self.reach[env_ids], self.prev_step[env_ids] = 0.0, 0.0, -1
        self.io.on_reset(env_ids)

    def take_episode_stats(self) -> dict[str, list[float]]:
        """Per finished episode since the last call: ``peak_force`` [N], the largest tared wrist force."""
        out = {"peak_force": self.episode_peak_force}
        self.episode_peak_force = []
        return out

    def after_step(self, action: np.ndarray) -> None:
        super().after_step(action)
        self.io.after_step()

    def action_to_command(self, action: np.ndarray) -> np.ndarray:
        """Move the tip target by ``action_scale`` · clip(a, -1, 1) (leashed to ``max_target_offset`` around the tip),
        then two IK steps to joint PD targets with gravity compensation; the arm holds still until the wrench is
        tared."""
        m, c = self.io.model, self.config
        move = c.action_scale * np.clip(action, -1.0, 1.0)
        move[self.io.steps < self.io.tare_steps] = 0.0  # the arm holds still until the wrench is tared
        tip, _ = m.ee_pose(self.io.q)
        self.target = tip + np.clip(self.target + move - tip, -c.max_target_offset, c.max_target_offset)
        q = self.q_cmd
        for _ in range(2):
            dq, _ = m.ik_step(q, self.target, DOWN[None], damping=1e-3, q_rest=self.home, rest_gain=0.05)
            q = np.clip(q + dq, self.robot.lower, self.robot.upper)
        self.q_cmd = q
        return self.io.pd_command(q)

    # -- observation ---------------------------------------------------------------------
    def observe(self, state: RobotState) -> np.ndarray:
        """(n, 33): q − q_home, q̇, tip − nominal hole mouth, tip quaternion w,x,y,z, tared wrench, previous action,
        target − tip; with ``contact_history`` (n, 38), then ``history``'s 5 features. Also tracks the episode's peak
        force. Without ``last_action`` the previous action's columns are zeros (the layout kept): the ablation of the
        copycat problem, a clone that learns to repeat its own last action (for the blindfolded peg students it did not
        help: papers/blindfolded/results/peg-ablation)."""
        wrench = self.io.observe(state)
        self.peak_force = np.maximum(self.peak_force, np.linalg.norm(wrench[:, :3], axis=1))
        parts = [
            state.joint_pos - self.home,
            state.joint_vel,
            state.ee_pos - self.nominal,
            state.ee_quat,
            wrench,
            np.clip(self.last_action, -1, 1) if self.config.last_action else np.zeros_like(self.last_action),
            self.target - state.ee_pos,
        ]
        if self.config.contact_history:
            parts.append(self.history(state.ee_pos - self.nominal))
        if self.config.search_progress:
            parts.append(self.progress(state.ee_pos - self.nominal))
        return np.concatenate(parts, axis=1).astype(np.float32)

    def history(self, tip: np.ndarray) -> np.ndarray:
        """(n, 5) what a search needs to remember, from the observation stream alone (so the same on a robot):
        elapsed steps / ``max_episode_steps``, whether the tip has touched the board (within ``TOUCH_HEIGHT`` of the
        face, whose height is known), steps since that first touch / ``max_episode_steps`` (0 before), and the tip's
        xy at the first touch relative to the nominal mouth [m] (0 before). A recurrent policy could learn these,
        but only with BPTT windows as long as the episode; given, a spiral search becomes nearly Markov.
        Idempotent within a step (``tip`` (n, 3): relative to the nominal mouth)."""
        steps = self.io.steps
        new = (self.touch_step < 0) & (tip[:, 2] < TOUCH_HEIGHT)
        self.touch_step[new], self.touch_xy[new] = steps[new], tip[new, :2]
        touched = self.touch_step >= 0
        horizon = float(self.config.max_episode_steps)
        since = np.where(touched, steps - self.touch_step, 0) / horizon
        return np.c_[steps / horizon, touched, since, self.touch_xy]

    def progress(self, tip: np.ndarray) -> np.ndarray:
        """(n, 2) how far a search on the board has got, from the observation stream alone: the path length slid
        on the face since the first touch / ``SLID_SCALE``, and the farthest Chebyshev distance of the tip from the
        nominal mouth while touching / ``hole_xy_range``. A spiral's position alone is ambiguous between its
        passes once the peg lags or slips; these say which pass it is on (they did not help the blindfolded peg
        students: papers/blindfolded/results/peg-ablation). Idempotent within a step (``tip`` (n, 3): relative to
        the nominal mouth)."""
        steps, xy = self.io.steps, tip[:, :2]
        on_face = tip[:, 2] < TOUCH_HEIGHT
        fresh = steps > self.prev_step
        was = fresh & (self.prev_step >= 0) & on_face  # moved on the face since the last update
        self.slid += np.where(was, np.linalg.norm(xy - self.prev_xy, axis=1), 0.0)
        self.reach = np.where(fresh & on_face, np.maximum(self.reach, np.abs(xy).max(axis=1)), self.reach)
        self.prev_xy[fresh], self.prev_step[fresh] = xy[fresh], steps[fresh]
        return np.c_[self.slid / SLID_SCALE, self.reach / self.config.hole_xy_range]

    def privileged_observe(self, state: RobotState) -> np.ndarray:
        """(n, 5): hole mouth − nominal mouth (3), hole yaw [rad] (1), clearance [m] (1)."""
        return np.concatenate(
            [self.hole - self.nominal, self.yaw[:, None], np.full((self.n_envs, 1), self.board.clearance)], axis=1
        ).astype(np.float32)

    def depth(self, state: RobotState) -> np.ndarray:
        """(n,) how far the tip is below the hole's mouth [m] (negative above)."""
        return self.hole[:, 2] - state.ee_pos[:, 2]

    def lateral(self, state: RobotState) -> np.ndarray:
        """Horizontal tip-hole distance (n,) [m]."""
        return np.linalg.norm(state.ee_pos[:, :2] - self.hole[:, :2], axis=1)

    def success(self, state: RobotState) -> np.ndarray:
        """The tip is at least ``insert_depth`` below the mouth, within the peg radius of the hole's axis."""
        return (self.depth(state) >= self.config.insert_depth) & (self.lateral(state) < self.board.peg_radius)

    def terminated(self, state: RobotState) -> np.ndarray:
        return self.success(state)

    # -- reward terms ------------------------------------------------------------------------
    def reward_align(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """1 − tanh(lateral / 5 mm)."""
        return 1.0 - np.tanh(self.lateral(state) / 0.005)

    def reward_depth(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """Insertion depth as a fraction of ``insert_depth``, in [0, 1]."""
        return np.clip(self.depth(state) / self.config.insert_depth, 0.0, 1.0)

    def reward_inserted(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        return self.success(state).astype(np.float64)

    def reward_force(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """Tared wrist force above ``force_limit`` [N]."""
        return np.maximum(np.linalg.norm(self.io.wrench[:, :3], axis=1) - self.config.force_limit, 0.0)

    def reward_action_rate(self, state: RobotState, action: np.ndarray) -> np.ndarray:
        """‖aₜ − aₜ₋₁‖² on actions clipped to [-1, 1]."""
        return np.square(np.clip(action, -1, 1) - np.clip(self.last_action, -1, 1)).sum(axis=1)


class ScriptedExpert:
    """The privileged peg-insertion expert: a Policy over cat(observation, privileged observation)
    (n, 38) → actions (n, 3), reading nothing but that interface (tip position, the controller's
    target, the tared wrench, the true hole offset and the clearance). It places the tip target
    (speed-limited by the action bound; the task's leash bounds the force) and is stateless.

    ``approach="hole"``: bring the tip to ``hover`` above the hole while aligning laterally, then
    push down (the target ``press`` below the hole's bottom) while keeping centred, and back
    off whenever the wrist force exceeds ``max_force``.
    ``approach="contact"``: go straight down where the tip is until it touches the board, slide
    on the board toward the hole pressing ``press`` into it, then insert the same way. Every
    decision after the touch-down shows in what a student observes (the wrist moment where the
    peg overhangs the hole, the drop when it gets in), which makes it the teacher to distil a
    student from when the student cannot see the hole.
    """

    def __init__(
        self,
        config: PegInsertConfig,
        approach: str = "hole",
        hover: float = 0.004,
        max_force: float = 25.0,
        press: float = 0.0005,
    ):
        if approach not in ("hole", "contact"):
            raise ValueError(f"approach must be 'hole' or 'contact', got {approach!r}")
        self.config, self.approach = config, approach
        self.hover, self.max_force, self.press = hover, max_force, press
        self.obs_size, self.action_size = observation_size(config) + PRIVILEGED_SIZE, 3

    def reset(self, env_ids=None) -> None:  # stateless
        pass

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions (n, 3) from cat(observation, privileged observation) (n, 38): hover above the true hole, then press
        down once aligned."""
        x = obs.detach().cpu().numpy().astype(np.float64)
        c, priv = self.config, x[:, -PRIVILEGED_SIZE:]
        tip = x[:, TIP]  # all relative to the nominal hole mouth
        target = tip + x[:, TARGET]
        hole = priv[:, HOLE]
        height = tip[:, 2] - hole[:, 2]  # of the tip above the mouth
        lateral = np.linalg.norm(hole[:, :2] - tip[:, :2], axis=1)
        force = np.linalg.norm(x[:, WRENCH][:, :3], axis=1)
        aligned = lateral < np.maximum(0.3e-3, 0.5 * priv[:, CLEARANCE])
        inside = height < -0.5e-3  # below the board's top face: in the hole
        insert = aligned | inside
        goal = hole.copy()
        goal[:, 2] = np.where(insert, hole[:, 2] - c.hole_depth - self.press, hole[:, 2] + self.hover)
        if self.approach == "contact":
            free = (height > 2e-3) & ~inside
            slide = ~free & ~insert  # pull the target ahead of the tip: friction holds a peg pressed on the board
            goal[:, :2] = np.where(
                free[:, None], target[:, :2], np.where(slide[:, None], 2 * hole[:, :2] - tip[:, :2], goal[:, :2])
            )
            goal[:, 2] = np.where(insert, goal[:, 2], hole[:, 2] - self.press)
        step = (goal - target) / c.action_scale
        step[:, 2] = np.where(
            inside, step[:, 2], np.maximum(step[:, 2], -np.maximum(0.2, height / 0.01))
        )  # touch gently
        back_off = force > self.max_force
        step[back_off, 2] = 0.2
        return torch.as_tensor(np.clip(step, -1.0, 1.0), dtype=torch.float32)


__all__ = ["PegInsert", "PegInsertConfig", "ScriptedExpert", "observation_size", "validate"]
