"""``embody motion``: make motion clip folders — the procedural families, or a person's motion from BVH files."""

from __future__ import annotations

import argparse
from pathlib import Path

from embody import exits
from embody.commands import command, group, nonneg_int

group("motion", "make motion clips: procedural families or retargeted BVH motion capture")


def _generate_arguments(p: argparse.ArgumentParser) -> None:
    from embody.robots.motion import DEFAULT_FAMILIES, FAMILIES

    p.add_argument("--robot", default="h1_2")
    p.add_argument(
        "--families",
        default=",".join(DEFAULT_FAMILIES),
        help=f"comma-separated, or 'all' (families: {', '.join(FAMILIES)})",
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="draws the phases of the oscillations")
    p.add_argument("--out", required=True, help="the clip folder (one .safetensors file per clip)")


@command("motion generate", "write procedural upper-body clips of chosen families to a folder", _generate_arguments)
def _generate(args) -> int:
    from embody.robots import get_robot
    from embody.robots.motion import FAMILIES, generate_library

    families = FAMILIES if args.families == "all" else tuple(f.strip() for f in args.families.split(","))
    clips = generate_library(get_robot(args.robot), args.seed, families)
    for i, clip in enumerate(clips):
        clip.save(Path(args.out) / f"{i:03d}-{clip.family.replace(' ', '_')}.safetensors")
    print(f"{len(clips)} clips ({', '.join(dict.fromkeys(c.family for c in clips))}) written to {args.out}")
    return exits.OK


def _retarget_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bvh", nargs="+", help="BVH motion capture files")
    p.add_argument("--robot", default="h1_2")
    p.add_argument("--out", required=True, help="the clip folder (CLIP.safetensors per BVH file)")
    p.add_argument("--family", default="", help="the family the clips belong to (default: none)")
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="KEYPOINT=JOINT",
        help="the BVH joint at a keypoint (left_hip, left_shoulder, left_elbow, left_wrist and right_...), "
        "where the common names do not match",
    )
    p.add_argument(
        "--limits", choices=("clip", "refuse"), default="clip", help="hold motion at the robot's limits, or refuse it"
    )


@command("motion retarget", "retarget BVH motion capture onto the robot's upper body", _retarget_arguments)
def _retarget(args) -> int:
    from embody.robots import get_robot
    from embody.robots.motion import MotionError
    from embody.robots.retarget import retarget_bvh

    names = {}
    for item in args.map:
        key, sep, joint = item.partition("=")
        if not sep:
            raise MotionError(f"--map {item!r}: expected KEYPOINT=JOINT")
        names[key.strip()] = joint.strip()
    spec = get_robot(args.robot)
    for path in map(Path, args.bvh):
        clip, report = retarget_bvh(path, spec, names, args.limits)
        clip.family = args.family
        out = clip.save(Path(args.out) / f"{path.stem}.safetensors")
        print(f"{path} -> {out}: " + "; ".join(report.lines()))
    return exits.OK
