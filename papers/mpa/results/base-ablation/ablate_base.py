"""The base-agent ablation of results/base-ablation: is the base policy competent before MPA adapts it?

    python papers/mpa/results/base-ablation/ablate_base.py cell PERCEPTION SEED DAGGER OUT   # one cell
    python papers/mpa/results/base-ablation/ablate_base.py pool OUT CELL_DIR...             # table + plot

A cell trains the paper scale's base policy (``train.train_base``: expert BC, then DAGGER rounds) with
``data.perception`` = PERCEPTION and evaluates it and the IDM/MOBIL expert closed loop on 10 episodes of
highway, cut-in, hard-brake and highway-dense (``evaluate.evaluate_agents``, the study's seeds).
``pool`` pools each recipe's cells (by episode) into results.json, base_vs_expert.png and a table.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

SCENARIOS = ("highway", "cut-in", "hard-brake", "highway-dense")


def cell(perception: str, seed: int, dagger: int, out: Path) -> None:
    from embody.papers.mpa.config import for_scale
    from embody.papers.mpa.evaluate import EXPERT, evaluate_agents
    from embody.papers.mpa.policy import Models
    from embody.papers.mpa.train import train_base
    from embody.policies.trajectory import save_model

    cfg = for_scale("paper", seed)
    cfg.data = replace(cfg.data, perception=perception, dagger_iterations=dagger)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    bc, info = train_base(cfg, out)
    info["train_s"] = time.perf_counter() - t0
    save_model(out / "bc", bc)
    res = evaluate_agents(Models(bc), cfg, list(SCENARIOS), agents=("base", EXPERT))
    info["recipe"] = {"perception": perception, "dagger_iterations": dagger, "seed": seed}
    info["episodes"] = {a: {s: v["episodes"] for s, v in per.items()} for a, per in res.items()}
    info["total_s"] = time.perf_counter() - t0
    (out / "base_exp.json").write_text(json.dumps(info, indent=1, default=float))


def pool(out: Path, cells: list[Path]) -> None:
    from embody.stats import bootstrap_ci

    groups: dict[str, list[dict]] = {}
    for c in cells:
        r = json.loads((c / "base_exp.json").read_text())
        key = f"{r['recipe']['perception']}, {r['recipe']['dagger_iterations']} DAgger rounds"
        groups.setdefault(key, []).append(r)
    rng, rows = np.random.default_rng(0), {}
    for key, runs in groups.items():
        row = {"seeds": sorted(r["recipe"]["seed"] for r in runs), "train_s": [round(r["train_s"]) for r in runs]}
        for scen in SCENARIOS:
            for agent in ("base", "expert"):
                eps = [e for r in runs for e in r["episodes"][agent][scen]]
                scores = [e["score"] for e in eps]
                row[f"{scen}/{agent}"] = {
                    "score": float(np.mean(scores)),
                    "score_ci": bootstrap_ci(scores, 1000),
                    "collision": float(np.mean([bool(e["collision"]) for e in eps])),
                    "episodes": len(eps),
                }
        base = np.array([e["score"] for r in runs for e in r["episodes"]["base"]["highway"]])
        expert = np.array([e["score"] for r in runs for e in r["episodes"]["expert"]["highway"]])
        idx = rng.integers(0, len(base), (2000, len(base)))  # paired: the same traffic seeds
        ratios = base[idx].mean(1) / expert[idx].mean(1)
        row["in_domain_ratio"] = float(base.mean() / expert.mean())
        row["in_domain_ratio_ci"] = [float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))]
        rows[key] = row
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    _plot(rows, out / "base_vs_expert.png")
    for key, row in rows.items():
        cells_txt = " | ".join(
            f"{row[f'{s}/base']['score']:.2f} / {row[f'{s}/base']['collision']:.2f}" for s in SCENARIOS
        )
        lo, hi = row["in_domain_ratio_ci"]
        print(f"| {key} | {row['seeds']} | **{row['in_domain_ratio']:.2f}** [{lo:.2f}, {hi:.2f}] | {cells_txt} |")


def _plot(rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    width = 0.8 / (len(rows) + 1)
    for i, (key, row) in enumerate([("expert", None), *rows.items()]):
        src = next(iter(rows.values())) if row is None else row
        agent = "expert" if row is None else "base"
        y = [src[f"{s}/{agent}"]["score"] for s in SCENARIOS]
        err = [
            [v - src[f"{s}/{agent}"]["score_ci"][0] for s, v in zip(SCENARIOS, y)],
            [src[f"{s}/{agent}"]["score_ci"][1] - v for s, v in zip(SCENARIOS, y)],
        ]
        ax.bar(np.arange(len(SCENARIOS)) + i * width, y, width, yerr=err, capsize=2, label=key)
    ax.set_xticks(np.arange(len(SCENARIOS)) + width * len(rows) / 2, SCENARIOS)
    ax.set_ylabel("driving score")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    if sys.argv[1] == "cell":
        cell(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    else:
        pool(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
