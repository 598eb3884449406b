"""report.md (tables) and PNG plots (driving score vs counterfactual-data size and vs K) from results.json."""

from __future__ import annotations

from pathlib import Path

from embody.files import write_atomic
from embody.stats import ci_cell

from .config import SETTINGS
from .evaluate import EXPERT
from .policy import AGENTS


def write_report(result: dict, out: Path) -> Path:
    """Write out/report.md and the plots; returns the report's path."""
    out = Path(out)
    ev, tr, cfg = result["eval"], result["train"], result["config"]
    seeds = f"seeds {', '.join(map(str, cfg['seeds']))} pooled" if "seeds" in cfg else f"seed {cfg['seed']}"
    lines = [
        f"# MPA on highway-env — scale `{cfg['scale']}`, {seeds}",
        "",
        f"Command: `{result['command']}` — total {result['time_s']:.0f} s "
        f"(training {tr.get('time_s', 0):.0f} s, evaluation {ev['time_s']:.0f} s).",
        "",
        "Driving score per episode = 1[no collision] · 1[never off road] · min(1, progress / "
        "(cruise target speed × allotted time)); means with 95 % percentile-bootstrap intervals over "
        f"{cfg['eval']['episodes'] * len(cfg.get('seeds', [0]))} fixed-seed episodes per scenario. Fast "
        "simulator settings (≤12 vehicles, 5 Hz integration, no traffic–traffic collisions).",
        "",
        "## Closed loop, by setting",
        "",
        "| setting | agent | driving score | collision rate | progress [m] |",
        "|---|---|---|---|---|",
    ]
    for setting, scenarios in SETTINGS.items():
        for agent in (EXPERT, *AGENTS):
            s = ev["settings"].get(agent, {}).get(setting)
            if s:
                lines.append(
                    f"| {setting} ({', '.join(scenarios)}) | {agent} | {ci_cell(s, 'score')} | "
                    f"{ci_cell(s, 'collision')} | {ci_cell(s, 'progress_m', '.0f')} |"
                )
    base, expert = (ev["settings"].get(a, {}).get("in-domain") for a in ("base", EXPERT))
    if base and expert and expert["score"] > 0:
        lines += [
            "",
            f"Base agent ({cfg['data'].get('perception', 'kinematic')} perception) in-domain: "
            f"{base['score'] / expert['score']:.2f}× the expert's driving score.",
        ]
    lines += [
        "",
        "## By scenario",
        "",
        "| scenario | agent | score | collision | progress [m] | episodes |",
        "|---|---|---|---|---|---|",
    ]
    for agent, per in ev["scenarios"].items():
        for scenario, s in per.items():
            lines.append(
                f"| {scenario} | {agent} | {s['score']:.2f} | {s['collision']:.2f} | "
                f"{s['progress_m']:.0f} | {s['episodes']} |"
            )
    lines += [
        "",
        f"## Sweeps (base+adapter+Q on {', '.join(ev['sweep_scenarios'])})",
        "",
        "![score vs data](score_vs_data.png) ![score vs K](score_vs_k.png)",
        "",
        "| counterfactual branch points | on adapter proposals | plans | score | collision |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['branch_points']:g} | {r.get('proposal_points', 0):g} | {r['plans']:g} | {ci_cell(r, 'score')} | "
        f"{r['collision']:.2f} |"
        for r in ev["sweep_data_size"]
    ]
    lines += ["", "| K | score | collision |", "|---|---|---|"]
    lines += [f"| {r['k']} | {ci_cell(r, 'score')} | {r['collision']:.2f} |" for r in ev["sweep_k"]]
    cf, prop = tr.get("counterfactual", {}), tr.get("proposals")
    dagger = "; ".join(
        f"round {i + 1}: collided in {r['collisions']}/{r['episodes']}, +{r['labels']} labels"
        for i, r in enumerate(tr.get("dagger", []))
    )
    lines += [
        "",
        "## Training" + (f" (seed {cfg['seed']}; each seed's in seed<S>/report.md)" if "seeds" in cfg else ""),
        "",
        f"- expert samples: {tr['expert']['samples']}; DAgger ({dagger or 'none'}); "
        f"base BC val R² {tr['bc']['val_r2']:.3f}",
        f"- counterfactual: {cf.get('branch_points')} branch points, {cf.get('plans')} plans, mean return "
        f"{cf.get('mean_return', 0):.1f}, base plan best at {cf.get('base_is_best_fraction', 0):.0%} of points",
        *[
            f"- on the adapter's proposals (Q data), round {i + 1} driven by {r['driver']}: {r['branch_points']} "
            f"branch points, mean return {r['mean_return']:.1f}, base plan best at {r['base_is_best_fraction']:.0%}"
            for i, r in enumerate(prop or [])
        ],
        f"- adapter (diffusion on residuals) val loss {tr['adapter']['val_loss']:.3f}; "
        f"Q (advantage over the base plan; {_q_kind(cfg['q'], cfg['agent'])}{', retrained' if tr['q'].get('retrained') else ''}) "
        f"val RMSE {tr['q']['val_rmse']:.1f}, Spearman {tr['q']['val_spearman']:.3f}",
        "",
    ]
    path = write_atomic(out / "report.md", "\n".join(lines))
    _plots(ev, out)
    return path


def _q_kind(q: dict, agent: dict) -> str:
    members = q.get("members", 1)
    return "one MLP" if members == 1 else f"{members}-member ensemble, score = mean − {agent['q_pessimism']:g} × std"


def _plots(ev: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, rows, key, xlabel in (
        ("score_vs_data.png", ev["sweep_data_size"], "branch_points", "counterfactual branch points"),
        ("score_vs_k.png", ev["sweep_k"], "k", "K (adapter candidates)"),
    ):
        x = [r[key] for r in rows]
        y = [r["score"] for r in rows]
        lo = [r["score"] - r["score_ci"][0] for r in rows]
        hi = [r["score_ci"][1] - r["score"] for r in rows]
        fig, ax = plt.subplots(figsize=(4.5, 3.2), dpi=120)
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label="base+adapter+Q")
        base = _pooled_base(ev)
        if base is not None:
            ax.axhline(base, color="gray", ls="--", label="base")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("driving score")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
        ax.set_title(f"on {', '.join(ev['sweep_scenarios'])}", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / name)
        plt.close(fig)


def _pooled_base(ev: dict) -> float | None:
    eps = [e for s in ev["sweep_scenarios"] for e in ev["episodes"].get("base", {}).get(s, [])]
    return sum(e["score"] for e in eps) / len(eps) if eps else None
