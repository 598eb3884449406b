"""The PRIMT study's results.json, report.md and plot (return vs feedback budget per task)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np

from embody.files import write_study
from embody.stats import add_means, ci_cell

METRICS = ("return", "label_agreement", "reward_spearman", "feedback", "foresight_queries")
BAR = {"spearman": 0.8, "return": 0.8}  # the bar for the scripted teacher at 0 % error
COUNTERS = {  # the report's counter columns per kind
    "judge": ("asked", "decisive", "unsure", "unparseable", "errors"),
    "foresight": ("asked", "parsed", "fallback"),
}


def summarize(rows: list[dict]) -> list[dict]:
    """Per (task, arm, budget): each metric's mean and 95 % interval over seeds, the return as a share of the
    true-reward arm's mean on that task, and the judge's counters summed."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["task"], r["arm"], r["budget"])].append(r)
    true = {task: np.mean([r["return"] for r in g]) for (task, arm, _), g in groups.items() if arm == "true"}
    out = []
    for (task, arm, budget), members in sorted(groups.items()):
        e = add_means({"task": task, "arm": arm, "budget": budget, "n": len(members)}, members, METRICS)
        if task in true and "return" in e:
            e["of_true"] = e["return"] / true[task]
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for r in members:
            for kind, stats in (r.get("judges") or {}).items():
                for k, v in stats.items():
                    counts[kind][k] += v
        e["judges"] = {kind: dict(c) for kind, c in counts.items()}
        out.append(e)
    return out


def claims(table: list[dict]) -> list[str]:
    """The bar for the scripted teacher (without and with foresight) at each task's largest budget."""
    lines = []
    for task, arm in itertools.product(sorted({e["task"] for e in table}), ("scripted", "scripted+foresight")):
        scripted = [e for e in table if e["task"] == task and e["arm"] == arm]
        if not scripted:
            continue
        e = max(scripted, key=lambda x: x["budget"])
        rho, share = e.get("reward_spearman", float("nan")), e.get("of_true", float("nan"))
        ok = rho >= BAR["spearman"] and share >= BAR["return"]
        lines.append(
            f"{task}, {arm} teacher, {e['budget']} queries: Spearman {rho:.2f} (bar {BAR['spearman']}), return "
            f"{share:.0%} of the true-reward agent's (bar {BAR['return']:.0%}): {'MET' if ok else 'NOT MET'}"
        )
    return lines


def markdown(r: dict) -> str:
    cfg = r["config"]
    text = f"the model at {cfg['llm_url']}" if cfg["llm_url"] else "the information-limited stand-in"
    visual = f"the model at {cfg['vlm_url']}" if cfg["vlm_url"] else "the information-limited stand-in"
    lines = [
        "# PRIMT study",
        "",
        f"`{r['command']}` — tasks {', '.join(cfg['tasks'])}; seeds {cfg['seeds']}; {cfg['steps']:,} env steps per "
        f"run, {cfg['envs']} envs; text judge: {text}; visual judge: {visual} ({cfg['repeats']} askings per pair, "
        "order swapped). Means "
        "with 95 % bootstrap intervals over seeds. `of true`: the return as a share of the true-reward agent's. "
        "`labels agree`: the share of strict labels on the side of the larger true segment return. `Spearman`: "
        "the learned reward's segment returns against the true ones, on fresh segments of the final policy's "
        "experience.",
        "",
        "| task | arm | budget | return | of true | labels agree | Spearman | labels kept | judges: asked / decisive "
        "/ unsure / unparseable / errors (foresight: plans asked / parsed / fallback) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in r["table"]:
        counts = "; ".join(
            f"{kind} " + " / ".join(str(c.get(k, 0)) for k in COUNTERS.get(kind, COUNTERS["judge"]))
            for kind, c in e["judges"].items()
        )
        lines.append(
            f"| {e['task']} | {e['arm']} | {e['budget'] or '—'} | {ci_cell(e, 'return', '.1f')} | "
            f"{e.get('of_true', float('nan')):.0%} | {ci_cell(e, 'label_agreement')} | {ci_cell(e, 'reward_spearman')} | "
            f"{e.get('feedback', 0):.0f} | {counts or '—'} |"
        )
    lines += ["", "## The bar", "", *(f"- {c}" for c in r["claims"]), ""]
    return "\n".join(lines)


def plot(table: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({e["task"] for e in table})
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for arm in sorted({e["arm"] for e in table if e["task"] == task}):
            es = sorted((e for e in table if e["task"] == task and e["arm"] == arm), key=lambda e: e["budget"])
            if arm == "true":
                ax.axhline(es[0]["return"], color="k", ls="--", label="true reward")
                continue
            ax.errorbar(
                [e["budget"] for e in es],
                [e["return"] for e in es],
                yerr=np.abs(np.array([e["return_ci"] for e in es]).T - [e["return"] for e in es]),
                marker="o",
                capsize=3,
                label=arm,
            )
        ax.set(title=task, xlabel="feedback budget (queries)", ylabel="evaluation return")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(rows: list[dict], config: dict, out: Path, command: str, log=print) -> dict:
    """results.json, report.md and return_vs_budget.png in ``out``; returns the results."""
    table = summarize(rows)
    result = {"command": command, "config": config, "rows": rows, "table": table, "claims": claims(table)}
    out.mkdir(parents=True, exist_ok=True)
    write_study(out, result, markdown(result))
    plot(table, out / "return_vs_budget.png")
    log(f"primt study: {out / 'report.md'}")
    return result
