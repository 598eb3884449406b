"""Retargeting human motion (BVH) to a robot's upper body by matching limb directions.

Eight keypoints are found on the human skeleton and on the robot (``RobotSpec.retarget``): both hips, and per
arm the shoulder, elbow and wrist. Both bodies are measured in their own hips frame (y from the right hip to the
left, z from the hips' midpoint towards the shoulders' midpoint, x = y × z: forward), so the file's up axis,
facing and units do not matter. Per frame, the robot's waist and arm joints (``retarget.joints``) are solved by
damped Gauss-Newton (warm-started from the previous frame) to point its shoulder line, upper arms and forearms
the way the human's do: limb lengths differ between people and robots, directions carry the motion. The other
upper-body joints (forearm twist, wrists: not determined by these points) hold their default.

Joint ranges bound the solution and velocity limits bound its speed; every frame where either had to act is
counted in the :class:`RetargetReport`, or, with ``limits="refuse"``, refused with a MotionError naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from embody.robots.bvh import BvhMotion, load_bvh
from embody.robots.motion import MotionClip, MotionError
from embody.robots.spec import RetargetMap, RobotSpec

KEYPOINTS = (
    "left_hip",
    "right_hip",
    "left_shoulder",
    "left_elbow",
    "left_wrist",
    "right_shoulder",
    "right_elbow",
    "right_wrist",
)

# joint names of common BVH skeletons (CMU / Mixamo / Motionbuilder, lower case, "mixamorig:" prefixes dropped)
BVH_NAMES = {
    "left_hip": ("leftupleg", "lefthip", "lhipjoint", "lthigh", "l_hip"),
    "right_hip": ("rightupleg", "righthip", "rhipjoint", "rthigh", "r_hip"),
    "left_shoulder": ("leftarm", "leftshoulder_arm", "lshldr", "lhumerus", "l_shoulder", "leftupperarm"),
    "left_elbow": ("leftforearm", "leftelbow", "lforearm", "lradius", "l_elbow", "leftlowerarm"),
    "left_wrist": ("lefthand", "leftwrist", "lhand", "lwrist", "l_wrist"),
    "right_shoulder": ("rightarm", "rightshoulder_arm", "rshldr", "rhumerus", "r_shoulder", "rightupperarm"),
    "right_elbow": ("rightforearm", "rightelbow", "rforearm", "rradius", "r_elbow", "rightlowerarm"),
    "right_wrist": ("righthand", "rightwrist", "rhand", "rwrist", "r_wrist"),
}
LIMBS = (("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"))
LIMBS += (("right_shoulder", "right_elbow"), ("right_elbow", "right_wrist"))


@dataclass
class RetargetReport:
    """What retargeting had to change: frames where each joint sat on its range or was slowed to its velocity
    limit, and the angle between the robot's and the human's limb directions [deg] (mean, max over frames)."""

    frames: int
    range_clipped: dict[str, int] = field(default_factory=dict)
    speed_clipped: dict[str, int] = field(default_factory=dict)
    direction_error_deg: tuple[float, float] = (0.0, 0.0)

    def lines(self) -> list[str]:
        out = [
            f"{self.frames} frames; limb direction error {self.direction_error_deg[0]:.1f}° mean, "
            f"{self.direction_error_deg[1]:.1f}° max"
        ]
        out += [f"{j}: held at its range in {n} frames" for j, n in self.range_clipped.items()]
        out += [f"{j}: slowed to its velocity limit in {n} frames" for j, n in self.speed_clipped.items()]
        return out


def hips_frame_directions(points: dict[str, np.ndarray]) -> np.ndarray:
    """Unit vectors (T, 5, 3) in the hips frame: the shoulder line (right → left), then each LIMBS segment."""
    y = _unit(points["left_hip"] - points["right_hip"])
    up = (points["left_shoulder"] + points["right_shoulder"] - points["left_hip"] - points["right_hip"]) / 2
    z = _unit(up - np.sum(up * y, axis=-1, keepdims=True) * y)
    frame = np.stack([np.cross(y, z), y, z], axis=-2)  # rows: the frame's axes in world coordinates
    world = [points["left_shoulder"] - points["right_shoulder"]] + [points[b] - points[a] for a, b in LIMBS]
    return np.einsum("...ij,...kj->...ki", frame, _unit(np.stack(world, axis=-2)))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def bvh_keypoints(motion: BvhMotion, path: Path, names: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """World positions (T, 3) of KEYPOINTS on the skeleton; ``names`` maps keypoints to joint names explicitly,
    the rest are looked up in BVH_NAMES. MotionError naming the file for a keypoint no joint maps to."""
    unknown = sorted(set(names or {}) - set(KEYPOINTS))
    if unknown:
        raise MotionError(f"{path}: unknown keypoints {unknown}; valid: {', '.join(KEYPOINTS)}")
    pos, _ = motion.world()
    lookup = {j.name.lower().split(":")[-1]: i for i, j in enumerate(motion.joints)}
    exact = {j.name: i for i, j in enumerate(motion.joints)}
    out = {}
    for key in KEYPOINTS:
        if names and key in names:
            if names[key] not in exact:
                raise MotionError(f"{path}: no joint {names[key]!r} (given for keypoint {key})")
            i = exact[names[key]]
        else:
            i = next((lookup[n] for n in BVH_NAMES[key] if n in lookup), None)
            if i is None:
                raise MotionError(
                    f"{path}: no joint maps to keypoint {key} (looked for {', '.join(BVH_NAMES[key])}; "
                    "name it explicitly)"
                )
        out[key] = pos[:, i]
    return out


def default_pose_model(spec: RobotSpec):
    """(mujoco, model, data, qadr): the robot's MuJoCo model and data at its default pose (the free joint at the
    model's own base pose) and each joint's qpos address (n_joints,) in motor order; for kinematics only."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    data = mujoco.MjData(model)
    qadr = np.array([model.joint(n).qposadr[0] for n in spec.joint_names])
    data.qpos[qadr] = spec.default_pose
    return mujoco, model, data, qadr


class _RobotKinematics:
    """The robot's keypoint directions as a function of its retargeted joints (MuJoCo forward kinematics)."""

    def __init__(self, spec: RobotSpec):
        if spec.retarget is None:
            raise MotionError(f"robot {spec.name!r} has no retargeting map (RobotSpec.retarget)")
        self.mj, self.model, self.data, qadr = default_pose_model(spec)
        self.qadr = qadr[[spec.joint_names.index(n) for n in spec.retarget.joints]]
        self.bodies = {k: self.model.body(b).id for k, b in spec.retarget.bodies.items()}

    def directions(self, q: np.ndarray) -> np.ndarray:
        """(5, 3) hips-frame directions at joint values ``q`` (the retargeted joints)."""
        self.data.qpos[self.qadr] = q
        self.mj.mj_kinematics(self.model, self.data)
        return hips_frame_directions({k: self.data.xpos[b].copy() for k, b in self.bodies.items()})


def retarget_bvh(
    path: str | Path, spec: RobotSpec, names: dict[str, str] | None = None, limits: str = "clip", iterations: int = 20
) -> tuple[MotionClip, RetargetReport]:
    """A BVH file's motion as an upper-body clip of ``spec`` at the file's frame rate, and what limits changed.
    ``limits``: "clip" (hold at joint ranges, slow to velocity limits, report) or "refuse" (MotionError)."""
    if limits not in ("clip", "refuse"):
        raise ValueError(f"limits must be 'clip' or 'refuse', got {limits!r}")
    path = Path(path)
    motion = load_bvh(path)
    target = hips_frame_directions(bvh_keypoints(motion, path, names))
    kin = _RobotKinematics(spec)
    idx = np.array([spec.joint_names.index(n) for n in spec.retarget.joints])
    lo, hi = spec.lower[idx], spec.upper[idx]
    q, solved = spec.default_pose[idx].copy(), []
    for t in range(len(target)):
        q = _solve(kin, target[t], q, lo, hi, iterations if t else 10 * iterations)
        solved.append(q)
    report = RetargetReport(len(target))
    q = np.array(solved)
    at_range = (q <= lo + 1e-9) | (q >= hi - 1e-9)
    report.range_clipped = {spec.retarget.joints[k]: int(at_range[:, k].sum()) for k in np.flatnonzero(at_range.any(0))}
    q = _limit_speed(q, spec.velocity_limit[idx] / motion.fps, spec.retarget.joints, report)
    achieved = np.array([kin.directions(row) for row in q])
    angles = np.degrees(np.arccos(np.clip(np.sum(achieved * target, axis=-1), -1.0, 1.0)))
    report.direction_error_deg = (float(angles.mean()), float(angles.max()))
    if limits == "refuse" and (report.range_clipped or report.speed_clipped):
        raise MotionError(f"{path}: the motion leaves the robot's limits: {'; '.join(report.lines()[1:])}")
    upper = spec.group("upper_body")
    full = np.tile(spec.default_pose, (len(q), 1))
    full[:, idx] = q
    names_out = tuple(spec.joint_names[i] for i in upper)
    return MotionClip(names_out, motion.fps, full[:, upper], label=path.stem), report


def _solve(kin: _RobotKinematics, target: np.ndarray, q: np.ndarray, lo, hi, iterations: int) -> np.ndarray:
    """Damped Gauss-Newton on the direction residual, projected onto the joint ranges; forward-difference
    Jacobian (the model's kinematics are cheap; 9 joints)."""
    eps, damping = 1e-6, 1e-4
    for _ in range(iterations):
        r = (kin.directions(q) - target).ravel()
        J = np.empty((r.size, q.size))
        for k in range(q.size):
            dq = q.copy()
            dq[k] += eps
            J[:, k] = ((kin.directions(dq) - target).ravel() - r) / eps
        step = np.linalg.solve(J.T @ J + damping * np.eye(q.size), -J.T @ r)
        q = np.clip(q + step, lo, hi)
        if np.abs(step).max() < 1e-7:
            break
    return q


def _limit_speed(q: np.ndarray, max_step: np.ndarray, joints, report: RetargetReport) -> np.ndarray:
    """Each frame moves each joint at most ``max_step`` from the previous (a causal rate limiter)."""
    out, hits = q.copy(), np.zeros(q.shape, dtype=bool)
    for t in range(1, len(q)):
        delta = out[t] - out[t - 1]
        hits[t] = np.abs(delta) > max_step
        out[t] = out[t - 1] + np.clip(delta, -max_step, max_step)
    report.speed_clipped = {joints[k]: int(hits[:, k].sum()) for k in np.flatnonzero(hits.any(axis=0))}
    return out


__all__ = [
    "KEYPOINTS",
    "BVH_NAMES",
    "RetargetMap",
    "RetargetReport",
    "default_pose_model",
    "retarget_bvh",
    "hips_frame_directions",
]
