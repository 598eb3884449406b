"""The ``embody`` command line: the core commands (list, train, distill, eval, video, sim2sim, robot-sim,
deploy, record, replay, dataset, bench), the core groups registered by their own areas (plan, drive, motion) and
whatever plugins add (``embody.plugins``). Every command is registered the same way (``embody.commands``)
and ends with an exit code from ``embody.exits``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from embody import exits
from embody.allocator import keep_freed_memory
from embody.commands import (
    add_set,
    any_int,
    command,
    floats,
    group,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    rt_priority,
)

CORE_COMMAND_MODULES = ("embody.planners.cli", "embody.sims.driving.cli", "embody.robots.cli")  # plan, drive, motion


# ---------------------------------------------------------------- list


@command("list", "robots, simulators, tasks, policies, studies, plugins and installed extras")
def _list(args) -> int:
    from embody import plugins
    from embody.extras import installed_extras
    from embody.policies.classes import POLICY_CLASSES
    from embody.robots import ROBOTS
    from embody.sims import SIMULATORS, installed_simulators
    from embody.sims.tasks import TASKS

    print("robots:     ", ", ".join(ROBOTS.names()))
    installed = installed_simulators()
    print(
        "simulators: ",
        ", ".join(
            f"{n} ({'installed' if n in installed else 'missing: pip install embody[' + SIMULATORS.extra(n) + ']'})"
            for n in SIMULATORS.names()
        ),
    )
    print("tasks:      ", ", ".join(TASKS.names()))
    print("policies:   ", ", ".join(POLICY_CLASSES.names()))
    print("studies:    ", ", ".join(f"{s.name} ({s.command})" for s in plugins.STUDIES.all()) or "none")
    print("plugins:    ", ", ".join(f"{n} ({dist})" for n, dist in plugins.loaded().items()) or "none")
    for name, error in plugins.failures().items():
        print(f"  plugin {name} failed to load: {error}")
    print("extras:     ", ", ".join(f"{e} {'✓' if ok else '✗'}" for e, ok in installed_extras().items()))
    return exits.OK


# ---------------------------------------------------------------- train, distill, eval, video, sim2sim


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", help="task name (see `embody list`)")
    p.add_argument("--sim", help="simulator (default: mujoco)")
    p.add_argument(
        "--algo",
        choices=["ppo", "sac", "shac"],
        help="the learner (default: ppo; shac: through a differentiable simulator)",
    )
    p.add_argument("--envs", type=positive_int, help="number of parallel envs")
    p.add_argument("--steps", type=positive_int, help="total env steps")
    p.add_argument("--seed", type=any_int)
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--out", help="run directory (default: runs/TASK-TIMESTAMP)")
    p.add_argument("--resume", metavar="RUN", help="continue a run from its checkpoint")
    p.add_argument("--config", help="YAML file with TrainConfig values")
    p.add_argument(
        "--workers", type=positive_int, help="PPO/SAC rollouts on N Ray workers sharing the envs (scale extra)"
    )
    p.add_argument(
        "--ray-address", metavar="HOST:PORT", help="the Ray head to run the workers on (default: this machine)"
    )
    add_set(p, "the TrainConfig", "ppo.lr=3e-4")


@command("train", "train a policy with PPO or SAC into a run directory", _train_arguments)
def _train(args) -> int:
    from embody.config import apply_overrides
    from embody.train import load_run, resolve_config, train

    if args.resume:
        cfg, _ = load_run(Path(args.resume))
        if args.steps:
            cfg.steps = args.steps
        apply_overrides(cfg, texts=args.set)  # e.g. a longer max_time_s
        out = Path(args.resume)
        print(f"resuming {out} to {cfg.steps:,} env steps", file=sys.stderr)
    else:
        if not args.task:
            raise exits.CommandError("a TASK is required (see `embody list`)")
        cfg = resolve_config(
            args.task,
            args.config,
            args.set,
            sim=args.sim,
            algo=args.algo,
            n_envs=args.envs,
            steps=args.steps,
            seed=args.seed,
            device=args.device,
            workers=args.workers,
            ray_address=args.ray_address,
        )
        out = Path(args.out or f"runs/{cfg.task}-{time.strftime('%Y%m%d-%H%M%S')}")
        if (out / "checkpoint").exists():
            raise exits.CommandError(f"{out} already holds a run; use --resume {out} or another --out")
    try:
        summary = train(cfg, out, resume=bool(args.resume))
    except KeyboardInterrupt:
        saved = (out / "checkpoint").exists()
        where = (
            f"its last checkpoint is in {out}; `embody train --resume {out}` continues" if saved else "nothing saved"
        )
        print(f"\nembody train: interrupted: {where}", file=sys.stderr)
        return exits.INTERRUPTED
    print(json.dumps(summary, indent=2))
    print(f"run written to {out}")
    return exits.OK


def _sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="task name (see `embody list`)")
    p.add_argument(
        "--set-grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        required=True,
        help="a TrainConfig key and its values (repeat for a grid), e.g. ppo.lr=1e-3,3e-4",
    )
    p.add_argument("--seeds", type=positive_int, default=1, help="seeds 0..N-1 per grid point")
    p.add_argument("--sim", help="simulator (default: mujoco)")
    p.add_argument("--envs", type=positive_int, help="number of parallel envs per run")
    p.add_argument("--steps", type=positive_int, help="total env steps per run")
    p.add_argument("--out", help="sweep directory (default: runs/sweep-TASK-TIMESTAMP); rerun to resume")
    p.add_argument(
        "--ray-address", metavar="HOST:PORT", help="the Ray head to run the trials on (default: this machine)"
    )
    p.add_argument("--cpus-per-trial", type=positive_float, default=1.0, help="CPUs each run reserves (default 1)")
    add_set(p, "the TrainConfig of every run", "env.randomization.enabled=false")


@command(
    "sweep", "a grid of training runs × seeds on Ray Tune, resumable; a table and plot at the end", _sweep_arguments
)
def _sweep(args) -> int:
    from embody.sweep import SweepSpec, parse_grid, run_sweep

    flags = {k: v for k, v in {"sim": args.sim, "n_envs": args.envs, "steps": args.steps}.items() if v is not None}
    spec = SweepSpec(
        args.task, parse_grid(args.set_grid), list(range(args.seeds)), args.set, flags, args.cpus_per_trial
    )
    out = Path(args.out or f"runs/sweep-{args.task}-{time.strftime('%Y%m%d-%H%M%S')}")
    run_sweep(spec, out, args.ray_address or args.jobs_ray_address)
    print((out / "sweep.md").read_text())
    print(f"sweep written to {out} (sweep.md, sweep.json, sweep.png; runs/ holds every run)")
    return exits.OK


def _distill_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="task with a scripted expert (peg-insert)")
    p.add_argument("--scale", choices=["tiny", "paper"], default="tiny", help="tiny: < 3 min on 2 cores")
    p.add_argument("--sim", help="simulator (default: mujoco)")
    p.add_argument("--envs", type=positive_int, help="number of parallel envs")
    p.add_argument("--seed", type=any_int)
    p.add_argument("--out", help="run directory (default: runs/TASK-distill-TIMESTAMP)")
    add_set(p, "the DistillConfig", "dagger.iterations=8 or env.hole_xy_range=0.005")


@command("distill", "distil a task's privileged scripted expert into a recurrent student (DAgger)", _distill_arguments)
def _distill(args) -> int:
    from embody.distill import resolve_distill_config, run_distill

    cfg = resolve_distill_config(args.task, args.scale, args.set, sim=args.sim, n_envs=args.envs, seed=args.seed)
    out = Path(args.out or f"runs/{cfg.task}-distill-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "checkpoint").exists():
        raise exits.CommandError(f"{out} already holds a run; use another --out")
    summary = run_distill(cfg, out)
    print(json.dumps(summary, indent=2))
    print(f"run written to {out}")
    return exits.OK


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--sim", help="evaluate on another simulator (sim-to-sim)")
    p.add_argument("--episodes", type=positive_int, default=10)
    p.add_argument(
        "--checkpoint", default="checkpoint", help="the run's checkpoint folder (a snapshot: checkpoint_600s)"
    )
    p.add_argument(
        "--sampled",
        action="store_true",
        help="draw actions from the policy's distribution, as in training, instead of taking its mean "
        "(a behaviour only the exploration noise carries shows up as the difference)",
    )
    add_set(p, "the run's config for evaluation", "env.randomization.enabled=false")


@command("eval", "evaluate a run's policy", _eval_arguments)
def _eval(args) -> int:
    from embody.train import evaluate_run

    summary = evaluate_run(
        Path(args.run),
        episodes=args.episodes,
        sim=args.sim,
        overrides=args.set,
        checkpoint=args.checkpoint,
        deterministic=not args.sampled,
    )
    print(json.dumps(summary, indent=2))
    return exits.OK


def _video_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--out", help="output file (default: RUN/eval.mp4)")
    p.add_argument("--sim")
    p.add_argument("--size", type=_size, default="640x480", help="WIDTHxHEIGHT (default: 640x480)")
    p.add_argument("--overlay", action="store_true", help="write the command and the step's reward terms on frames")


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 640x480, got {text!r}") from None
    if not (16 <= w <= 4096 and 16 <= h <= 4096):
        raise argparse.ArgumentTypeError(f"width and height must lie in 16..4096, got {text!r}")
    return w, h


@command("video", "record an MP4 of a run's policy", _video_arguments)
def _video(args) -> int:
    from embody.train import record_video

    out = Path(args.out or Path(args.run) / "eval.mp4")
    print(record_video(Path(args.run), out, sim=args.sim, size=args.size, overlay=args.overlay))
    return exits.OK


def _sim2sim_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--sim", action="append", help="a simulator to include (repeatable; default: every installed one)")
    p.add_argument("--episodes", type=positive_int, default=10)
    p.add_argument("--out", help="report directory (default: RUN/sim2sim)")
    add_set(p, "the run's config for evaluation")


@command("sim2sim", "evaluate a run on several simulators and compare (the gate before hardware)", _sim2sim_arguments)
def _sim2sim(args) -> int:
    from embody.sim2sim import compare, write_report
    from embody.sims import installed_simulators

    sims = args.sim or installed_simulators()
    rows = compare(Path(args.run), sims, episodes=args.episodes, overrides=args.set)
    out = Path(args.out or Path(args.run) / "sim2sim")
    write_report(rows, out)
    print((out / "report.md").read_text(), end="")
    print(f"report written to {out}")
    return exits.OK


# ---------------------------------------------------------------- robots: robot-sim, deploy


def _robot_sim_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("robot", help="h1_2 (unitree_hg topics) or peg_arm (embody's arm topics)")
    p.add_argument("--iface", default="lo", help="network interface for DDS (default: lo)")
    p.add_argument("--domain", type=nonneg_int, default=0, help="DDS domain id (default: 0)")
    p.add_argument("--band", action="store_true", help="h1_2: hold the robot on an elastic band (released by command)")
    p.add_argument("--duration", type=positive_float, help="seconds to serve (default: until Ctrl-C)")
    p.add_argument(
        "--realtime",
        type=rt_priority,
        nargs="?",
        const=80,
        metavar="PRIORITY",
        help="step under SCHED_FIFO (priority 1-99, default 80), as a robot's own controller runs: keeps a "
        "loaded machine from delaying the simulated robot (needs root or CAP_SYS_NICE)",
    )
    _armature_argument(p)


def _armature_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--armature",
        choices=("model", "motors"),
        default="model",
        help="the simulated robot's rotor inertia: the model file's (default) or the robot's motor table (h1_2)",
    )


@command("robot-sim", "a simulated robot behind the real wire protocol (DDS), in real time", _robot_sim_arguments)
def _robot_sim(args) -> int:
    from embody.hardware.robot_sim import serve

    serve(args.robot, args.iface, args.domain, args.band, args.duration, args.armature, args.realtime)
    return exits.OK


def _deploy_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run")
    p.add_argument("--robot", required=True, help="h1_2 or peg_arm")
    p.add_argument("--target", default="sim", help="sim (starts robot-sim itself) or dds:IFACE (e.g. dds:eth0)")
    p.add_argument("--domain", type=nonneg_int, default=0, help="DDS domain id (default: 0)")
    p.add_argument("--duration", type=positive_float, default=10.0, help="seconds of policy control (default: 10)")
    p.add_argument("--ramp", type=nonneg_float, default=2.0, help="seconds to ramp to the default pose (default: 2)")
    p.add_argument(
        "--command", type=floats, help="velocity command vx,vy,yaw_rate for velocity tasks (default: the task's)"
    )
    p.add_argument("--clip", metavar="FILE", help="a motion clip the upper body plays (tasks with motion clips)")
    p.add_argument(
        "--teleop",
        choices=("keyboard", "gamepad", "spacemouse"),
        help="a person's input as the task's reference (tasks with teleop(), e.g. ALMI's hand targets)",
    )
    p.add_argument("--no-band", action="store_true", help="sim: start the robot standing, without the band")
    _armature_argument(p)
    p.add_argument("--record", metavar="DIR", help="record what was sent and received into a dataset (one episode)")
    p.add_argument(
        "--log",
        metavar="FILE.rrd|FILE.mcap",
        help="what the robot reported, the policy asked and the supervisor sent and why, on one timeline (Rerun or MCAP)",
    )
    add_set(p, "the run's config")


@command(
    "deploy",
    "run a trained policy on a robot through the safety supervisor (exit 1: a fault damped it)",
    _deploy_arguments,
)
def _deploy(args) -> int:
    import logging

    import numpy as np

    from embody.hardware.deploy import DeployConfig, deploy

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("embody").setLevel(logging.INFO)  # the session's own steps; libraries' INFO is noise here
    cfg = DeployConfig(
        robot=args.robot,
        target=args.target,
        domain=args.domain,
        duration_s=args.duration,
        band=not args.no_band,
        ramp_s=args.ramp,
        record=Path(args.record) if args.record else None,
        log=Path(args.log) if args.log else None,
        teleop=args.teleop,
        armature=args.armature,
    )
    commands = None if args.command is None else np.array(args.command)
    overrides = list(args.set)
    if args.clip:
        overrides.append(f"env.motion.clip={_clip_file(Path(args.run), args.clip)}")
    return _session_result("deploy", deploy(Path(args.run), cfg, overrides, commands))


def _clip_file(run: Path, clip: str) -> Path:
    """``--clip FILE`` checked: the file exists and the run's task plays motion clips."""
    from embody.runs import load_run

    if not Path(clip).is_file():
        raise exits.CommandError(f"{clip}: motion clip file is missing")
    cfg, _ = load_run(run)
    if "motion" not in cfg.env:
        raise exits.CommandError(f"--clip {clip}: {run} trained {cfg.task}, a task that plays no motion clips")
    return Path(clip).resolve()


def _session_result(name: str, summary: dict) -> int:
    """Print a supervised session's summary (JSON) and, after a fault, one line naming it; its exit code
    (1: a fault ended it in damping, hardware/session.py)."""
    print(json.dumps(summary, indent=2))
    if summary["fault"] is not None:
        print(f"embody {name}: fault in {summary['stage']}: {summary['fault']} (the robot was damped)", file=sys.stderr)
    return summary["exit_code"]


# ---------------------------------------------------------------- datasets: record, replay, dataset


def _record_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task")
    p.add_argument("--episodes", type=positive_int, required=True)
    p.add_argument("--out", required=True, help="dataset directory (new, or one to append to)")
    p.add_argument("--policy", metavar="RUN", help="a trained run (default: the task's scripted expert, else random)")
    p.add_argument("--sim", default="mujoco")
    p.add_argument("--envs", type=positive_int, default=4, help="episodes recorded in parallel")
    p.add_argument("--seed", type=any_int, default=0)
    p.add_argument("--no-video", action="store_true", help="skip the camera video")
    add_set(p, "the env config", "env.randomization.enabled=false")


@command("record", "record episodes of a task into a LeRobot v3.0 dataset", _record_arguments)
def _record(args) -> int:
    from embody.datasets.record import RecordConfig, record

    cfg = RecordConfig(
        task=args.task,
        episodes=args.episodes,
        out=Path(args.out),
        policy=Path(args.policy) if args.policy else None,
        sim=args.sim,
        n_envs=args.envs,
        seed=args.seed,
        video=not args.no_video,
        overrides=args.set,
    )
    print(json.dumps(record(cfg), indent=2))
    return exits.OK


def _replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir")
    p.add_argument("--sim", default="mujoco")
    p.add_argument("--mode", choices=["kinematic", "dynamic"], default="kinematic")
    p.add_argument("--out", help="kinematic: an MP4 of the replay")
    p.add_argument("--robot", help="h1_2 or peg_arm: send the recorded joint targets through the supervisor")
    p.add_argument("--target", default="sim", help="with --robot: sim or dds:IFACE")
    p.add_argument("--domain", type=nonneg_int, default=0)
    p.add_argument("--log", metavar="FILE.rrd|FILE.mcap", help="with --robot: what was reported, replayed and sent")


@command(
    "replay",
    "replay a dataset in a simulator (kinematic or dynamic) or on a robot (exit 1: a fault damped it)",
    _replay_arguments,
)
def _replay(args) -> int:
    from embody.datasets import replay
    from embody.datasets.format import load

    if args.log and not args.robot:
        raise exits.CommandError("--log records a replay on a robot: give --robot too")
    ds = load(Path(args.dir))
    if args.robot:
        log = Path(args.log) if args.log else None
        return _session_result("replay", replay.to_robot(ds, args.robot, args.target, args.domain, log=log))
    if args.mode == "kinematic":
        result = replay.kinematic(ds, args.sim, Path(args.out) if args.out else None)
    else:
        result = replay.dynamic(ds, args.sim)
    print(json.dumps(result, indent=2))
    return exits.OK


def _dir_argument(help: str = "the dataset"):
    return lambda p: p.add_argument("dir", help=help)


group("dataset", "inspect, check, plot, compact, export or import a dataset")


@command("dataset info", "episodes, frames, features and recording of a dataset (JSON)", _dir_argument())
def _dataset_info(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets import inspect

    print(json.dumps(inspect.info(fmt.load(Path(args.dir))), indent=2))
    return exits.OK


@command("dataset stats", "per-feature statistics of a dataset (JSON)", _dir_argument())
def _dataset_stats(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets import inspect

    print(json.dumps(inspect.stats(fmt.load(Path(args.dir))), indent=2))
    return exits.OK


@command("dataset validate", "check a dataset's files, schema and checksums (exit 1: problems found)", _dir_argument())
def _dataset_validate(args) -> int:
    from embody.datasets import format as fmt

    problems = fmt.validate(Path(args.dir))
    print("\n".join(problems) if problems else f"{args.dir}: valid")
    return exits.FAILED if problems else exits.OK


@command("dataset compact", "rewrite a dataset's appended chunks into one file each", _dir_argument())
def _dataset_compact(args) -> int:
    from embody.datasets import format as fmt

    fmt.compact(Path(args.dir))
    print(f"{args.dir}: compacted")
    return exits.OK


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the dataset")
    p.add_argument("--episode", type=nonneg_int, default=0, help="the episode")
    p.add_argument("--out", help="folder (default: DIR/plots)")


@command("dataset plot", "plot an episode's signals (PNG)", _plot_arguments)
def _dataset_plot(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets import inspect

    root = Path(args.dir)
    paths = inspect.plot(fmt.load(root), Path(args.out or root / "plots"), episode=args.episode)
    print(f"{len(paths)} plots written to {paths[0].parent if paths else args.out}")
    return exits.OK


def _view_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the dataset")
    p.add_argument("--episode", type=nonneg_int, default=0, help="the episode")
    p.add_argument("--save", help="write a Rerun .rrd file instead of opening the viewer")
    p.add_argument("--web-port", type=positive_int, help="serve Rerun's web viewer on this port (headless machines)")


@command("dataset view", "look at an episode in Rerun: the robot in 3D, cameras, named signals", _view_arguments)
def _dataset_view(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets.content import episode_content
    from embody.datasets.to_rerun import view

    ds = fmt.load(Path(args.dir))
    content = episode_content(ds, args.episode)
    where = view(content, save=Path(args.save) if args.save else None, web_port=args.web_port)
    if args.save:
        print(f"episode {args.episode} written to {where} (open it with: rerun {where})")
    elif args.web_port:
        print(f"Rerun web viewer: {where} (Ctrl-C to stop)")
        _wait_for_interrupt()
    return exits.OK


def _wait_for_interrupt() -> None:
    import time

    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass


def _export_mcap_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the dataset")
    p.add_argument("--out", required=True, help="the .mcap file")
    p.add_argument("--episode", type=nonneg_int, help="one episode (default: all, one after another)")


@command("dataset export-mcap", "export episodes as MCAP with Foxglove's schemas", _export_mcap_arguments)
def _dataset_export_mcap(args) -> int:
    from embody.datasets import format as fmt
    from embody.datasets.content import episode_content
    from embody.datasets.to_mcap import export_mcap

    ds = fmt.load(Path(args.dir))
    episodes = range(ds.num_episodes) if args.episode is None else [args.episode]
    out = export_mcap([episode_content(ds, i) for i in episodes], Path(args.out))
    print(f"{len(episodes)} episode(s) written to {out}")
    return exits.OK


def _export_minari_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the dataset")
    p.add_argument("--out", help="the Minari dataset folder (default: under MINARI_DATASETS_PATH)")
    p.add_argument("--dataset-id", help="the Minari id (default: embody/<task>-v0)")


@command("dataset export-minari", "export a dataset as a Minari dataset", _export_minari_arguments)
def _dataset_export_minari(args) -> int:
    from embody.datasets import minari

    print(f"Minari dataset written to {minari.export_minari(Path(args.dir), args.out, args.dataset_id)}")
    return exits.OK


def _import_minari_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="the Minari dataset")
    p.add_argument("--out", required=True, help="the new dataset")
    p.add_argument("--fps", type=positive_int, required=True, help="the frame rate to record (Minari stores none)")


@command("dataset import-minari", "import a Minari dataset", _import_minari_arguments)
def _dataset_import_minari(args) -> int:
    from embody.datasets import minari

    ds = minari.import_minari(Path(args.dir), args.out, fps=args.fps)
    print(f"{ds.num_episodes} episodes, {ds.num_frames} frames imported into {args.out}")
    return exits.OK


# ---------------------------------------------------------------- bench


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default=None, help="benchmark name; omitted: list them")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")


@command("bench", "benchmarks against peers (embody bench core)", _bench_arguments)
def _bench(args) -> int:
    from embody.benchmarks import run_benchmark

    return run_benchmark(args.name, args.rest)


# ---------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    """The parser over the core commands, the core groups and every loaded plugin's commands."""
    from embody import plugins
    from embody.commands import build_parser as build

    for module in CORE_COMMAND_MODULES:
        importlib.import_module(module)
    plugins.load()
    return build(
        "embody",
        "embody: train in simulation, deploy to robots through the same code. Exit codes: "
        "0 done, 1 the outcome failed (deploy, replay --robot: a fault damped the robot; dataset validate), 2 bad input, 3 unsolvable (plan) or "
        "simulator unreachable (drive), 4 planner timeout, 5 planner not available, 130 interrupted (train: "
        "checkpoint saved).",
    )


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a bad argument, already printed as one line (2)
        return e.code if isinstance(e.code, int) else exits.INPUT
    cmd = args.embody_command
    keep_freed_memory()  # torch's CPU temporaries without page faults (embody/allocator.py)
    try:
        if args.jobs_ray_address:
            from embody import jobs
            from embody.scale import check_address

            check_address(args.jobs_ray_address)
            jobs.use_backend("ray", address=args.jobs_ray_address)
        return cmd.run(args)
    except KeyboardInterrupt:  # a person stopped it: no traceback (training saves first, studies resume)
        print(f"\nembody {cmd.name}: interrupted", file=sys.stderr)
        return exits.INTERRUPTED
    except Exception as e:
        code = exits.exit_code_of(e)
        if code is None:
            raise  # a bug: keep the traceback
        print(f"embody {cmd.name}: {exits.describe(e)}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
