"""``embody primt train TASK --teacher scripted|text|visual|fused [--llm-url URL] [--vlm-url URL]``: SAC on a
reward learned from one teacher's preferences (``embody.policies.preference``). A judge without its URL is the
information-limited stand-in (``standins.py``) served on loopback; the judges' counters land in
``RUN/judges.json``. ``scripted+foresight``: the core's scripted teacher with foresight's query buffer.
``embody primt study --scale tiny|paper``: the study (``study.py``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from embody import exits
from embody.commands import add_set, any_int, nonneg_float, nonneg_int, positive_float, positive_int

JUDGED = ("text", "visual", "fused", "fused+hindsight", "fused+foresight", "fused+foresight+hindsight")
TEACHERS = ("scripted", "scripted+foresight", *JUDGED, "person")


def add_judge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-url", help="an OpenAI-compatible API root for the text judge (default: the stand-in)")
    p.add_argument("--llm-model", default="judge", help="the model name sent to --llm-url")
    p.add_argument("--vlm-url", help="an OpenAI-compatible API root for the visual judge (default: the stand-in)")
    p.add_argument("--vlm-model", default="judge", help="the model name sent to --vlm-url")


@dataclass
class Judges:
    """Where the judges are: an endpoint and model name each (None: the stand-in on loopback); the person's page and
    foresight's settings."""

    llm_url: str | None = None
    llm_model: str = "judge"
    vlm_url: str | None = None
    vlm_model: str = "judge"
    repeats: int = 3
    port: int = 0  # the labelling page's (person)
    timeout_s: float = 3600.0  # how long the page waits for a person's labels per session
    end_jitter: float = 0.0  # foresight's: std (m) of where arm-reach's trajectories end around the target
    tilt: float = 0.0  # foresight's: std (rad per axis) of arm-reach's peg orientation around pointing down


@contextlib.contextmanager
def judge_teacher(cfg, teacher: str, judges: Judges) -> Iterator:
    """PRIMT's teacher for ``teacher`` text, visual or fused (each stand-in served on loopback while the context
    lasts when its URL is None), else None: the core's scripted teacher, or the env's reward."""
    from embody.chat import ChatClient, LoopbackChatServer

    from .briefs import brief_for
    from .foresight import ForesightConfig, synthesize
    from .hindsight import HindsightLoss
    from .judges import TextJudge, VisualJudge
    from .standins import text_standin, visual_standin
    from .teacher import PRIMTTeacher, ScriptedForesight

    plans = ForesightConfig(end_jitter=judges.end_jitter, tilt=judges.tilt)
    if teacher == "scripted+foresight":  # the scripted plan: no judge is asked
        from embody.policies.preference import ScriptedTeacher

        yield ScriptedForesight(
            ScriptedTeacher.from_config(cfg.preference, cfg.seed), synthesize(cfg, None, plans, cfg.seed)
        )
        return
    if teacher not in (*JUDGED, "person"):
        yield None
        return
    brief = brief_for(cfg.task)
    if teacher == "person":
        with person_teacher(cfg, judges.port, judges.timeout_s) as person:
            yield person
        return
    with contextlib.ExitStack() as stack:

        def endpoint(url: str | None, standin, kind: str) -> str:
            if url is not None:
                return url
            url = stack.enter_context(LoopbackChatServer(respond=standin, record=False)).url
            print(f"{kind} judge: the information-limited stand-in on {url}", file=sys.stderr)
            return url

        text = visual = foresight = None
        parts = teacher.split("+")
        fused = parts[0] == "fused"
        if teacher == "text" or fused:
            client = ChatClient(endpoint(judges.llm_url, text_standin, "text"), judges.llm_model)
            text = TextJudge(client, brief, judges.repeats)
        if "foresight" in parts:  # the plan is asked of the text judge
            foresight = synthesize(cfg, text.client, plans, cfg.seed)
        if teacher == "visual" or fused:
            from embody.runs import build_env

            env = build_env(cfg, n_envs=1)  # the task instance the scene's pose reads
            stack.callback(env.close)
            client = ChatClient(endpoint(judges.vlm_url, visual_standin, "visual"), judges.vlm_model)
            visual = VisualJudge(client, brief, judges.repeats, task=env.task)
            stack.callback(visual.renderer.close)
        yield PRIMTTeacher(
            text=text,
            visual=visual,
            aux_loss=HindsightLoss() if "hindsight" in parts else None,
            foresight=foresight,
            plans=plans.stats,
        )


@contextlib.contextmanager
def person_teacher(cfg, port: int, timeout_s: float, env=None) -> Iterator:
    """A person labelling at the local page (``labelling.py``) while the context lasts; ``env``: the task's, when
    the caller has built it already (closed here)."""
    from embody.runs import build_env

    from .briefs import brief_for
    from .frames import SceneRenderer
    from .labelling import LabelServer, PersonTeacher

    brief = brief_for(cfg.task)
    env = env or build_env(cfg, n_envs=1)  # the task instance the scene's pose reads
    server, renderer = LabelServer(cfg.task, port), SceneRenderer(brief.scene)
    print(f"label the queries at {server.url}", file=sys.stderr)
    try:
        yield PersonTeacher(server, renderer, brief.pose, env.task, timeout_s)
    finally:
        server.close()
        renderer.close()
        env.close()


def label_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pairs", help="a preference file (safetensors; e.g. RUN/preferences.safetensors) to label")
    p.add_argument("--task", required=True, help="the task the pairs come from (it draws them)")
    p.add_argument("--out", required=True, metavar="FILE", help="the person's labels: a preference file")
    p.add_argument("--port", type=nonneg_int, default=8765, help="the page's port on 127.0.0.1 (0: any free)")
    p.add_argument("--timeout-s", type=positive_float, default=3600.0, help="stop waiting after this long")


def run_label(args) -> int:
    """Serve the pairs of a preference file for a person; write their labels as a preference file."""
    from embody.policies.preference import PreferenceDataset, PreferenceError
    from embody.runs import build_env
    from embody.train import resolve_config

    cfg = resolve_config(args.task)
    env = build_env(cfg, n_envs=1)
    try:  # a bad file fails before any page is served
        data = PreferenceDataset.load(Path(args.pairs), env.observation_size, env.action_size)
    except PreferenceError:
        env.close()
        raise
    keys = ("obs", "actions", "rewards")
    with person_teacher(cfg, args.port, args.timeout_s, env) as person:
        labels = person.label({k: data.data[k] for k in keys})
    out = PreferenceDataset()
    out.add({k: data.data[k] for k in keys}, labels)
    out.save(Path(args.out))
    print(json.dumps({"pairs": len(labels), "labelled": len(out), "out": args.out}))
    return exits.OK


def train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "task", help="a task with a judge brief (briefs.py): cartpole-swingup, arm-reach, gym:dm_control/..."
    )
    p.add_argument("--teacher", choices=TEACHERS, default="text", help="who answers the queries (default text)")
    add_judge_arguments(p)
    p.add_argument("--repeats", type=positive_int, default=3, help="askings per pair, order swapped (default 3)")
    p.add_argument("--port", type=nonneg_int, default=8765, help="--teacher person: the page's port (0: any free)")
    p.add_argument(
        "--foresight-end-jitter",
        type=nonneg_float,
        default=0.0,
        metavar="M",
        help="arm-reach's foresight trajectories end this far (std, m, per axis) around the target (default 0)",
    )
    p.add_argument(
        "--foresight-tilt",
        type=nonneg_float,
        default=0.0,
        metavar="RAD",
        help="arm-reach's foresight trajectories hold the peg turned this far (std, rad, per axis, drawn per "
        "trajectory) from pointing down, so that no posture marks them apart from the agent's (default 0)",
    )
    p.add_argument("--steps", type=positive_int, help="total env steps")
    p.add_argument("--envs", type=positive_int, help="number of parallel envs")
    p.add_argument("--seed", type=any_int)
    p.add_argument("--out", help="run directory (default: runs/TASK-primt-TIMESTAMP)")
    add_set(p, "the TrainConfig", "preference.budget=500")


def run_train(args) -> int:
    from embody.train import resolve_config, train

    cfg = resolve_config(args.task, None, args.set, algo="sac", n_envs=args.envs, steps=args.steps, seed=args.seed)
    cfg.preference.teacher = args.teacher  # saved: `embody train --resume` of a judge's run names what it lacks
    out = Path(args.out or f"runs/{cfg.task}-primt-{time.strftime('%Y%m%d-%H%M%S')}")
    if (out / "checkpoint").exists():
        raise exits.CommandError(f"{out} already holds a run; choose another --out")
    where = Judges(
        args.llm_url,
        args.llm_model,
        args.vlm_url,
        args.vlm_model,
        args.repeats,
        args.port,
        end_jitter=args.foresight_end_jitter,
        tilt=args.foresight_tilt,
    )
    with judge_teacher(cfg, args.teacher, where) as teacher:
        summary = train(cfg, out, teacher=teacher)
        judges = {
            "teacher": args.teacher,
            "llm_url": args.llm_url or "stand-in",
            "vlm_url": args.vlm_url or "stand-in",
            **(teacher.stats() if hasattr(teacher, "stats") else {}),
        }
    (out / "judges.json").write_text(json.dumps(judges, indent=2))
    print(json.dumps(summary | {"judges": judges}, indent=2))
    print(f"run written to {out}")
    return exits.OK


def study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=["tiny", "paper"], default="tiny", help="tiny: < 3 min on 2 cores")
    p.add_argument("--out", required=True, metavar="DIR", help="the study folder (resumed when it holds jobs)")
    p.add_argument("--seed", type=any_int, action="append", help="run only these seeds (repeatable): seed jobs")
    add_judge_arguments(p)
    add_set(p, "the StudyConfig, on top of --scale", "arms=[true,scripted] or budgets=[50]")


def run_study(args) -> int:
    """Run or resume the study; the report lands in OUT/report.md."""
    from embody.config import apply_overrides

    from .study import for_scale
    from .study import run_study as study

    cfg = apply_overrides(for_scale(args.scale), texts=args.set)
    cfg.seeds = args.seed or cfg.seeds
    cfg.llm_url, cfg.llm_model = args.llm_url or cfg.llm_url, args.llm_model
    cfg.vlm_url, cfg.vlm_model = args.vlm_url or cfg.vlm_url, args.vlm_model
    study(cfg, Path(args.out), "embody " + " ".join(sys.argv[1:]), log=lambda m: print(m, file=sys.stderr))
    return exits.OK
