"""report.md and PNG plots from a study's results.json."""

from __future__ import annotations

from pathlib import Path

from embody.files import write_atomic

from .study import SWEEP_THRESHOLDS, VARIANTS

LABELS = {
    "meta": "retrieved meta-domain",
    "single": "single most similar atomic",
    "union": "naive union",
    "unified": "unified (all atomics fused)",
}


def _fmt(x, spec=".2f") -> str:
    return "–" if x is None else format(x, spec)


def write_report(result: dict, out: Path) -> Path:
    """Write ``report.md`` (and its figures) from the study's results into ``out``; returns its path."""
    cfg, s, lr = result["config"], result["summary"], result["learning"]
    lines = [
        "# UniDomain on the tabletop scene",
        "",
        f"`embody plan eval --scale {cfg['scale']}` (backend {cfg['backend']}, planner {cfg['planner']}, "
        f"embedder {cfg['embedder']}, seed {cfg['seed']}, perception noise {cfg['noise']:g}, "
        f"min support {cfg['min_support']:g})",
        "",
        f"- Demonstrations: {lr['demos']} in {lr['families']} families, recorded and learned in {lr['time_s']:.0f} s; "
        f"skill failures while recording: {len(lr['skill_failures'])}.",
        f"- Issues reported while learning: {sum(a['issues'] for a in lr['atomics'].values())} "
        "(state chains that break, effects that contradict other demonstrations, ...).",
        f"- Demonstrated tasks re-solved with their own atomic domain: {lr['demos_resolved']['solved']}"
        f"/{lr['demos_resolved']['total']}.",
        f"- Unified domain: {result['unified']['operators']} operators, {result['unified']['predicates']} predicates, "
        f"{result['unified']['types']} types, {result['unified']['causal_edges']} causal edges, "
        f"{result['unified']['merges']} merges.",
    ]
    for kind, q in result["unification"].items():
        lines.append(
            f"- Unification of {kind} vs the annotators' true vocabularies: precision {q['precision']:.2f}, "
            f"recall {q['recall']:.2f} ({q['false_merges']} false merges, {q['missed_merges']} missed)."
        )
    lines += [
        "",
        "Predicate unification (precision / recall) by embedder, operator-alignment bonus and threshold:",
        "",
        "| embedder | alignment bonus | " + " | ".join(f"≥ {t:g}" for t in SWEEP_THRESHOLDS) + " |",
        "|---|---|" + "---|" * len(SWEEP_THRESHOLDS),
    ]
    for (emb, bonus), cells in _sweep_table(result["unification_sweep"]).items():
        lines.append(f"| {emb} | {bonus:g} | " + " | ".join(cells) + " |")
    n = len(result["tasks"])
    lines += [
        "",
        f"## Held-out tasks ({n}; {result['three_plus_families']} need skills from three or more families)",
        "",
        "| domain | success | optimal plans | plan length / optimal | mean time (s) |",
        "|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        r = s[v]
        lines.append(
            f"| {LABELS[v]} | {r['solved']}/{r['tasks']} ({100 * r['success']:.0f}%) | {r['optimal_plans']} | "
            f"{_fmt(r['length_ratio'])} | {r['mean_time_s']:.2f} |"
        )
    lines += [
        "",
        "Times include name resolution; the meta-domain's also includes retrieval and fusion.",
        "",
        "## Per task",
        "",
        "| task | families | optimal | " + " | ".join(VARIANTS) + " |",
        "|---|---|---|" + "---|" * len(VARIANTS),
    ]
    for r in result["tasks"]:
        cells = [f"{r[v]['length']}" if r[v]["ok"] else f"✗ {r[v]['why'][:40]}" for v in VARIANTS]
        lines.append(f"| {r['task']} | {len(r['families_needed'])} | {r['optimal']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Library size (distractor atomics renamed to pseudo-words; the first tasks above)",
        "",
        "| atomics | unified operators | library build (s) | meta: solved, s/task | unified: solved, s/task |",
        "|---|---|---|---|---|",
    ]
    for r in result["scaling"]:
        m, u = r["meta"], r["unified"]
        lines.append(
            f"| {r['atomics']} | {r['operators']} | {r['build_s']:.1f} | {m['solved']}/{m['tasks']}, "
            f"{m['mean_time_s']:.2f} | {u['solved']}/{u['tasks']}, {u['mean_time_s']:.2f} |"
        )
    if "execution" in result:
        e = result["execution"]
        lines += [
            "",
            "## Execution in the physical scene",
            "",
            f"{e['reached']}/{e['runs']} goals reached ({e['runs'] // 2} tasks, each as planned and with the "
            f"first picked block dropped: {e['drops']} drops injected), {e['replans']} re-plans; "
            f"videos in `{e['videos']}`.",
        ]
    lines += ["", "![success](success.png)", "![time](time.png)", ""]
    path = write_atomic(out / "report.md", "\n".join(lines))
    _plots(result, out)
    return path


def _sweep_table(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault((r["embedder"], r["alignment_bonus"]), []).append(f"{r['precision']:.2f} / {r['recall']:.2f}")
    return out


def _plots(result: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["summary"]
    names = [LABELS[v] for v in VARIANTS]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh(names, [100 * s[v]["success"] for v in VARIANTS], color="#4c72b0")
    ax.set_xlabel("held-out tasks solved with a valid plan (%)")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    fig.savefig(out / "success.png", dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh(names, [s[v]["mean_time_s"] for v in VARIANTS], color="#dd8452")
    ax.set_xlabel("mean time per task (s)")
    fig.tight_layout()
    fig.savefig(out / "time.png", dpi=120)
    plt.close(fig)
