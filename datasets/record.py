"""``embody record TASK --episodes N --out DIR [--policy RUN] [--sim NAME]``: episodes into a dataset.

The controller is a trained policy (``--policy RUN``, on the run's own env config), else the
task's scripted expert (peg-insert), else uniform random actions. Envs run batched; each env's
frames are buffered and written as one episode when it ends. Per frame: the robot's joint
positions as ``observation.state`` and the policy's ``action`` (the standard LeRobot columns),
the reward and done flag, and embody's extras beside them — the policy observation, the
privileged observation, the PD targets sent, the joint velocities, the base pose and the IMU (where the
robot has them), the full simulator state (``embody.sim_state``, for exact kinematic replay) and what
dynamic replay needs beyond it (the episode's physical parameters and fixture poses, each step's push) —
plus a camera video when asked.

Each episode's language ``task`` is the task's name, or what ``RecordConfig.setup`` says: a function called
for the envs that start an episode, which may also set their conditions (a command, a motion clip).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from embody.progress import Progress


@dataclass
class RecordConfig:
    """``embody record`` settings: ``episodes`` of ``task`` in ``sim`` into the dataset folder ``out``."""

    task: str
    episodes: int
    out: Path
    policy: Path | None = None  # a training run; None: the task's scripted expert, else random actions
    sim: str = "mujoco"
    n_envs: int = 4
    seed: int = 0
    video: bool = True
    overrides: list[str] = field(default_factory=list)  # --set key=value on the env's config
    # (env, env ids starting an episode) -> each one's language task; it may set their conditions first
    setup: Callable[[object, np.ndarray], list[str]] | None = None


VIDEO_KEY = "observation.images.main"
IMU_NAMES = ["qw", "qx", "qy", "qz", "gyro_x", "gyro_y", "gyro_z", "accel_x", "accel_y", "accel_z"]


def build(cfg: RecordConfig):
    """(env, controller(obs, priv) -> actions, train config) for ``cfg``."""
    from embody.config import apply_overrides
    from embody.runs import build_env, load_run, load_run_checkpoint
    from embody.train import resolve_config

    if cfg.policy is not None:
        train_cfg, _ = load_run(cfg.policy)
        if train_cfg.task != cfg.task:
            from embody.config import ConfigError

            raise ConfigError(f"{cfg.policy} was trained on {train_cfg.task!r}, not {cfg.task!r}")
        apply_overrides(train_cfg, texts=cfg.overrides)
    else:
        train_cfg = resolve_config(cfg.task, overrides=cfg.overrides)
    env = build_env(train_cfg, n_envs=cfg.n_envs, sim=cfg.sim, seed=cfg.seed, evaluation=True)
    if cfg.policy is not None:
        policy = load_run_checkpoint(cfg.policy, expect=env).policy
        act = lambda obs, priv: policy.act(torch.as_tensor(obs), deterministic=True).numpy()  # noqa: E731
    else:
        act = scripted_or_random(env, cfg.seed)
    return env, act, train_cfg


def scripted_or_random(env, seed: int):
    """An action function ``(obs (n, o), priv (n, p)) -> actions (n, a)``: the task's scripted expert if it has one,
    else uniform in [-1, 1]."""
    from embody.distill import EXPERTS

    if env.task.name in EXPERTS:
        factory, _, reference = EXPERTS[env.task.name]
        expert = factory(env.task.config, reference)
        return lambda obs, priv: expert.act(torch.as_tensor(np.concatenate([obs, priv], axis=1))).numpy()
    rng = np.random.default_rng(seed)
    return lambda obs, priv: rng.uniform(-1.0, 1.0, (obs.shape[0], env.action_size))


def features(env, calls: SimCalls, video: bool) -> dict:
    """name -> feature of every per-frame group; an empty group (a task without privileged
    observations, a robot without actuated joints) is left out rather than declared with size 0."""
    from .format import feature

    robot, f32 = env.task.robot, "float32"
    joints = list(robot.joint_names)
    groups = {
        "observation.state": (f32, (robot.n_joints,), joints),
        "action": (f32, (env.action_size,), env.task.action_names()),
        "next.reward": (f32, (1,), None),
        "next.done": ("bool", (1,), None),
        "embody.observation": (f32, (env.observation_size,), None),
        "embody.privileged": (f32, (env.privileged_size,), None),
        "embody.joint_vel": (f32, (robot.n_joints,), joints),
        "embody.joint_target": (f32, (len(robot.actuated),), [joints[i] for i in robot.actuated]),
        "embody.base_pose": ("float64", (7 if robot.floating_base else 0,), ["x", "y", "z", "qw", "qx", "qy", "qz"]),
        "embody.imu": (f32, (10 if robot.sensors.imu_site else 0,), IMU_NAMES),
        "embody.sim_state": ("float64", (env.sim.get_state().shape[1],), None),
        "embody.physics": ("float64", (3,), ["friction_scale", "added_base_mass", "mass_scale"]),
        "embody.push": ("float64", (3,), ["vx", "vy", "vz"]),  # base velocity kick before the step
        **{
            f"embody.fixture.{body}": ("float64", (7,), ["x", "y", "z", "qw", "qx", "qy", "qz"])
            for body in calls.fixtures
        },
    }
    if video:
        c = env.task.config.sim
        groups[VIDEO_KEY] = ("video", (c.render_height, c.render_width, 3), ["height", "width", "channels"])
    return {k: feature(dtype, shape, names) for k, (dtype, shape, names) in groups.items() if all(shape)}


class SimCalls:
    """Watches what the VecEnv asks of the simulator, per env: the command of each step (PD targets
    after the task's action mapping, delays included), the pushes before it, and the physical
    parameters and fixture poses drawn at resets. None of these is part of the simulator state,
    and dynamic replay needs all of them to reproduce an episode."""

    def __init__(self, sim):
        n = sim.n_envs
        self.command: np.ndarray | None = None
        self.push = np.zeros((n, 3))
        self.physics = np.tile([1.0, 0.0, 1.0], (n, 1))  # friction ×, added base mass kg, mass scale ×
        self.fixtures: dict[str, np.ndarray] = {}  # body -> (n, 7) pos, quat
        self._sim = sim
        for name in ("step", "push", "set_physics", "set_fixture_pose"):
            if hasattr(sim, name):
                setattr(sim, name, getattr(self, f"_{name}"))

    def _step(self, command: np.ndarray) -> None:
        self.command = np.array(command, copy=True)
        type(self._sim).step(self._sim, command)

    def _push(self, env_ids: np.ndarray, lin_vel: np.ndarray) -> None:
        self.push[env_ids] += lin_vel
        type(self._sim).push(self._sim, env_ids, lin_vel)

    def _set_physics(self, env_ids: np.ndarray, params) -> None:
        for col, value in enumerate((params.friction, params.added_base_mass, params.mass_scale)):
            if value is not None:
                self.physics[env_ids, col] = value
        type(self._sim).set_physics(self._sim, env_ids, params)

    def _set_fixture_pose(self, body: str, env_ids: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> None:
        pose = self.fixtures.setdefault(body, np.tile([0.0, 0, 0, 1, 0, 0, 0], (self._sim.n_envs, 1)))
        pose[env_ids] = np.concatenate([pos, quat], axis=1)
        type(self._sim).set_fixture_pose(self._sim, body, env_ids, pos, quat)


def _pose_and_imu(state, i: int) -> dict:
    """Env ``i``'s base pose (x, y, z, quaternion w,x,y,z) and IMU (quaternion, gyro, accelerometer), where known."""
    out, p = {}, state.privileged
    if p is not None and p.base_pos is not None:
        out["embody.base_pose"] = np.concatenate([p.base_pos[i], p.base_quat[i]])
    if state.imu_quat is not None:
        out["embody.imu"] = np.concatenate([state.imu_quat[i], state.imu_gyro[i], state.imu_accel[i]])
    return out


def record(cfg: RecordConfig) -> dict:
    """Record ``cfg.episodes`` episodes into ``cfg.out``; returns a summary."""
    from embody.config import to_dict

    from .format import DatasetWriter

    env, act, train_cfg = build(cfg)
    calls = SimCalls(env.sim)
    obs, priv = env.reset()  # first: the fixtures the task moves are known after a reset
    meta = {
        "task": cfg.task,
        "sim": cfg.sim,
        "controller": str(cfg.policy) if cfg.policy else "scripted-or-random",
        "env_config": to_dict(train_cfg)["env"],
        "seed": cfg.seed,
    }
    declared = features(env, calls, cfg.video)
    writer = DatasetWriter(
        cfg.out,
        fps=round(1.0 / env.sim.dt),
        features=declared,
        robot_type=env.task.robot.name,
        video_keys=(VIDEO_KEY,) if cfg.video else (),
        recording=meta,
    )
    buffers: list[list[dict]] = [[] for _ in range(env.n_envs)]
    texts = [cfg.task] * env.n_envs

    def start(ids: np.ndarray) -> None:
        """Envs ``ids`` start an episode: the setup's conditions and texts, observed again."""
        if cfg.setup is not None and ids.size:
            for i, text in zip(ids, cfg.setup(env, ids)):
                texts[i] = text
            obs[ids] = env.task.observe(env.sim.state())[ids]

    start(np.arange(env.n_envs))
    saved, returns, progress = 0, [], Progress(cfg.episodes, label=f"record {cfg.task}", unit="episodes")
    with writer:
        while saved < cfg.episodes:
            state, sim_state = env.sim.state(), env.sim.get_state()
            physics, fixtures = calls.physics.copy(), {b: p.copy() for b, p in calls.fixtures.items()}
            frames = env.render() if cfg.video else None
            action = np.asarray(act(obs, priv), dtype=np.float64)
            calls.push[:] = 0.0
            next_obs, reward, terminated, truncated, info = env.step(action)
            target, push = calls.command, calls.push.copy()
            done = terminated | truncated
            for i in range(env.n_envs):
                frame = {
                    "observation.state": state.joint_pos[i],
                    "action": action[i],
                    "next.reward": reward[i : i + 1],
                    "next.done": done[i : i + 1],
                    "embody.observation": obs[i],
                    "embody.privileged": priv[i],
                    "embody.joint_vel": state.joint_vel[i],
                    "embody.joint_target": target[i],
                    **_pose_and_imu(state, i),
                    "embody.sim_state": sim_state[i],
                    "embody.physics": physics[i],
                    "embody.push": push[i],
                    **{f"embody.fixture.{b}": p[i] for b, p in fixtures.items()},
                }
                if frames is not None:
                    frame[VIDEO_KEY] = frames[i]
                buffers[i].append({k: v for k, v in frame.items() if k in declared})
                if done[i] and saved < cfg.episodes:
                    for f in buffers[i]:
                        writer.add_frame(f, task=texts[i])
                    writer.save_episode()
                    returns.append(float(sum(f["next.reward"][0] for f in buffers[i])))
                    saved += 1
                    progress.update(saved)
                if done[i]:
                    buffers[i] = []
            obs, priv = next_obs, info.privileged_obs
            start(np.flatnonzero(done))
    progress.close()
    env.close()
    return {
        "dataset": str(cfg.out),
        "episodes": saved,
        "return_mean": float(np.mean(returns)),
        "frames": writer.num_frames,
    }
