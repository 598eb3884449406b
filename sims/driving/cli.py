"""``embody drive SCENARIO``: closed-loop driving episodes; metrics as JSON, optionally a video.

Exit codes (``embody.exits``): 0 done, 2 bad input (unknown scenario, bad actors file, bad --set),
3 the simulator could not be reached (CARLA server down).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, command, nonneg_int, positive_float, positive_int


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", help="highway, highway-dense, merge, roundabout, cut-in, hard-brake")
    p.add_argument(
        "--sim",
        choices=("highway", "carla"),
        default="highway",
        help="highway: highway-env, embedded, headless (default); carla: a running CARLA server",
    )
    p.add_argument(
        "--policy",
        default="expert",
        metavar="RUN",
        help="expert (IDM/MOBIL, default), idle, constant, or a run/checkpoint directory",
    )
    p.add_argument(
        "--actors",
        metavar="FILE.csv",
        help="scripted actors: CSV columns actor,t,x,y,heading,speed "
        "(road frame: x along the road, y left, heading rad CCW, SI units)",
    )
    p.add_argument("--episodes", type=positive_int, default=1)
    p.add_argument("--workers", type=positive_int, default=2, help="worker processes, at most 2 (highway-env only)")
    p.add_argument("--seed", type=any_int, default=0, help="traffic seed of the first episode (then +1 each)")
    p.add_argument("--steps", type=positive_int, help="stop each episode after this many control steps")
    p.add_argument(
        "--fast",
        action="store_true",
        help="fast settings: ≤12 background vehicles, 5 Hz simulation, "
        "no traffic-traffic collision checks (dynamics coarser)",
    )
    add_set(p, "the scenario", "traffic.vehicles=10 or settings.duration_s=10")
    p.add_argument("--out", metavar="DIR", help="write DIR/metrics.json (and with --video DIR/episode0.mp4)")
    p.add_argument("--video", action="store_true", help="record the first episode's bird's-eye view (needs --out)")
    add_carla_arguments(p)


def add_carla_arguments(p: argparse.ArgumentParser) -> None:
    """``--carla-host/-port/-timeout/-town/-spawn``: where a CARLA server is, for every command with ``--sim carla``."""
    p.add_argument("--carla-host", default="127.0.0.1")
    p.add_argument("--carla-port", type=positive_int, default=2000)
    p.add_argument("--carla-timeout", type=positive_float, default=10.0, help="seconds to wait for the server")
    p.add_argument("--carla-town", default="", help="load this map first (e.g. Town04); default: the current one")
    p.add_argument("--carla-spawn", type=nonneg_int, default=0, help="map spawn point whose road the scenario uses")


def carla_config(args):
    """The CarlaConfig of ``add_carla_arguments``' flags, or None unless ``args.sim`` is carla."""
    if args.sim != "carla":
        return None
    from .carla import CarlaConfig

    return CarlaConfig(
        host=args.carla_host,
        port=args.carla_port,
        timeout_s=args.carla_timeout,
        town=args.carla_town,
        spawn_index=args.carla_spawn,
    )


def _say(*parts) -> None:
    print(*parts, file=sys.stderr)


@command("drive", "closed-loop driving episodes in highway-env or CARLA; prints metrics", _arguments)
def _drive(args) -> int:
    from embody.config import apply_overrides
    from embody.files import write_atomic

    from .actors import load_actors_csv
    from .base import DrivingError
    from .runner import EpisodeJob, aggregate, run_episodes
    from .scenario import fast_settings, get_scenario

    scenario = get_scenario(args.scenario)
    apply_overrides(scenario, texts=args.set)
    if args.fast:
        scenario = fast_settings(scenario)
    if args.actors:
        scenario = scenario.with_scripted(load_actors_csv(args.actors))
    if args.video and not args.out:
        raise DrivingError("--video needs --out DIR (the video goes to DIR/episode0.mp4)")
    carla = carla_config(args)
    out = Path(args.out) if args.out else None
    video = str(out / "episode0.mp4") if args.video else None
    job = EpisodeJob(
        scenario, sim=args.sim, policy=args.policy, seed=args.seed, max_steps=args.steps, video=video, carla=carla
    )
    workers = min(args.workers, args.episodes, 2) if args.sim == "highway" else 1
    if workers > 1:
        _say(
            f"embody drive: {args.episodes} episodes on {workers} worker processes (highway-env cannot batch: "
            "one pure-Python loop per vehicle)"
        )
    episodes = run_episodes(job, args.episodes, workers)
    report = {
        "scenario": scenario.name,
        "sim": args.sim,
        "policy": args.policy,
        "workers": workers,
        "summary": aggregate(episodes),
        "episodes": episodes,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        write_atomic(out / "metrics.json", text + "\n")
        _say(f"metrics written to {out / 'metrics.json'}" + (f", video to {video}" if video else ""))
    return exits.OK
