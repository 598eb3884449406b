"""BVH reading/writing and retargeting onto the H1-2's upper body: a round trip from known joint angles through a
BVH file written here back to the angles, and the errors bad files get."""

import mujoco
import numpy as np
import pytest

from embody.robots import get_robot
from embody.robots.bvh import BvhJoint, BvhMotion, load_bvh
from embody.robots.motion import MotionError
from embody.robots.retarget import retarget_bvh

TO_BVH = np.array([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]])  # robot (x forward, z up) -> a Y-up, Z-forward file
SCALE = 1.15  # a person a little larger than the robot: retargeting matches directions, not lengths


def known_angles(spec, frames=40, fps=20.0):
    """(T, 9) smooth waist and arm motion inside the joint ranges, elbows bent (retarget.joints order)."""
    t = np.arange(frames)[:, None] / fps
    centre = np.array([0.0, -0.5, 0.4, 0.1, 0.6, -0.4, -0.3, -0.2, 0.8])
    amp = np.array([0.3, 0.4, 0.2, 0.3, 0.3, 0.3, 0.2, 0.3, 0.3])
    return centre + amp * np.sin(2 * np.pi * 0.5 * t + np.arange(9))


def robot_keypoints(spec, q9):
    """World positions {keypoint: (T, 3)} of the robot at each row of q9."""
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    data = mujoco.MjData(model)
    for j, name in enumerate(spec.joint_names):
        data.qpos[model.joint(name).qposadr[0]] = spec.default_pose[j]
    adr = [model.joint(n).qposadr[0] for n in spec.retarget.joints]
    out = {k: [] for k in spec.retarget.bodies}
    for row in q9:
        data.qpos[adr] = row
        mujoco.mj_kinematics(model, data)
        for k, b in spec.retarget.bodies.items():
            out[k].append(data.xpos[model.body(b).id].copy())
    return {k: np.array(v) for k, v in out.items()}


def zxy_degrees(r):
    """Intrinsic Z, X, Y angles [deg] of rotation matrices (T, 3, 3): R = Rz·Rx·Ry."""
    x = np.arcsin(np.clip(r[:, 2, 1], -1, 1))
    return np.degrees(np.stack([np.arctan2(-r[:, 0, 1], r[:, 1, 1]), x, np.arctan2(-r[:, 2, 0], r[:, 2, 2])], 1))


def aligning(a, b):
    """Rotations (T, 3, 3) taking the fixed unit vector a onto unit vectors b (T, 3) (the shortest arc)."""
    v, c = np.cross(a, b), b @ a
    k = np.zeros((len(b), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 0], k[:, 1, 2], k[:, 2, 0], k[:, 2, 1] = (
        -v[:, 2],
        v[:, 1],
        v[:, 2],
        -v[:, 0],
        -v[:, 1],
        v[:, 0],
    )
    return np.eye(3) + k + k @ k / (1 + c)[:, None, None]


def write_skeleton_bvh(points, path, fps):
    """A Y-up BVH of a person whose hips, shoulders, elbows and wrists are at ``points`` (robot world frame):
    Hips → Left/RightUpLeg; Hips → Chest (turns about the vertical) → Left/RightArm → ForeArm → Hand."""
    p = {k: (v @ TO_BVH.T) * SCALE for k, v in points.items()}
    hips = (p["left_hip"] + p["right_hip"]) / 2
    T = len(hips)
    shoulder_line = p["left_shoulder"] - p["right_shoulder"]
    yaw = np.arctan2(-shoulder_line[:, 2], shoulder_line[:, 0])  # about +Y, from the rest line along +X
    c, s = np.cos(yaw), np.sin(yaw)
    chest = np.zeros((T, 3, 3))
    chest[:, 0, 0], chest[:, 0, 2], chest[:, 1, 1], chest[:, 2, 0], chest[:, 2, 2] = c, s, 1, -s, c
    joints = [
        BvhJoint(
            "Hips", -1, np.zeros(3), ("Xposition", "Yposition", "Zposition", "Zrotation", "Xrotation", "Yrotation")
        )
    ]
    columns = [hips, np.zeros((T, 3))]
    for side in ("Left", "Right"):
        key = side.lower()
        joints.append(
            BvhJoint(f"{side}UpLeg", 0, p[f"{key}_hip"][0] - hips[0], ("Zrotation", "Xrotation", "Yrotation"))
        )
        joints.append(BvhJoint(f"{side}UpLeg_end", len(joints) - 1, np.array([0, -0.4, 0])))
        columns.append(np.zeros((T, 3)))
    joints.append(BvhJoint("Chest", 0, np.zeros(3), ("Zrotation", "Xrotation", "Yrotation")))
    chest_i = len(joints) - 1
    columns.append(zxy_degrees(chest))
    down = np.array([0.0, -1.0, 0.0])
    for side in ("Left", "Right"):
        key = side.lower()
        rest = chest[0].T @ (p[f"{key}_shoulder"][0] - hips[0])
        upper = p[f"{key}_elbow"] - p[f"{key}_shoulder"]
        fore = p[f"{key}_wrist"] - p[f"{key}_elbow"]
        arm_r = aligning(down, upper / np.linalg.norm(upper, axis=1, keepdims=True))
        fore_r = aligning(down, fore / np.linalg.norm(fore, axis=1, keepdims=True))
        joints.append(BvhJoint(f"{side}Arm", chest_i, rest, ("Zrotation", "Xrotation", "Yrotation")))
        columns.append(zxy_degrees(np.transpose(chest, (0, 2, 1)) @ arm_r))
        joints.append(BvhJoint(f"{side}ForeArm", len(joints) - 1, 0.3 * down, ("Zrotation", "Xrotation", "Yrotation")))
        columns.append(zxy_degrees(np.transpose(arm_r, (0, 2, 1)) @ fore_r))
        joints.append(BvhJoint(f"{side}Hand", len(joints) - 1, 0.25 * down, ("Zrotation", "Xrotation", "Yrotation")))
        columns.append(np.zeros((T, 3)))
        joints.append(BvhJoint(f"{side}Hand_end", len(joints) - 1, 0.1 * down))
    BvhMotion(joints, 1.0 / fps, np.concatenate(columns, axis=1)).save(path)
    return path


@pytest.fixture(scope="module")
def spec():
    return get_robot("h1_2")


def test_a_known_motion_survives_the_round_trip_through_a_bvh_file(spec, tmp_path):
    q9 = known_angles(spec)
    path = write_skeleton_bvh(robot_keypoints(spec, q9), tmp_path / "person.bvh", fps=20.0)
    motion = load_bvh(path)
    assert motion.fps == pytest.approx(20.0) and motion.frames.shape[0] == 40
    clip, report = retarget_bvh(path, spec)
    assert clip.fps == pytest.approx(20.0) and clip.label == "person"
    assert clip.joint_names == tuple(spec.joint_names[i] for i in spec.group("upper_body"))
    got = clip.joint_pos[:, [clip.joint_names.index(n) for n in spec.retarget.joints]]
    np.testing.assert_allclose(got, q9, atol=2e-3)
    held = [clip.joint_names.index(n) for n in clip.joint_names if n not in spec.retarget.joints]
    np.testing.assert_array_equal(
        clip.joint_pos[:, held], np.tile(spec.default_pose[spec.group("upper_body")][held], (40, 1))
    )
    assert report.range_clipped == {} and report.speed_clipped == {}
    assert report.direction_error_deg[1] < 0.5


def test_limits_are_clipped_with_a_report_or_refused(spec, tmp_path):
    q9 = known_angles(spec)
    q9[20:, 1] = -2.9  # left shoulder pitch: fine (range −3.14..1.57) but a 2.4 rad jump in one frame
    path = write_skeleton_bvh(robot_keypoints(spec, q9), tmp_path / "jump.bvh", fps=20.0)
    clip, report = retarget_bvh(path, spec)
    assert report.speed_clipped.get("left_shoulder_pitch_joint", 0) >= 1
    speed = np.abs(np.diff(clip.joint_pos, axis=0)) * clip.fps
    assert (speed <= spec.velocity_limit[spec.group("upper_body")] + 1e-9).all()
    assert any("slowed to its velocity limit" in line for line in report.lines())
    with pytest.raises(MotionError, match=r"jump\.bvh: the motion leaves the robot's limits"):
        retarget_bvh(path, spec, limits="refuse")


def test_bad_bvh_files_get_one_error_naming_the_file(spec, tmp_path):
    path = write_skeleton_bvh(robot_keypoints(spec, known_angles(spec, frames=3)), tmp_path / "ok.bvh", fps=20.0)
    text = path.read_text()
    (tmp_path / "noelbow.bvh").write_text(text.replace("LeftForeArm", "LeftThing"))
    with pytest.raises(MotionError, match=r"noelbow\.bvh: no joint maps to keypoint left_elbow"):
        retarget_bvh(tmp_path / "noelbow.bvh", spec)
    retarget_bvh(tmp_path / "noelbow.bvh", spec, names={"left_elbow": "LeftThing"})  # named explicitly: fine
    (tmp_path / "bad.bvh").write_text(text.replace("OFFSET 0.000000 -0.300000", "OFFSET zero -0.300000", 1))
    with pytest.raises(MotionError, match=r"bad\.bvh: line \d+: expected a number"):
        load_bvh(tmp_path / "bad.bvh")
    (tmp_path / "short.bvh").write_text(text.rsplit("\n", 2)[0])
    with pytest.raises(MotionError, match=r"short\.bvh: line \d+: the file ends"):
        load_bvh(tmp_path / "short.bvh")
    with pytest.raises(MotionError, match="missing"):
        load_bvh(tmp_path / "none.bvh")


def test_motion_commands_write_clip_folders(spec, tmp_path, capsys):
    from embody.cli import main
    from embody.robots.motion import load_library

    assert main(["motion", "generate", "--families", "boxing,carry", "--out", str(tmp_path / "held_out")]) == 0
    clips = load_library(tmp_path / "held_out")
    assert len(clips) == 18 and {c.family for c in clips} == {"boxing", "carry"}
    write_skeleton_bvh(robot_keypoints(spec, known_angles(spec, frames=10)), tmp_path / "a.bvh", fps=20.0)
    argv = ["motion", "retarget", str(tmp_path / "a.bvh"), "--out", str(tmp_path / "mine"), "--family", "mocap"]
    assert main(argv) == 0
    assert "limb direction error" in capsys.readouterr().out
    (clip,) = load_library(tmp_path / "mine")
    assert clip.family == "mocap" and clip.label == "a" and clip.n_frames == 10
    assert main(argv + ["--map", "left_knee=LeftUpLeg"]) == 2  # bad input: one line, exit 2
    assert "unknown keypoints ['left_knee']" in capsys.readouterr().err
