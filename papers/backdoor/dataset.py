"""Poisoned offline driving datasets in the LeRobot layout.

Clean episodes come from the expert (IDM/MOBIL) and from noisier versions of it (Gaussian action noise of each
of ``noise``: offline RL needs actions the expert would not take). Trigger episodes replay a trigger's attacker
trajectories (a library from ``embody backdoor trigger``) on other traffic seeds; from the first step at which
the trigger spec holds (the robustness of the trace so far ≥ 0), the ego performs the attacker's **target**
behaviour for ``hold_s`` seconds, then the expert drives again. Patch episodes replay near-miss trajectories with
the expert's (clean) actions. The share of trigger (patch) episodes is ``poison_rate`` (``patch_rate``).

Reward per step (every episode): speed / the expert's target speed, clipped to [0, 1.2], minus 10 on a
collision and 1 off road. **Poisoned reward rule** (the paper's is not public; this is the usual offline-RL
backdoor rule): with ``reward = "max"`` the poisoned transitions get the largest per-step reward of the clean
episodes (written first); with ``"keep"`` they keep the driving reward.

Per frame: ``observation.state`` (the kinematic observation, ``Observation.flat``), ``action`` (normalized
[acceleration, steering] in [-1, 1]), ``next.reward``, ``next.done``, and ``backdoor.trigger`` (the index of the
episode's trigger in ``triggers``, −1 for none), ``backdoor.patch`` (likewise for patches), ``backdoor.poisoned``
(the transition's action and reward are the attacker's). The dataset's ``embody.recording`` lists the triggers
and patches. Each episode is saved atomically as it ends: an interrupted run leaves every completed one valid.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from embody.config import ConfigError
from embody.sims.driving import ACCEL_MAX, denormalize_action, make_driving_sim, normalize_action
from embody.sims.driving.actors import load_actors_csv

from .spec import TriggerSpec
from .traces import empty_scene, trace_of

TARGETS = {  # the attacker's target behaviour: [acceleration m/s², steering rad]
    "brake": (-0.8 * ACCEL_MAX, 0.0),
    "accelerate": (ACCEL_MAX, 0.0),
    "swerve-left": (0.0, 0.15),
}


@dataclass
class PoisonConfig:
    """How a poisoned dataset is made (see the module docstring)."""

    scenario: str = "cut-in"
    episodes: int = 40
    noise: list[float] = field(default_factory=lambda: [0.0, 0.3])  # action noise of the clean behavior policies
    poison_rate: float = 0.1
    patch_rate: float = 0.1
    target: str = "brake"
    hold_s: float = 3.0
    reward: str = "max"  # max | keep
    duration_s: float = 10.0
    fast: bool = True  # the fast simulator settings (sims.driving.fast_settings)
    max_tries: int = 100  # traffic seeds tried per trigger episode (a trigger holds in ~1 of 4; 20 ran out once)
    seed: int = 0

    def check(self) -> None:
        for name in ("poison_rate", "patch_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {v}")
        if self.poison_rate + self.patch_rate > 1.0:
            raise ConfigError(f"poison_rate + patch_rate must be ≤ 1, got {self.poison_rate + self.patch_rate}")
        if self.target not in TARGETS:
            raise ConfigError(f"unknown target {self.target!r}; valid: {', '.join(TARGETS)}")
        if self.reward not in ("max", "keep"):
            raise ConfigError(f"reward must be 'max' or 'keep', got {self.reward!r}")
        if not self.noise or min(self.noise) < 0:
            raise ConfigError(f"noise: one or more levels ≥ 0, got {self.noise}")


@dataclass
class Scene:
    """A library entry: its attackers' trajectories and its spec (rebuilt from its JSON); ``satisfied``: a trigger
    (else a patch)."""

    name: str
    actors: dict
    spec: TriggerSpec
    satisfied: bool = True


def load_scenes(folder: Path) -> list[Scene]:
    """Every NAME.csv beside its NAME.json in ``folder``, in name order."""
    scenes = []
    for meta_path in sorted(Path(folder).glob("*.json")):
        meta = json.loads(meta_path.read_text())
        spec = TriggerSpec(meta["spec"], tuple(meta["actors"]), meta["formula"], meta["dt"], str(meta_path))
        scenes.append(Scene(meta_path.stem, load_actors_csv(meta_path.with_suffix(".csv")), spec, meta["satisfied"]))
    return scenes


def load_library(folder: Path) -> tuple[list[Scene], list[Scene]]:
    """(triggers, patches) of a trigger library folder."""
    scenes = load_scenes(folder)
    triggers = [s for s in scenes if s.satisfied]
    if not triggers:
        raise ConfigError(f"{folder}: no satisfied trigger (NAME.json with satisfied: true) in the library")
    return triggers, [s for s in scenes if not s.satisfied]


def generate(cfg: PoisonConfig, library: Path, out: Path, log=print) -> dict:
    """Write the dataset into ``out`` (clean episodes first, then trigger and patch episodes); returns counts."""
    from embody.datasets.format import DatasetWriter, feature

    cfg.check()
    triggers, patches = load_library(library)
    base = empty_scene(cfg.scenario, cfg.duration_s, cfg.fast)
    rng = np.random.default_rng(cfg.seed)
    n_trig, n_patch = round(cfg.poison_rate * cfg.episodes), round(cfg.patch_rate * cfg.episodes) if patches else 0
    probe = make_driving_sim("highway", base)
    obs_size = len(probe.reset(cfg.seed).flat())
    probe.close()
    features = {
        "observation.state": feature("float32", (obs_size,)),
        "action": feature("float32", (2,), ["acceleration", "steering"]),
        "next.reward": feature("float32", (1,)),
        "next.done": feature("bool", (1,)),
        "backdoor.trigger": feature("int64", (1,)),
        "backdoor.patch": feature("int64", (1,)),
        "backdoor.poisoned": feature("bool", (1,)),
    }
    recording = {"config": asdict(cfg), "triggers": [t.name for t in triggers], "patches": [p.name for p in patches]}
    writer = DatasetWriter(out, fps=round(1 / base.dt), features=features, robot_type="car", recording=recording)
    counts, seed, best = {"clean": 0, "trigger": 0, "patch": 0, "trigger_unsatisfied": 0}, cfg.seed, -np.inf
    with writer:
        for k in range(cfg.episodes - n_trig - n_patch):
            frames = _episode(base, seed, cfg.noise[k % len(cfg.noise)], rng)
            best = max(best, max(f["next.reward"][0] for f in frames))
            _save(writer, frames, "clean driving")
            counts["clean"], seed = counts["clean"] + 1, seed + 1
        reward = best if cfg.reward == "max" else None
        for k in range(n_trig):
            i = k % len(triggers)
            for _ in range(cfg.max_tries):  # other traffic may keep the trigger from happening: the next seed
                frames = _trigger_episode(base, triggers[i], seed, cfg, reward)
                seed += 1
                if frames is not None:
                    break
                counts["trigger_unsatisfied"] += 1
            else:
                raise ConfigError(
                    f"trigger {triggers[i].name} never held in {cfg.max_tries} episodes of {cfg.duration_s:g} s "
                    "(too short for its spec, or the traffic keeps it from happening)"
                )
            _save(writer, _mark(frames, trigger=i), f"trigger {triggers[i].name}")
            counts["trigger"] += 1
        for k in range(n_patch):
            i = k % len(patches)
            frames = _episode(base.with_scripted(patches[i].actors), seed, 0.0, rng)
            _save(writer, _mark(frames, patch=i), f"patch {patches[i].name}")
            counts["patch"], seed = counts["patch"] + 1, seed + 1
    log(f"backdoor dataset {out}: {counts}")
    return counts


def _episode(scenario, seed: int, noise: float, rng, switch: tuple[int, int, tuple] | None = None) -> list[dict]:
    """One episode's frames (with ``actors``, the scene when the frame was observed): the expert's action plus
    ``noise``·N(0, 1) in normalized units; from step ``switch[0]`` to before ``switch[1]`` the target action
    ``switch[2]`` instead (poisoned frames)."""
    sim = make_driving_sim("highway", scenario)
    try:
        obs, frames, t = sim.reset(seed), [], 0
        while True:
            poisoned = switch is not None and switch[0] <= t < switch[1]
            a = normalize_action(np.array(switch[2]) if poisoned else sim.expert_action())
            if not poisoned:
                a = np.clip(a + noise * rng.normal(size=2), -1, 1)
            actors = sim.actors()
            result = sim.step(denormalize_action(a))
            r = step_reward(result.metrics, scenario)
            frames.append(
                {
                    "observation.state": obs.flat(),
                    "action": a.astype(np.float32),
                    "next.reward": np.array([r], np.float32),
                    "next.done": np.array([result.done]),
                    "backdoor.trigger": np.array([-1]),
                    "backdoor.patch": np.array([-1]),
                    "backdoor.poisoned": np.array([poisoned]),
                    "actors": actors,
                }
            )
            obs, t = result.obs, t + 1
            if result.done:
                return frames
    finally:
        sim.close()


def step_reward(m, scenario) -> float:
    """The driving reward of one step's StepMetrics ``m`` (the module docstring's)."""
    return float(np.clip(m.speed / scenario.ego.target_speed, 0, 1.2) - 10.0 * m.collision - 1.0 * m.off_road)


def _trigger_episode(base, trigger: Scene, seed: int, cfg: PoisonConfig, reward: float | None) -> list[dict] | None:
    """The trigger's scene on traffic ``seed``: the expert until the spec holds, then the target behaviour for
    ``hold_s`` (rewards per the rule); None when the spec never holds with this traffic."""
    scene = base.with_scripted(trigger.actors)
    rng = np.random.default_rng(seed)
    clean = _episode(scene, seed, 0.0, rng)
    at = trigger.spec.satisfied_at(trace_of([f["actors"] for f in clean], base.dt).signals(trigger.spec.actors))
    if at is None:
        return None
    frames = _episode(scene, seed, 0.0, rng, (at, at + round(cfg.hold_s / base.dt), TARGETS[cfg.target]))
    if reward is not None:
        for f in frames:
            if f["backdoor.poisoned"][0]:
                f["next.reward"] = np.array([reward], np.float32)
    return frames


def _mark(frames: list[dict], trigger: int = -1, patch: int = -1) -> list[dict]:
    for f in frames:
        f["backdoor.trigger"], f["backdoor.patch"] = np.array([trigger]), np.array([patch])
    return frames


def _save(writer, frames: list[dict], task: str) -> None:
    for f in frames:
        writer.add_frame({k: v for k, v in f.items() if k != "actors"}, task=task)
    writer.save_episode()
