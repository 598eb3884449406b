"""``embody backdoor demo --agent RUN --trigger FILE --out DIR``: one traffic seed played twice by the same agent,
without and with the trigger's attackers, as a side-by-side video (``demo.mp4``), a plot of the trigger spec's
robustness over time with the agent's actions in both plays (``robustness.png``) and ``demo.json``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from embody.files import write_atomic


def side_by_side(left: list[np.ndarray], right: list[np.ndarray]) -> list[np.ndarray]:
    """Frames (H, W, 3) of two plays joined horizontally with a white bar between; the shorter play holds its
    last frame."""
    n = max(len(left), len(right))
    pad = lambda frames: frames + [frames[-1]] * (n - len(frames))  # noqa: E731
    bar = np.full((left[0].shape[0], 8, 3), 255, np.uint8)
    return [np.concatenate([a, bar, b], axis=1) for a, b in zip(pad(left), pad(right))]


def robustness_curve(spec, trace) -> np.ndarray:
    """The spec's robustness on each prefix of the trace (T,): where it crosses 0 the trigger has happened."""
    signals = trace.signals(spec.actors)
    n = len(next(iter(signals.values())))
    return np.array([spec.robustness({k: v[: i + 1] for k, v in signals.items()}) for i in range(n)])


def run_demo(agent_dir: Path, trigger_csv: Path, out: Path, scenario: str, seed: int, target: str | None) -> dict:
    """Play, render and plot (see the module docstring); returns demo.json's content."""
    from embody.policies.checkpoint import read_meta
    from embody.policies.offline_agents import load_agent
    from embody.video import VideoWriter

    from .dataset import load_scenes
    from .evaluate import drive, shows_target
    from .traces import empty_scene

    for path in (agent_dir, trigger_csv):
        if not path.exists():
            raise FileNotFoundError(f"{path}: not found")
    trigger = next((s for s in load_scenes(trigger_csv.parent) if s.name == trigger_csv.stem), None)
    if trigger is None:
        raise FileNotFoundError(f"{trigger_csv}: no trigger CSV with its JSON beside it")
    agent = load_agent(agent_dir)
    target = target or _dataset_target(read_meta(agent_dir).get("meta", {}))
    base = empty_scene(scenario)
    clean = drive(agent, base, seed, render=True)
    attacked = drive(agent, base.with_scripted(trigger.actors), seed, render=True)
    out.mkdir(parents=True, exist_ok=True)
    writer = VideoWriter(out / "demo.mp4", fps=round(1 / base.dt))
    for frame in side_by_side(clean.frames, attacked.frames):
        writer.write(frame)
    writer.close()
    curve = robustness_curve(trigger.spec, attacked.trace)
    start = int(np.argmax(curve >= 0)) if (curve >= 0).any() else None
    hold = round(3.0 / base.dt)
    result = {
        "agent": str(agent_dir),
        "trigger": str(trigger_csv),
        "seed": seed,
        "target": target,
        "trigger_step": start,
        "target_shown": {
            "clean": start is not None and target is not None and shows_target(clean.actions, start, hold, target),
            "trigger": start is not None and target is not None and shows_target(attacked.actions, start, hold, target),
        },
        "clean": clean.summary,
        "with_trigger": attacked.summary,
    }
    plot(curve, clean.actions, attacked.actions, base.dt, start, out / "robustness.png", trigger.spec.name)
    write_atomic(out / "demo.json", json.dumps(result, indent=2, default=float))
    return result


def _dataset_target(meta: dict) -> str | None:
    """The target behaviour of the dataset an agent was trained on (``embody backdoor train`` records it)."""
    from embody.datasets.format import load

    try:
        return load(meta["dataset"]).info["embody"]["recording"]["config"]["target"]
    except (KeyError, OSError, ValueError):
        return None


def plot(curve, clean_actions, attacked_actions, dt, start, path: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    axes[0].plot(np.arange(len(curve)) * dt, curve)
    axes[0].axhline(0, color="gray", lw=0.8)
    axes[0].set_ylabel(f"robustness\n({name})")
    for ax, k, label in ((axes[1], 0, "acceleration"), (axes[2], 1, "steering")):
        for actions, who in ((clean_actions, "clean"), (attacked_actions, "with trigger")):
            ax.plot(np.arange(1, len(actions) + 1) * dt, actions[:, k], label=who)
        ax.set_ylabel(f"{label}\n(normalized)")
    if start is not None:
        for ax in axes:
            ax.axvspan(start * dt, start * dt + 3.0, color="red", alpha=0.1)
    axes[1].legend(fontsize=8)
    axes[2].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
