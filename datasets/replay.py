"""``embody replay DIR``: recorded episodes back in a simulator, or on a robot through its supervisor.

- ``--mode kinematic`` sets every recorded simulator state (``embody.sim_state``) and renders
  it: exact by construction, and checked (the state read back must equal the recorded one).
- ``--mode dynamic`` starts from each episode's first recorded state, with the episode's recorded
  physical parameters and fixture poses, and steps the simulator with the recorded pushes and PD
  targets (``embody.joint_target``), reporting how far the joints drift from the recording: ~0 on
  the simulator that recorded it (float32 targets), the sim-to-sim gap on another.
- ``--robot h1_2|peg_arm --target sim|dds:IFACE`` streams the recorded joint targets to a robot
  at the recording's rate, through the safety supervisor (ramp → hold → targets → damping).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def rebuild_env(ds, sim: str):
    """The recording's task on ``sim`` with the recorded env config, one env."""
    from embody.config import from_dict
    from embody.sims.tasks import TASKS
    from embody.sims.vec_env import make_env

    from .format import DatasetFormatError

    meta = ds.info.get("embody", {}).get("recording", {})
    if "task" not in meta:
        raise DatasetFormatError(
            ds.root / "meta/info.json",
            "names no embody task (embody.recording): replay needs a dataset written by `embody record`",
        )
    if meta.get("sim", sim) != sim:  # embody.sim_state is in the recording simulator's own layout
        raise DatasetFormatError(
            ds.root,
            f"was recorded on {meta['sim']!r}; its simulator states replay on {meta['sim']!r} only, not {sim!r}",
        )
    task_cls = TASKS.get(meta["task"])
    config = from_dict(task_cls.config_class, meta["env_config"], f"{ds.root}/meta/info.json: embody.env_config")
    return make_env(meta["task"], sim, n_envs=1, seed=meta.get("seed", 0), config=config)


def setup_episode(env, ep: dict) -> None:
    """The episode's recorded physical parameters and fixture poses, where the simulator offers them."""
    from embody.sims.base import PhysicsParams

    ids, caps = np.array([0]), env.sim.capabilities
    if "embody.physics" in ep and "physics_params" in caps:
        friction, added, scale = ep["embody.physics"][0]
        env.sim.set_physics(ids, PhysicsParams(np.array([friction]), np.array([added]), np.array([scale])))
    for key in (k for k in ep if k.startswith("embody.fixture.")):
        if "fixture_pose" in caps:
            pose = ep[key][:1]
            env.sim.set_fixture_pose(key[len("embody.fixture.") :], ids, pose[:, :3], pose[:, 3:])


def kinematic(ds, sim: str, video: Path | None = None) -> list[dict]:
    """Set each recorded state, render it; per episode, the largest |state read back − recorded|."""
    from embody.video import VideoWriter

    env = rebuild_env(ds, sim)
    writer = VideoWriter(video, fps=ds.fps) if video else None
    rows = []
    for e in range(ds.num_episodes):
        ep = ds.episode(e)
        setup_episode(env, ep)
        states, err = ep["embody.sim_state"], 0.0
        for row in states:
            env.sim.set_state(row[None])
            err = max(err, float(np.abs(env.sim.get_state()[0] - row).max()))
            if writer:
                writer.write(env.render()[0])
        rows.append({"episode": e, "frames": len(states), "max_state_error": err})
    if writer:
        writer.close()
    env.close()
    return rows


def dynamic(ds, sim: str) -> list[dict]:
    """Re-apply recorded PD targets from each episode's first state; joint drift from the recording."""
    env = rebuild_env(ds, sim)
    rows = []
    for e in range(ds.num_episodes):
        ep = ds.episode(e)
        setup_episode(env, ep)
        env.sim.set_state(ep["embody.sim_state"][:1])
        q = np.empty_like(ep["observation.state"], dtype=np.float64)
        pushes = ep.get("embody.push", np.zeros((len(q), 3)))
        targets = ep["embody.joint_target"].reshape(len(q), -1)  # (T,) for a one-actuator robot
        for t, target in enumerate(targets):
            q[t] = env.sim.state().joint_pos[0]
            if pushes[t].any():
                env.sim.push(np.array([0]), pushes[t][None])
            env.sim.step(target[None].astype(np.float64))
        drift = np.abs(q - ep["observation.state"])
        rows.append(
            {
                "episode": e,
                "frames": len(q),
                "joint_rmse": float(np.sqrt((drift**2).mean())),
                "joint_max_error": float(drift.max()),
                "final_joint_max_error": float(drift[-1].max()),
            }
        )
    env.close()
    return rows


def to_robot(
    ds, robot: str, target: str, domain: int = 0, episodes: list[int] | None = None, log: Path | None = None
) -> dict:
    """Stream recorded joint targets to ``robot`` at ``target`` at the recording's rate, in a supervised
    session (ramp → hold → targets → damping); its summary with ``commands``, the targets sent. ``log``: an .rrd
    or .mcap file of what the robot reported, the targets replayed and what the supervisor sent and why."""
    from embody.hardware.deploy import open_target
    from embody.hardware.interface import HardwareError, JointCommand
    from embody.hardware.recorder import RunRecording
    from embody.hardware.session import SessionConfig, SupervisedSession
    from embody.robots import get_robot

    if ds.info.get("robot_type") != robot:
        raise HardwareError(f"{ds.root} was recorded on robot {ds.info.get('robot_type')!r}, not {robot!r}")
    spec = get_robot(robot)
    chosen = episodes if episodes is not None else range(ds.num_episodes)
    targets = np.concatenate([ds.episode(e)["embody.joint_target"] for e in chosen])
    recorder = RunRecording(spec, ds.fps, {"task": f"replay of {ds.root}", "robot": robot, "target": target}, log=log)
    summary: dict = {}
    try:
        # the H1-2 stays on the band: open-loop targets replayed on a free humanoid would make it fall
        with open_target(spec, target, domain, band=robot == "h1_2") as t:

            def step(tick: int, _t: float) -> bool:
                asked = JointCommand.pd_actuated(spec, targets[tick])
                if recorder.recorder is None:
                    t.driver.send_command(asked)
                else:
                    state, age, sup = t.driver.read_state(), t.driver.state_age(), t.driver.supervisor
                    sent = t.driver.send_command(asked)
                    recorder.add(state, None, None, asked, sent, sup.phase, age, sup.now())
                return tick + 1 < len(targets)

            result = SupervisedSession(t.driver, SessionConfig(rate_hz=ds.fps, hold_s=0.0)).run(step)
        summary.update(result.as_dict(), commands=result.ticks, **({"robot_sim": t.robot_sim} if t.sim else {}))
    finally:
        summary.update(recorder.finish(summary.get("events", [])))
    return summary
