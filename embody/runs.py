"""Run directories written by ``embody train``: config, metrics, plots, checkpoint, video.

    RUN/config.yaml          the resolved TrainConfig
    RUN/metrics.jsonl        one JSON object per PPO iteration (metrics.csv: the same as CSV)
    RUN/learning_curve.png   episode return vs. env steps and wall-clock time
    RUN/checkpoint/          the policy (safetensors + JSON, see embody.policies.checkpoint)
    RUN/eval.json            deterministic evaluation of the final policy
    RUN/eval.mp4             one evaluation episode
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path


class MetricsLog:
    """Append-only metrics: JSONL as the record, CSV for spreadsheets."""

    def __init__(self, run: Path):
        self.jsonl, self.csv = run / "metrics.jsonl", run / "metrics.csv"

    def append(self, row: dict) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(clean) + "\n")
        new = not self.csv.exists()
        with open(self.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(clean))
            if new:
                w.writeheader()
            w.writerow(clean)

    def rows(self) -> list[dict]:
        if not self.jsonl.exists():
            return []
        return [json.loads(line) for line in self.jsonl.read_text().splitlines() if line.strip()]


def plot_learning_curve(run: Path, rows: list[dict], max_return: float | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("episode_return") is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, key, label in ((axes[0], "env_steps", "env steps"), (axes[1], "time_s", "wall-clock [s]")):
        ax.plot([r[key] for r in rows], [r["episode_return"] for r in rows], lw=1.5)
        if max_return:
            ax.axhline(max_return, color="gray", ls="--", lw=1, label="max return")
            ax.axhline(0.7 * max_return, color="gray", ls=":", lw=1, label="70% of max")
            ax.legend(loc="lower right")
        ax.set_xlabel(label)
        ax.set_ylabel("episode return (training, last 100)")
        ax.grid(alpha=0.3)
    fig.suptitle(run.name)
    fig.tight_layout()
    out = run / "learning_curve.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
