"""``embody backdoor study --scale tiny|paper``: trigger/target combinations × the five offline agents × {clean,
poisoned, poisoned + negative training}, over seeds, as resumable jobs of the core runner (``embody.jobs``).

Per seed and combination (one job): the trigger is refined from its spec (``specs/NAME.yaml``) with ``patches``
near-misses, half of them for negative training and half held out; three datasets are generated (clean: poison
rate 0; poisoned: ``poison_rate``; negative: the same plus ``patch_rate`` patch episodes with clean labels);
each agent is trained on each and evaluated (``evaluate.py``) on ``eval_seeds`` traffic seeds where the trigger
happens. The sweep jobs train the poisoned variant of the first combination at each rate of ``sweep``. Job
results land in OUT/jobs/ as they finish (an interrupted study resumes); ``report.write`` pools them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from embody.config import PosInt
from embody.jobs import Job, JobStore, run_jobs
from embody.policies.offline_agents import AGENTS

SPECS = Path(__file__).parent / "specs"
COMBOS = (  # trigger spec : target; pincer has two attacker vehicles
    "close-cut-in:brake",
    "close-cut-in:accelerate",
    "left-shadow:swerve-left",
    "left-shadow:brake",
    "pincer:accelerate",
    "pincer:swerve-left",
)
VARIANTS = ("clean", "poisoned", "negative")


@dataclass
class StudyConfig:
    """The study's settings (``for_scale`` gives tiny's and paper's)."""

    combos: list[str] = field(default_factory=lambda: list(COMBOS))
    agents: list[str] = field(default_factory=lambda: list(AGENTS))
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    scenario: str = "cut-in"
    episodes: int = 200  # per dataset
    duration_s: float = 15.0
    poison_rate: float = 0.1
    patch_rate: float = 0.1  # negative training
    hold_s: float = 3.0
    sweep: list[float] = field(default_factory=lambda: [0.02, 0.05, 0.2])  # poison rates, first combo, poisoned
    agent_steps: int = 5000  # gradient steps of BC, TD3+BC, IQL, CQL
    dt_steps: int = 3000
    hidden: list[PosInt] = field(default_factory=lambda: [128, 128])
    eval_seeds: int = 80  # traffic seeds tried; those where the trigger happens (about a quarter) are kept
    patches: int = 4  # near-misses per trigger: the first half trains, the second is held out
    population: int = 12  # trigger refinement
    iterations: int = 8
    defence_rate: float = 0.05  # the defender's bound on the poisoned share of transitions (spectral signatures)


def for_scale(scale: str) -> StudyConfig:
    """tiny: two combinations (one with two attackers), one seed, short datasets and trainings; paper: all."""
    if scale == "paper":
        return StudyConfig()
    if scale != "tiny":
        raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
    return StudyConfig(
        combos=["close-cut-in:brake", "pincer:accelerate"],
        seeds=[0],
        episodes=12,
        poison_rate=0.25,
        patch_rate=0.17,
        sweep=[0.5],
        agent_steps=60,
        dt_steps=40,
        hidden=[32, 32],
        eval_seeds=4,
        patches=2,
        population=6,
        iterations=3,
    )


def agent_overrides(cfg: StudyConfig, algo: str, seed: int) -> dict:
    """``train_agent`` overrides: the study's step counts and network width, its seed, no progress lines."""
    if algo == "dt":
        return {"steps": cfg.dt_steps, "seed": seed, "progress": False, "context": 10, "embed": 64, "layers": 2}
    out = {"steps": cfg.agent_steps, "hidden": cfg.hidden, "seed": seed, "progress": False}
    # competence check on a clean 200-episode dataset (seed 0, 9 scenes): TD3+BC with its D4RL α = 2.5 crashed in
    # 67 % of clean scenes (score 0.31), with α = 0.5 it scored 0.99; CQL with 4 samples per kind of action costs
    # a third of 10's (it scored 1.00 with 10)
    return out | {"td3bc": {"alpha": 0.5}, "cql": {"cql_samples": 4}}.get(algo, {})


# -- a job: one seed × one combination (or one sweep rate) -------------------------------------------------------
def library(cfg: StudyConfig, trigger: str, seed: int, root: Path) -> tuple[Path, Path]:
    """(training library, held-out patches) folders of ``trigger`` for ``seed`` under ``root``, generated once."""
    from .generate import RefineConfig, patches, refine, save_trigger
    from .spec import load_spec
    from .traces import empty_scene

    train, held = root / trigger / "train", root / trigger / "held-out"
    if (train / f"{trigger}.json").exists():
        return train, held
    base = empty_scene(cfg.scenario, cfg.duration_s)
    spec = load_spec(SPECS / f"{trigger}.yaml", base.dt)
    rc = RefineConfig(cfg.population, max(1, cfg.population // 4), cfg.iterations, 0.5, seed)
    found = refine(spec, base, rc)
    if not found.satisfied:
        raise RuntimeError(f"{trigger}: no trigger found for seed {seed} (best robustness {found.robustness:.3f})")
    near = patches(spec, base, found, rc, count=cfg.patches, tries=6 * cfg.patches)
    half = (len(near) + 1) // 2
    for i, p in enumerate(near):
        save_trigger(p, spec, train if i < half else held, f"{trigger}-patch{i}")
    save_trigger(found, spec, train, trigger)  # last: its JSON marks the library complete
    return train, held


def dataset(cfg: StudyConfig, lib: Path, out: Path, seed: int, target: str, poison: float, patch: float) -> Path:
    """The dataset at ``out`` (reused when complete; a partial one is regenerated)."""
    import shutil

    from .dataset import PoisonConfig, generate

    if (out / "meta" / "info.json").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    pc = PoisonConfig(
        scenario=cfg.scenario,
        episodes=cfg.episodes,
        poison_rate=poison,
        patch_rate=patch,
        target=target,
        hold_s=cfg.hold_s,
        duration_s=cfg.duration_s,
        seed=1000 * seed,
    )
    generate(pc, lib, out, log=lambda m: None)
    return out


def run_combo(cfg: StudyConfig, out: Path, params: dict) -> list[dict]:
    """One job: a seed and a combination (or a sweep rate): datasets, agents, evaluations; one row per agent and
    variant."""
    import torch

    from embody.datasets.format import load
    from embody.policies.offline_agents import Transitions, train_agent

    from .dataset import load_library, load_scenes
    from .defence import spectral_defence
    from .evaluate import eval_scenes, evaluate_agent
    from .traces import empty_scene

    torch.set_num_threads(1)
    seed, (trigger, target) = params["seed"], params["combo"].split(":")
    root = out / f"seed{seed}"
    train_lib, held_lib = library(cfg, trigger, seed, root / "library")
    triggers, _ = load_library(train_lib)
    held = load_scenes(held_lib)
    base = empty_scene(cfg.scenario, cfg.duration_s)
    scenes = eval_scenes(base, triggers[0], [100_000 * (seed + 1) + i for i in range(cfg.eval_seeds)])
    if not scenes:
        raise RuntimeError(f"{trigger}: the trigger never happened in {cfg.eval_seeds} evaluation seeds (eval_seeds)")
    variants = (
        {"poisoned": (params["poison_rate"], 0.0)}
        if "sweep" in params
        else {"clean": (0.0, 0.0), "poisoned": (cfg.poison_rate, 0.0), "negative": (cfg.poison_rate, cfg.patch_rate)}
    )
    rows = []
    for variant, (poison, patch) in variants.items():
        name = "clean" if variant == "clean" else f"{trigger}-{target}-p{poison:g}-n{patch:g}"
        ds = load(dataset(cfg, train_lib, root / "datasets" / name, seed, target, poison, patch))
        data, poisoned = Transitions.from_dataset(ds), ds.column("backdoor.poisoned").reshape(-1)
        for algo in cfg.agents:
            agent = train_agent(algo, data, agent_overrides(cfg, algo, seed))
            metrics = evaluate_agent(agent, base, triggers[0], held, scenes, target, cfg.hold_s)
            if algo != "dt" and poisoned.any():  # the defence reads an MLP actor's features
                defence = spectral_defence(agent, data.obs, data.actions, poisoned, cfg.defence_rate, seed=seed)
                metrics |= {f"defence_{k}": v for k, v in defence.items()}
            key = {"seed": seed, "combo": params["combo"], "variant": variant, "poison_rate": poison, "agent": algo}
            rows.append(key | {"sweep": "sweep" in params} | metrics)
    return rows


def jobs(cfg: StudyConfig) -> list[Job]:
    """Per seed: one job per combination, one per sweep rate."""
    out = []
    for seed in cfg.seeds:
        out += [Job(f"seed{seed}-{c.replace(':', '-')}", {"seed": seed, "combo": c}) for c in cfg.combos]
        out += [
            Job(f"seed{seed}-sweep-p{p:g}", {"seed": seed, "combo": cfg.combos[0], "sweep": True, "poison_rate": p})
            for p in cfg.sweep
        ]
    return out


def run_study(cfg: StudyConfig, out: Path, command: str, log=print) -> dict:
    """Run (or resume) the study's jobs in ``out``, then write the pooled results and report."""
    from .report import write

    store = JobStore(out, asdict(replace(cfg, seeds=[])))
    results = run_jobs(partial(run_combo, cfg, out), jobs(cfg), store, label="backdoor study", log=log)
    rows = [row for r in results.values() for row in r]
    return write(rows, asdict(cfg), out, command, log)
