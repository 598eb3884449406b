"""Motion clips: file format round trip and refusals, interpolation, retargeting, the generator."""

import json

import numpy as np
import pytest

pytest.importorskip("safetensors")

from safetensors.numpy import save_file  # noqa: E402

from embody.robots.h1_2 import make_spec  # noqa: E402
from embody.robots.motion import (  # noqa: E402
    DEFAULT_FAMILIES,
    FAMILIES,
    MotionClip,
    MotionError,
    generate_library,
    load,
    load_library,
)

SPEC = make_spec()
NAMES = ("torso_joint", "left_elbow_pitch_joint")


def _clip(T=5, root=True, label="test clip") -> MotionClip:
    rng = np.random.default_rng(1)
    quat = rng.normal(size=(T, 4))
    return MotionClip(
        NAMES,
        10.0,
        rng.normal(size=(T, 2)),
        rng.normal(size=(T, 3)) if root else None,
        quat / np.linalg.norm(quat, axis=1, keepdims=True) if root else None,
        label,
    )


def _write(path, tensors, **meta_changes):
    meta = {
        "format": "embody.motion",
        "format_version": "1",
        "fps": "10.0",
        "joint_names": json.dumps(list(NAMES)),
        "label": "",
    }
    meta.update(meta_changes)
    save_file(tensors, str(path), metadata={k: v for k, v in meta.items() if v is not None})
    return path


@pytest.mark.parametrize("root", [True, False])
def test_round_trip(tmp_path, root):
    clip = _clip(root=root)
    back = load(clip.save(tmp_path / "sub" / "c.safetensors"))
    assert back.joint_names == clip.joint_names and back.fps == clip.fps and back.label == clip.label
    for name in ("joint_pos", "root_pos", "root_quat"):
        a, b = getattr(clip, name), getattr(back, name)
        assert (a is None and b is None) or np.array_equal(a, b)
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["c.safetensors"]  # no temp file left
    assert [c.label for c in load_library(tmp_path / "sub")] == ["test clip"]


def _bad_files(tmp_path):
    q = np.zeros((4, 2))
    good = tmp_path / "good.safetensors"
    _clip().save(good)
    data = good.read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(data[: len(data) - 10])
    (tmp_path / "text.safetensors").write_text("not a safetensors file")
    nan = q.copy()
    nan[1, 1] = np.nan
    return {
        "missing.safetensors": "missing",
        "trunc.safetensors": "truncated",
        "text.safetensors": "truncated",
        "foreign.safetensors": _write(tmp_path / "foreign.safetensors", {"joint_pos": q}, format="other"),
        "nometa.safetensors": save_file({"joint_pos": q}, str(tmp_path / "nometa.safetensors")) or "format",
        "version.safetensors": _write(tmp_path / "version.safetensors", {"joint_pos": q}, format_version="2"),
        "cols.safetensors": _write(tmp_path / "cols.safetensors", {"joint_pos": np.zeros((4, 3))}),
        "root.safetensors": _write(tmp_path / "root.safetensors", {"joint_pos": q, "root_pos": np.zeros((5, 3))}),
        "quat.safetensors": _write(tmp_path / "quat.safetensors", {"joint_pos": q, "root_quat": np.zeros((3, 4))}),
        "nan.safetensors": _write(tmp_path / "nan.safetensors", {"joint_pos": nan}),
        "fps0.safetensors": _write(tmp_path / "fps0.safetensors", {"joint_pos": q}, fps="0"),
        "fpsneg.safetensors": _write(tmp_path / "fpsneg.safetensors", {"joint_pos": q}, fps="-5"),
        "nojoint.safetensors": _write(tmp_path / "nojoint.safetensors", {"root_pos": np.zeros((4, 3))}),
    }


@pytest.mark.parametrize(
    "name, words",
    [
        ("missing.safetensors", "missing"),
        ("trunc.safetensors", "truncated"),
        ("text.safetensors", "truncated"),
        ("foreign.safetensors", "format"),
        ("nometa.safetensors", "format"),
        ("version.safetensors", "version"),
        ("cols.safetensors", "joint_pos has shape"),
        ("root.safetensors", "root_pos has shape"),
        ("quat.safetensors", "root_quat has shape"),
        ("nan.safetensors", "non-finite"),
        ("fps0.safetensors", "fps"),
        ("fpsneg.safetensors", "fps"),
        ("nojoint.safetensors", "joint_pos"),
    ],
)
def test_load_refuses(tmp_path, name, words):
    _bad_files(tmp_path)
    with pytest.raises(MotionError) as e:
        load(tmp_path / name)
    assert str(tmp_path / name) in str(e.value) and words in str(e.value)


def test_load_library_propagates_and_missing_folder(tmp_path):
    with pytest.raises(MotionError, match="missing"):
        load_library(tmp_path / "nope")
    _clip().save(tmp_path / "a.safetensors")
    (tmp_path / "b.safetensors").write_text("junk")
    with pytest.raises(MotionError, match="b.safetensors"):
        load_library(tmp_path)


def test_sample_exact_at_frames_linear_between_clamped():
    clip = _clip()
    frames = np.arange(clip.n_frames) / clip.fps
    assert clip.duration == pytest.approx(0.4)
    np.testing.assert_allclose(clip.sample(frames), clip.joint_pos, atol=1e-12)
    mid = clip.sample(frames[:-1] + 0.25 / clip.fps)
    np.testing.assert_allclose(mid, 0.75 * clip.joint_pos[:-1] + 0.25 * clip.joint_pos[1:], atol=1e-12)
    np.testing.assert_allclose(clip.sample(np.array([-1.0, 9.0])), clip.joint_pos[[0, -1]])
    v = clip.velocity(frames[:-1] + 0.5 / clip.fps)
    np.testing.assert_allclose(v, np.diff(clip.joint_pos, axis=0) * clip.fps, atol=1e-9)
    np.testing.assert_array_equal(clip.velocity(np.array([-1.0, 9.0])), 0.0)
    assert clip.sample(np.zeros((0,))).shape == (0, 2)


def test_constructor_validates():
    with pytest.raises(MotionError, match="joint_pos has shape"):
        MotionClip(NAMES, 10.0, np.zeros((3, 3)))
    with pytest.raises(MotionError, match="duplicates"):
        MotionClip(("a", "a"), 10.0, np.zeros((3, 2)))


def test_to_robot_fills_default_and_refuses_unknown():
    clip = _clip()
    full = clip.to_robot(SPEC)
    assert full.joint_names == SPEC.joint_names and full.joint_pos.shape == (clip.n_frames, SPEC.n_joints)
    for j, name in enumerate(NAMES):
        np.testing.assert_array_equal(full.joint_pos[:, SPEC.joint_names.index(name)], clip.joint_pos[:, j])
    others = [i for i, n in enumerate(SPEC.joint_names) if n not in NAMES]
    np.testing.assert_array_equal(full.joint_pos[:, others], np.tile(SPEC.default_pose[others], (clip.n_frames, 1)))
    np.testing.assert_array_equal(full.root_pos, clip.root_pos)
    bad = MotionClip(("torso_joint", "tail_joint"), 10.0, np.zeros((2, 2)))
    with pytest.raises(MotionError, match="tail_joint"):
        bad.to_robot(SPEC)


@pytest.fixture(scope="module")
def library():
    return generate_library(SPEC, families=FAMILIES)


def test_library_valid(library):
    upper = SPEC.group("upper_body")
    names = tuple(SPEC.joint_names[i] for i in upper)
    lo, hi, vmax, q0 = SPEC.lower[upper], SPEC.upper[upper], SPEC.velocity_limit[upper], SPEC.default_pose[upper]
    assert len(library) >= 12 * 9
    assert len({c.label for c in library}) == len(library)
    for c in library:
        assert c.joint_names == names and c.fps == 50.0 and c.duration == pytest.approx(5.0)
        assert (c.joint_pos >= lo + 0.05 - 1e-12).all() and (c.joint_pos <= hi - 0.05 + 1e-12).all()
        assert (np.abs(np.diff(c.joint_pos, axis=0)) * c.fps <= vmax).all()
        np.testing.assert_allclose(c.joint_pos[[0, -1]], np.tile(q0, (2, 1)), atol=1e-12)
        assert np.abs(c.joint_pos - q0).max() > 0.05  # it moves
    assert {c.family for c in library} == set(FAMILIES)
    assert {"boxing", "overhead reach", "wave both", "carry", "point"} <= set(FAMILIES)


def test_library_families_are_chosen_by_name():
    default = generate_library(SPEC)
    assert {c.family for c in default} == set(DEFAULT_FAMILIES)  # what h1_2-stand plays
    held_out = generate_library(SPEC, families=("boxing", "carry"))
    assert {c.family for c in held_out} == {"boxing", "carry"} and len(held_out) == 2 * 9
    with pytest.raises(MotionError, match="unknown motion families \\['juggling'\\]"):
        generate_library(SPEC, families=("juggling",))


def test_library_amplitudes_graded_and_seeded(library):
    by_kind: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for c in library:
        kind, amp, freq = c.label.split(", ")
        by_kind.setdefault((kind, freq), []).append((float(amp.split()[1]), np.ptp(c.joint_pos, axis=0).max()))
    for levels in by_kind.values():
        assert len(levels) == 3
        peaks = [p for _, p in sorted(levels)]
        assert peaks[0] < peaks[1] < peaks[2]
    again = generate_library(SPEC, seed=0)
    assert all(np.array_equal(a.joint_pos, b.joint_pos) for a, b in zip(library, again))
    other = generate_library(SPEC, seed=1)
    assert any(not np.array_equal(a.joint_pos, b.joint_pos) for a, b in zip(library, other))


def test_library_saves_and_loads(tmp_path, library):
    for i, c in enumerate(library[:3]):
        c.save(tmp_path / f"{i:02d}.safetensors")
    back = load_library(tmp_path)
    assert [c.label for c in back] == [c.label for c in library[:3]]
    assert [c.family for c in back] == [c.family for c in library[:3]] and back[0].family
    assert back[0].to_robot(SPEC).joint_pos.shape == (251, SPEC.n_joints)
