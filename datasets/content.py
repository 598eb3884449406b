"""One episode as a person looks at it: named joint signals grouped by limb, other named signals, events, the robot's
geometry over time and the camera frames. Rerun (``to_rerun``), MCAP (``to_mcap``) and ``embody dataset plot`` draw
from this one extraction.

Shapes: T frames of the episode, n joints of a feature, G geoms of the robot model.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embody import exits

from .schema import DatasetFormatError

# what a joint-named feature holds, for labels; others are labelled by their key without "embody."
QUANTITIES = {
    "observation.state": "position",
    "embody.joint_vel": "velocity",
    "embody.joint_torque": "torque",
    "embody.joint_target": "target",
    "embody.asked.q": "asked_target",
    "embody.sent.q": "sent_target",
    "embody.sent.tau": "sent_torque",
    "action": "action",
}
LIMBS = ("left_leg", "right_leg", "waist", "left_arm", "right_arm")  # robot spec groups, in display order
SKIPPED = {"timestamp", "frame_index", "episode_index", "index", "task_index", "embody.sim_state"}
PHASE_KEY = "embody.supervisor_phase"


@dataclass
class JointSeries:
    """One joint-named feature of the episode: ``values`` (T, n) for ``joints`` (n names), ``limbs`` joint -> limb."""

    key: str
    quantity: str
    joints: list[str]
    limbs: list[str]
    values: np.ndarray


@dataclass
class Geometry:
    """The robot's geoms over the episode (forward kinematics of its MJCF): ``kind`` (G,) ``"box"``, ``"capsule"``,
    ``"cylinder"``, ``"sphere"`` or ``"ellipsoid"``; ``size`` (G, 3) MuJoCo's geom_size; ``rgba`` (G, 4);
    ``pos`` (T, G, 3) [m] and ``quat`` (T, G, 4) (w, x, y, z) in the world frame; ``body`` (G,) body names."""

    kind: list[str]
    size: np.ndarray
    rgba: np.ndarray
    body: list[str]
    pos: np.ndarray
    quat: np.ndarray


@dataclass
class EpisodeContent:
    """``time`` (T,) [s] from the episode start; ``joints``: joint-named features; ``signals``: other named numeric
    features, name -> (T,) (``"next.reward"``, ``"embody.imu/gyro_x"``, ...); ``events``: (time, text);
    ``geometry`` (None when the robot or its model is unknown); ``videos``: camera key -> T JPEG images."""

    dataset: str
    episode: int
    robot: str | None
    time: np.ndarray
    joints: list[JointSeries] = field(default_factory=list)
    signals: dict[str, np.ndarray] = field(default_factory=dict)
    events: list[tuple[float, str]] = field(default_factory=list)
    geometry: Geometry | None = None
    videos: dict[str, list[bytes]] = field(default_factory=dict)


def episode_content(ds, episode: int, video: bool = True) -> EpisodeContent:
    """Read episode ``episode`` (its position in the episodes table) of the loaded dataset ``ds``
    (``embody.datasets.load``); an episode the dataset does not have is a DatasetFormatError naming it."""
    if not 0 <= episode < ds.num_episodes:
        raise DatasetFormatError(
            ds.root, f"has no episode {episode} (it has {ds.num_episodes}: 0..{ds.num_episodes - 1})"
        )
    ep = ds.episode(episode)
    robot = _robot(ds.info.get("robot_type"))
    joint_names = set(robot.joint_names) if robot else set()
    time = np.round(ep["timestamp"].astype(np.float64), 6)  # float32 in the file: 0.02 s reads as 0.0199999
    out = EpisodeContent(str(ds.root), episode, robot.name if robot else None, time)
    for key, ft in ds.features.items():
        if key in SKIPPED or ft["dtype"] in ("video", "image", "string") or key == PHASE_KEY:
            continue
        values = np.asarray(ep[key], dtype=np.float64).reshape(len(out.time), -1)
        names = ft.get("names")
        if names and joint_names and set(names) <= joint_names:
            quantity = QUANTITIES.get(key, key.removeprefix("embody."))
            out.joints.append(JointSeries(key, quantity, list(names), [_limb(robot, n) for n in names], values))
        elif values.shape[1] == 1:
            out.signals[key] = values[:, 0]
        else:  # named components, else numbered ones (the policy's observation, an unnamed action)
            names = names if names and len(names) == values.shape[1] else range(values.shape[1])
            out.signals.update({f"{key}/{n}": values[:, i] for i, n in enumerate(names)})
    out.events = _events(ds, episode, ep, out.time) + _clamps(ds, ep, out)
    if robot is not None:
        out.geometry = _geometry(robot, ds.features, ep)
    if video:
        out.videos = {key: jpeg_frames(ds.frames(episode, key)) for key in ds.video_keys}
    return out


def jpeg_frames(frames: np.ndarray, quality: int = 85) -> list[bytes]:
    """(T, H, W, 3) uint8 frames as JPEG files (Rerun's ``EncodedImage`` and Foxglove's ``CompressedImage`` both
    take them)."""
    from PIL import Image

    out = []
    for frame in frames:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


def _robot(name: str | None):
    """The registered robot of that name, None for a dataset from elsewhere."""
    from embody.robots import ROBOTS, get_robot

    return get_robot(name) if name and name in ROBOTS else None


def _limb(robot, joint: str) -> str:
    j = robot.joint_names.index(joint)
    return next((g for g in LIMBS if j in robot.groups.get(g, ())), "joints")


def _events(ds, episode: int, ep: dict, time: np.ndarray) -> list[tuple[float, str]]:
    """Episode start and end and every change of the supervisor's phase."""
    events = [(float(time[0]), f"episode {episode} starts ({ds.task(episode)})")]
    if PHASE_KEY in ep:
        names = ds.features[PHASE_KEY].get("names") or []
        phase = ep[PHASE_KEY].reshape(-1).astype(int)
        label = lambda p: names[p] if 0 <= p < len(names) else str(p)  # noqa: E731
        events.append((float(time[0]), f"supervisor: {label(phase[0])}"))
        for i in np.flatnonzero(np.diff(phase)) + 1:
            events.append((float(time[i]), f"supervisor: {label(phase[i - 1])} -> {label(phase[i])}"))
    events.append((float(time[-1]), f"episode {episode} ends after {len(time)} frames"))
    return events


def _clamps(ds, ep: dict, out: EpisodeContent, tol: float = 1e-4, most: int = 20) -> list[tuple[float, str]]:
    """Where the supervisor sent other targets than the policy asked for while the policy had the robot (a deploy
    recording): the count per frame as the signal ``supervisor/clamped_joints``, and an event where each joint's
    clamping starts (the first ``most``)."""
    if not {"embody.asked.q", "embody.sent.q", PHASE_KEY} <= ep.keys():
        return []
    names = ds.features[PHASE_KEY].get("names") or []
    policy = ep[PHASE_KEY].reshape(-1) == (names.index("POLICY") if "POLICY" in names else -1)
    asked, sent = ep["embody.asked.q"], ep["embody.sent.q"]
    clamped = (np.abs(sent - asked) > tol) & policy[:, None]
    out.signals["supervisor/clamped_joints"] = clamped.sum(axis=1).astype(np.float64)
    starts = np.argwhere(clamped & ~np.vstack([np.zeros_like(clamped[:1]), clamped[:-1]]))
    joints = ds.features["embody.sent.q"].get("names") or [str(j) for j in range(asked.shape[1])]
    events = [
        (float(out.time[t]), f"supervisor clamps {joints[j]}: asked {asked[t, j]:.3f}, sent {sent[t, j]:.3f}")
        for t, j in starts[:most]
    ]
    if len(starts) > most:
        events.append((float(out.time[starts[most][0]]), f"... {len(starts) - most} more clamps"))
    return events


def add_clock_events(content: EpisodeContent, clock: np.ndarray, events: list[tuple[float, str]]) -> None:
    """Add ``events`` timed on another clock (e.g. the supervisor's) whose reading at each frame is ``clock`` (T,):
    each lands at the frame time its clock time maps to (events before the first frame or after the last land
    there)."""
    for t, text in events:
        at = float(np.interp(t, clock, content.time))
        content.events.append((at, text))
    content.events.sort(key=lambda e: e[0])


def save(content: EpisodeContent, path: Path) -> Path:
    """Write ``content`` as Rerun (``.rrd``) or MCAP (``.mcap``), by the file's suffix."""
    check_log_path(path)
    if path.suffix == ".rrd":
        from .to_rerun import view

        view(content, save=path)
    else:
        from .to_mcap import export_mcap

        export_mcap([content], path)
    return path


def check_log_path(path: Path) -> None:
    """A log file must end in .rrd (Rerun) or .mcap (Foxglove); anything else is an input error naming it."""
    if path.suffix not in (".rrd", ".mcap"):
        raise exits.CommandError(
            f"{path}: a log is a Rerun .rrd or an MCAP .mcap file, not {path.suffix or 'no suffix'!r}"
        )


GEOM_KINDS = {2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box"}  # mjtGeom; planes, meshes left out


def _geometry(robot, features: dict, ep: dict) -> Geometry | None:
    """Forward kinematics of the robot's MJCF at each frame's joint positions (and base pose, for a floating base)."""
    import mujoco

    if "observation.state" not in ep or robot.mjcf is None:
        return None
    m = mujoco.MjModel.from_xml_path(str(robot.mjcf))
    d = mujoco.MjData(m)
    names = features["observation.state"].get("names") or []
    ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
    if not names or min(ids) < 0:
        return None
    qadr = m.jnt_qposadr[ids]
    geoms = np.array([g for g in range(m.ngeom) if m.geom_bodyid[g] != 0 and int(m.geom_type[g]) in GEOM_KINDS])
    q, base = ep["observation.state"], ep.get("embody.base_pose")
    T = len(q)
    pos, quat = np.zeros((T, len(geoms), 3)), np.zeros((T, len(geoms), 4))
    for t in range(T):
        d.qpos[:] = m.qpos0
        if robot.floating_base:
            d.qpos[:7] = base[t] if base is not None else [*robot.default_base_pos, 1.0, 0, 0, 0]
        d.qpos[qadr] = q[t]
        mujoco.mj_kinematics(m, d)
        pos[t] = d.geom_xpos[geoms]
        for i, g in enumerate(geoms):
            mujoco.mju_mat2Quat(quat[t, i], d.geom_xmat[g])
    return Geometry(
        kind=[GEOM_KINDS[int(m.geom_type[g])] for g in geoms],
        size=m.geom_size[geoms].copy(),
        rgba=m.geom_rgba[geoms].copy(),
        body=[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g]) for g in geoms],
        pos=pos,
        quat=quat,
    )
