"""``embody bench offline``: embody's five offline agents against d3rlpy's, same data, same settings, one run.

The data is the point-mass goal task's mixed-quality dataset (``benchmarks/pointmass.py``: a good and a bad
behavior policy, a coin flip per episode), where offline RL must beat behavior cloning. For each of BC, TD3+BC,
IQL, CQL and the Decision Transformer, both libraries train ``--seeds`` seeds with matched networks, learning
rates, batch sizes, discount, observation standardization and action min-max scaling; the returns from the same
fixed starts are compared by their 95 % bootstrap intervals over seeds (``agree``: the intervals overlap), and
training speed as gradient steps/s (embody / d3rlpy). d3rlpy pins gymnasium 1.0.0, so it runs in its own
virtual environment (``--peer-python``, or one the bench creates under ``build/peers/d3rlpy`` on first use).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from embody.commands import positive_int

from . import pointmass

ALGOS = ("bc", "td3bc", "iql", "cql", "dt")
PEER_VERSION = "2.8.1"
PEER_VENV = Path("build/peers/d3rlpy")
SETTINGS = {
    "hidden": [64, 64],
    "lr": 3e-4,
    "batch_size": 256,
    "gamma": 0.9,
    "cql_alpha": 5.0,
    "cql_samples": 10,
    "threads": 1,
    "max_timestep": pointmass.STEPS + 2,
    "dt": {"context": 8, "embed": 64, "layers": 1, "lr": 1e-4, "batch_size": 64, "warmup_steps": 500},
}


def embody_overrides(algo: str, s: dict, seed: int) -> dict:
    """``train_agent`` overrides matching the bench's settings ``s``."""
    if algo == "dt":
        dt = s["dt"]
        keys = ("context", "embed", "layers", "lr", "batch_size", "warmup_steps", "steps")
        return {k: dt[k] for k in keys} | {"heads": 1, "seed": seed, "progress": False}
    return {
        "hidden": s["hidden"],
        "lr": s["lr"],
        "batch_size": s["batch_size"],
        "gamma": s["gamma"],
        "steps": s["steps"],
        "cql_alpha": s["cql_alpha"],
        "cql_samples": s["cql_samples"],
        "seed": seed,
        "progress": False,
        "log_every": s["steps"],
    }


def run_embody(data: dict, s: dict) -> dict:
    """Per algo, each seed's training steps/s and (unless ``s["evaluate"]`` is false) point-mass return."""
    import torch

    from embody.policies.offline_agents import Transitions, train_agent

    torch.set_num_threads(s["threads"])
    keys = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")
    transitions = Transitions(*(data[k] for k in keys))
    out = {}
    for algo in s["algos"]:
        rows = []
        for seed in range(s["seeds"]):
            start = time.perf_counter()
            agent = train_agent(algo, transitions, embody_overrides(algo, s, seed))
            elapsed = time.perf_counter() - start
            steps = s["dt"]["steps"] if algo == "dt" else s["steps"]
            rows.append({"seed": seed, "steps_per_s": steps / elapsed})
            if s.get("evaluate", True):
                agent.reset()
                rows[-1]["return"] = float(pointmass.evaluate(agent.act, agent.reward).mean())
            print(f"embody {algo} seed {seed}: {rows[-1]}", file=sys.stderr, flush=True)
        out[algo] = rows
    return out


def peer_python(given: str | None) -> Path:
    """The d3rlpy environment's interpreter: ``given``, or ``build/peers/d3rlpy`` (created with d3rlpy and a CPU
    torch from the package registry when absent)."""
    if given:
        return Path(given)
    python = PEER_VENV / "bin" / "python"
    if not python.exists():
        print(f"embody bench offline: creating {PEER_VENV} with d3rlpy {PEER_VERSION} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        import torch  # the same torch release as ours (the registry's CPU build)

        subprocess.run([*pip, f"d3rlpy=={PEER_VERSION}", f"torch=={torch.__version__.split('+')[0]}"], check=True)
    return python


def run_peer(python: Path, data_path: Path, s: dict, work: Path) -> dict:
    """Run the d3rlpy script in its environment; its per-algo rows and version."""
    (work / "settings.json").write_text(json.dumps(s))
    script = Path(__file__).parent / "peers" / "d3rlpy_offline.py"
    cmd = [str(python), str(script), str(data_path), str(work / "settings.json"), str(work / "peer.json")]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return json.loads((work / "peer.json").read_text())


def compare(ours: dict, peer: dict) -> list[dict]:
    """One row per algo: each side's mean return with its 95 % interval, whether they overlap, the speed ratio."""
    from embody.stats import bootstrap_ci

    rows = []
    for algo, our_rows in ours.items():
        a = np.array([r["return"] for r in our_rows])
        b = np.array([r["return"] for r in peer[algo]])
        ca, cb = bootstrap_ci(a), bootstrap_ci(b)
        speed = (np.mean([r["steps_per_s"] for r in our_rows]), np.mean([r["steps_per_s"] for r in peer[algo]]))
        rows.append(
            {
                "algo": algo,
                "embody_return": float(a.mean()),
                "embody_ci": ca,
                "d3rlpy_return": float(b.mean()),
                "d3rlpy_ci": cb,
                "agree": bool(ca[0] <= cb[1] and cb[0] <= ca[1]),
                "embody_steps_per_s": float(speed[0]),
                "d3rlpy_steps_per_s": float(speed[1]),
                "speed_ratio": float(speed[0] / speed[1]),
            }
        )
    return rows


def plot(rows: list[dict], good: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(rows))
    for dx, side in ((-0.15, "embody"), (0.15, "d3rlpy")):
        mean = np.array([r[f"{side}_return"] for r in rows])
        ci = np.array([r[f"{side}_ci"] for r in rows])
        ax.errorbar(x + dx, mean, yerr=[mean - ci[:, 0], ci[:, 1] - mean], fmt="o", capsize=4, label=side)
    ax.axhline(good, color="gray", ls="--", lw=1, label="good behavior policy")
    ax.set_xticks(x, [r["algo"] for r in rows])
    ax.set_ylabel("return (95 % CI over seeds)")
    ax.set_title("point-mass, mixed-quality data: embody vs d3rlpy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    """Measure both sides, print the table; ``--out DIR`` writes results.json and returns.png. Returns 0."""
    from embody.benchmarks import save_results

    p = argparse.ArgumentParser(
        prog="embody bench offline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seeds", type=positive_int, default=5)
    p.add_argument("--steps", type=positive_int, default=5000, help="gradient steps of BC, TD3+BC, IQL and CQL")
    p.add_argument("--dt-steps", type=positive_int, default=3000, help="gradient steps of the Decision Transformer")
    p.add_argument("--episodes", type=positive_int, default=500, help="episodes of 8 steps in the dataset")
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    p.add_argument("--peer-python", help="the interpreter of an environment with d3rlpy (default: build/peers)")
    p.add_argument("--out", help="directory for results.json and returns.png")
    args = p.parse_args(argv)
    s = SETTINGS | {"algos": args.algos, "seeds": args.seeds, "steps": args.steps}
    s["dt"] = SETTINGS["dt"] | {"steps": args.dt_steps}
    data = pointmass.dataset(args.episodes, seed=0)
    with tempfile.TemporaryDirectory(prefix="embody-bench-offline-") as tmp:
        np.savez(Path(tmp, "data.npz"), **data)
        peer = run_peer(peer_python(args.peer_python), Path(tmp, "data.npz"), s, Path(tmp))
    rows = compare(run_embody(data, s), peer["algos"])
    good = float(pointmass.evaluate(pointmass.good).mean())
    result = {"settings": s, "d3rlpy": peer["d3rlpy"], "good_policy_return": good, "rows": rows}
    _print(result)
    save_results(args.out, result)
    if args.out:
        plot(rows, good, Path(args.out, "returns.png"))
    return 0


def _print(r: dict) -> None:
    s = r["settings"]
    print(
        f"\nembody bench offline: point-mass mixed-quality data, {s['seeds']} seeds, {s['steps']} steps "
        f"(DT {s['dt']['steps']}), d3rlpy {r['d3rlpy']}; the good behavior policy returns "
        f"{r['good_policy_return']:.2f}\n"
    )
    print("| agent | embody return [95 % CI] | d3rlpy return [95 % CI] | agree | steps/s embody / d3rlpy |")
    print("|---|---|---|---|---|")
    for row in r["rows"]:
        ours, peer = row["embody_ci"], row["d3rlpy_ci"]
        print(
            f"| {row['algo']} | {row['embody_return']:.2f} [{ours[0]:.2f}, {ours[1]:.2f}] | "
            f"{row['d3rlpy_return']:.2f} [{peer[0]:.2f}, {peer[1]:.2f}] | {'yes' if row['agree'] else 'NO'} | "
            f"{row['embody_steps_per_s']:.0f} / {row['d3rlpy_steps_per_s']:.0f} = {row['speed_ratio']:.1f}× |"
        )
