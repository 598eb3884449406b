"""``embody bench backdoor``: the trajectory backdoor's costs, measured in one run.

1. Trigger refinement: each shipped spec (``specs/*.yaml``) refined on the fast cut-in scene with the default
   cross-entropy settings: seconds per trigger, episodes simulated, episodes/s.
2. Poisoned-dataset generation: ``--episodes`` episodes (10 % trigger, 10 % patch) from the close-cut-in trigger:
   frames/s written.
3. Training: each offline agent on that dataset, embody against d3rlpy with matched settings (``embody bench
   offline``'s peer script, in d3rlpy's own virtual environment): gradient steps/s and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from embody.commands import positive_int


def refine_all(log) -> list[dict]:
    """Time the refinement of every shipped spec."""
    from .generate import RefineConfig, refine
    from .spec import load_spec
    from .study import SPECS
    from .traces import empty_scene

    base = empty_scene("cut-in")
    rows = []
    for path in sorted(SPECS.glob("*.yaml")):
        spec = load_spec(path, base.dt)
        start = time.perf_counter()
        found = refine(spec, base, RefineConfig())
        seconds = time.perf_counter() - start
        rows.append(
            {
                "spec": spec.name,
                "seconds": seconds,
                "evaluations": found.evaluations,
                "episodes_per_s": found.evaluations / seconds,
                "robustness": found.robustness,
                "satisfied": found.satisfied,
            }
        )
        log(f"trigger {spec.name}: {seconds:.1f} s, {found.evaluations} episodes")
    return rows


def make_dataset(work: Path, episodes: int) -> tuple[dict, Path]:
    """Generate the dataset (timed) from a close-cut-in library; its speed and folder."""
    from embody.datasets.format import load

    from .dataset import PoisonConfig, generate
    from .study import StudyConfig, library

    train, _ = library(StudyConfig(patches=2, population=8, iterations=4), "close-cut-in", 0, work / "library")
    start = time.perf_counter()
    generate(PoisonConfig(episodes=episodes), train, work / "dataset", log=lambda m: None)
    seconds = time.perf_counter() - start
    frames = load(work / "dataset").num_frames
    return {
        "episodes": episodes,
        "frames": frames,
        "seconds": seconds,
        "frames_per_s": frames / seconds,
    }, work / "dataset"


def arrays(folder: Path) -> dict[str, np.ndarray]:
    """The dataset's transitions in the peer script's layout."""
    from embody.policies.offline_agents import Transitions

    t = Transitions.from_dataset(folder)
    return {
        "observations": t.obs,
        "actions": t.actions,
        "rewards": t.rewards,
        "next_observations": t.next_obs,
        "terminals": t.dones,
        "timeouts": t.timeouts,
    }


def main(argv: list[str]) -> int:
    from embody.benchmarks import offline, save_results

    p = argparse.ArgumentParser(
        prog="embody bench backdoor", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--episodes", type=positive_int, default=40, help="episodes of the generated dataset")
    p.add_argument("--steps", type=positive_int, default=1000, help="gradient steps timed per agent (DT: half)")
    p.add_argument("--seeds", type=positive_int, default=1)
    p.add_argument("--peer-python", help="the interpreter of an environment with d3rlpy (default: build/peers)")
    p.add_argument("--no-peer", action="store_true", help="embody's side only (a smoke run: no ratios)")
    p.add_argument("--out", help="directory for results.json")
    args = p.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="embody-bench-backdoor-") as tmp:
        work = Path(tmp)
        triggers = refine_all(log)
        gen, folder = make_dataset(work, args.episodes)
        data = arrays(folder)
        ends = np.flatnonzero(data["terminals"] | data["timeouts"])
        s = offline.SETTINGS | {"algos": list(offline.ALGOS), "seeds": args.seeds, "steps": args.steps}
        s |= {"evaluate": False, "max_timestep": int(np.diff(np.concatenate([[-1], ends])).max()) + 2}
        s["dt"] = offline.SETTINGS["dt"] | {"steps": max(1, args.steps // 2)}
        np.savez(work / "data.npz", **data)
        peer = {"d3rlpy": None, "algos": {}}
        if not args.no_peer:
            peer = offline.run_peer(offline.peer_python(args.peer_python), work / "data.npz", s, work)
        ours = offline.run_embody(data, s)
    speed = []
    for algo in s["algos"]:
        mine = float(np.mean([r["steps_per_s"] for r in ours[algo]]))
        theirs = float(np.mean([r["steps_per_s"] for r in peer["algos"][algo]])) if peer["algos"] else None
        row = {"algo": algo, "embody_steps_per_s": mine, "d3rlpy_steps_per_s": theirs}
        speed.append(row | {"ratio": mine / theirs if theirs else None})
    result = {"triggers": triggers, "dataset": gen, "training": speed, "d3rlpy": peer["d3rlpy"], "settings": s}
    _print(result)
    save_results(args.out, result)
    return 0


def _print(r: dict) -> None:
    print(
        "\nembody bench backdoor\n\n| trigger spec | seconds | episodes | episodes/s | robustness |\n|---|---|---|---|---|"
    )
    for t in r["triggers"]:
        print(
            f"| {t['spec']} | {t['seconds']:.1f} | {t['evaluations']} | {t['episodes_per_s']:.1f} | "
            f"{t['robustness']:.2f}{'' if t['satisfied'] else ' (not satisfied)'} |"
        )
    g = r["dataset"]
    print(
        f"\ndataset generation: {g['frames']} frames of {g['episodes']} episodes in {g['seconds']:.1f} s: "
        f"{g['frames_per_s']:.0f} frames/s\n"
    )
    print(f"| agent | embody steps/s | d3rlpy {r['d3rlpy']} steps/s | embody / d3rlpy |\n|---|---|---|---|")
    for row in r["training"]:
        peer = f"{row['d3rlpy_steps_per_s']:.0f} | {row['ratio']:.2f}×" if row["ratio"] else "— | —"
        print(f"| {row['algo']} | {row['embody_steps_per_s']:.0f} | {peer} |")
