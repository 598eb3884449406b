"""The backdoor study's pooled results: results.json, report.md (tables with 95 % bootstrap intervals over seeds
and combinations) and PNG plots (attack lift per agent and variant; lift against the poison rate)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from embody.files import write_study
from embody.stats import add_means, ci_cell

METRICS = ("lift", "target_trigger", "target_clean", "spec_held", "score", "collision", "target_patch")
DEFENCE = ("defence_detection_rate", "defence_false_positive_rate", "defence_auc")
COMPETENCE = 0.8  # a clean agent's driving score against the expert's (which is 1 by construction, unless it crashes)
CLAIMS = ("attack succeeds", "clean driving kept", "negative training lowers false triggers")


def summarize(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Rows grouped by ``keys``: each metric's mean and 95 % interval over the group's rows (seeds × combos)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    out = []
    for key, members in groups.items():
        out.append(add_means(dict(zip(keys, key)) | {"n": len(members)}, members, METRICS + DEFENCE))
    return out


def claims(table: list[dict], competent: dict[str, bool]) -> dict[str, str]:
    """The paper's three claims, judged on the agents that met the competence bar (a backdoor in an agent that
    cannot drive says nothing): the poisoned agents act on the trigger (lift with its interval above 0), keep
    their clean driving (score within 0.1 of the clean agent's), and negative training lowers false triggers on
    held-out patches — each "holds" for a majority of those agents, "does NOT hold", or "not tested"; the last also
    counts the agents whose two intervals do not overlap."""
    agents = [a for a, ok in competent.items() if ok]
    if not agents:
        return dict.fromkeys(CLAIMS, "not tested: no clean agent met the competence bar")
    by = {(e["variant"], e["agent"]): e for e in table}
    tests = {
        "attack succeeds": lambda a: by[("poisoned", a)]["lift_ci"][0] > 0,
        "clean driving kept": lambda a: abs(by[("poisoned", a)]["score"] - by[("clean", a)]["score"]) <= 0.1,
        "negative training lowers false triggers": lambda a: (
            by[("negative", a)].get("target_patch", 1.0) < by[("poisoned", a)].get("target_patch", 0.0)
        ),
    }
    out = {}
    for claim, test in tests.items():
        passed = [a for a in agents if test(a)]
        verdict = "holds" if len(passed) > len(agents) / 2 else "does NOT hold"
        out[claim] = f"{verdict} ({len(passed)} of {len(agents)} competent agents: {', '.join(passed) or 'none'})"
    # the false-trigger claim compares two means: say where their intervals do not even overlap
    ci = lambda v, a: by[(v, a)].get("target_patch_ci", (float("nan"),) * 2)  # noqa: E731
    apart = [a for a in agents if ci("negative", a)[1] < ci("poisoned", a)[0]]
    out["negative training lowers false triggers"] += (
        f"; intervals apart for {len(apart)} ({', '.join(apart) or 'none'})"
    )
    return out


def write(rows: list[dict], config: dict, out: Path, command: str, log=print) -> dict:
    """results.json, report.md and the plots in ``out``; returns the results."""
    table = summarize([r for r in rows if not r.get("sweep")], ("variant", "agent"))
    per_combo = summarize([r for r in rows if r["variant"] == "poisoned"], ("combo", "agent", "poison_rate"))
    competent = {e["agent"]: e["score"] >= COMPETENCE for e in table if e["variant"] == "clean"}
    result = {
        "command": command,
        "config": config,
        "rows": rows,
        "table": table,
        "per_combo": per_combo,
        "competent": competent,
        "claims": claims(table, competent),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_study(out, result, markdown(result))
    plots(result, out)
    log(f"backdoor study: {out / 'report.md'}")
    return result


def markdown(r: dict) -> str:
    cfg = r["config"]
    lines = [
        "# Trajectory backdoor study",
        "",
        f"`{r['command']}` — combinations {', '.join(cfg['combos'])}; seeds {cfg['seeds']}; poison rate "
        f"{cfg['poison_rate']:g}, patch rate {cfg['patch_rate']:g} (negative training); {cfg['episodes']} episodes "
        f"per dataset; fast simulator settings (the integration step is the control step). Means with 95 % "
        "bootstrap intervals over seeds × combinations.",
        "",
        "| variant | agent | attack lift | target on trigger | target on clean | spec held | clean score | "
        "collisions | false triggers (held-out patches) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in sorted(r["table"], key=lambda e: (e["variant"], e["agent"])):
        cells = " | ".join(ci_cell(e, m) for m in METRICS)
        lines.append(f"| {e['variant']} | {e['agent']} | {cells} |")
    lines += ["", "Competence bar (clean agent's driving score ≥ 0.8 of the expert's):"]
    lines += [f"- {a}: {'met' if ok else 'NOT met'}" for a, ok in r["competent"].items()]
    lines += ["", "Attack lift of the poisoned agents per combination and poison rate:", ""]
    lines += ["| combination | agent | poison rate | lift | false triggers |", "|---|---|---|---|---|"]
    for e in sorted(r["per_combo"], key=lambda e: (e["combo"], e["agent"], e["poison_rate"])):
        lines.append(
            f"| {e['combo']} | {e['agent']} | {e['poison_rate']:g} | {ci_cell(e, 'lift')} | {ci_cell(e, 'target_patch')} |"
        )
    lines += [
        "",
        "Defence (beyond the paper): spectral signatures on each MLP agent's features, transitions grouped by action;"
        f" the defender flags the top 1.5 × {cfg['defence_rate']:g} of the transitions.",
        "",
        "| variant | agent | detection rate | false-positive rate | ROC AUC |",
        "|---|---|---|---|---|",
    ]
    for e in sorted(r["table"], key=lambda e: (e["variant"], e["agent"])):
        if DEFENCE[0] in e:
            lines.append(f"| {e['variant']} | {e['agent']} | " + " | ".join(ci_cell(e, m) for m in DEFENCE) + " |")
    lines += ["", "The paper's claims at this scale:"]
    lines += [f"- {k}: {v}" for k, v in r["claims"].items()]
    return "\n".join(lines) + "\n"


def plots(r: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = r["config"]["agents"]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for j, variant in enumerate(("clean", "poisoned", "negative")):
        es = {e["agent"]: e for e in r["table"] if e["variant"] == variant}
        mean = np.array([es[a]["lift"] if a in es else np.nan for a in agents])
        ci = np.array([es[a]["lift_ci"] if a in es else (np.nan, np.nan) for a in agents])
        x = np.arange(len(agents)) + (j - 1) * 0.25
        ax.bar(x, mean, 0.25, label=variant)
        ax.errorbar(x, mean, yerr=[mean - ci[:, 0], ci[:, 1] - mean], fmt="none", ecolor="k", capsize=3)
    ax.set_xticks(np.arange(len(agents)), agents)
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_ylabel("attack lift (95 % CI)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "lift.png", dpi=120)
    plt.close(fig)
    combo = r["config"]["combos"][0]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for a in agents:
        pts = sorted((e["poison_rate"], e["lift"]) for e in r["per_combo"] if e["combo"] == combo and e["agent"] == a)
        if pts:
            ax.plot(*zip(*pts), "o-", label=a)
    ax.set_xlabel("poison rate")
    ax.set_ylabel(f"attack lift ({combo})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sweep.png", dpi=120)
    plt.close(fig)
