"""``embody almi export-dataset RUN --clips DIR --commands N --out DIR``: an ALMI-X style whole-body dataset.

The whole-body policy is rolled out over every clip × the first N velocity-command templates (one episode each,
the clip looping and the command held, no randomization or pushes) into a LeRobot-layout dataset through
``embody record``: joint positions and velocities, actions, PD targets, base pose, IMU, simulator state, a camera
video, and a language task per episode from the command and the clip ("walk forward slowly while waving the left
hand"). ``embody replay`` and the real LeRobot read it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from embody.config import ConfigError
from embody.robots.motion import MotionError, load_library

from .evaluate import load_whole_body_run

# vx, vy, yaw rate, words: ALMI-X's templates, in the order they are used (``--commands N``: the first N)
COMMANDS = (
    (0.0, 0.0, 0.0, "stand still"),
    (0.3, 0.0, 0.0, "walk forward slowly"),
    (0.7, 0.0, 0.0, "walk forward fast"),
    (-0.3, 0.0, 0.0, "walk backward"),
    (0.0, 0.3, 0.0, "step to the left"),
    (0.0, -0.3, 0.0, "step to the right"),
    (0.0, 0.0, 0.5, "turn left in place"),
    (0.0, 0.0, -0.5, "turn right in place"),
    (0.3, 0.0, 0.3, "walk forward turning left"),
    (0.3, 0.0, -0.3, "walk forward turning right"),
)
MOTION_WORDS = {
    "wave left": "waving the left hand",
    "wave right": "waving the right hand",
    "reach left": "reaching forward with the left arm",
    "reach right": "reaching forward with the right arm",
    "arm swing": "swinging both arms",
    "waist twist": "twisting the waist",
    "boxing": "boxing",
    "overhead reach": "reaching overhead with both arms",
    "wave both arms": "waving both hands",
    "carry": "holding both arms as if carrying a box",
    "point left": "pointing with the left arm",
    "point right": "pointing with the right arm",
}


def describe(command: tuple, label: str) -> str:
    """The language task of an episode: "walk forward slowly while waving the left hand"."""
    motion = label.split(",")[0].strip()
    words = MOTION_WORDS.get(motion, f"moving the upper body ({motion})" if motion else "holding the upper body still")
    return f"{command[3]} while {words}"


def export_dataset(
    run: Path, clips: Path, n_commands: int, out: Path, seconds: float = 10.0, video: bool = True
) -> dict:
    """Record every clip × the first ``n_commands`` templates from ``run`` into ``out``; returns record's summary."""
    from embody.datasets.record import RecordConfig, record

    if not 1 <= n_commands <= len(COMMANDS):
        raise ConfigError(f"--commands must be in 1..{len(COMMANDS)}, got {n_commands}")
    if not Path(clips).is_dir():
        raise MotionError(f"{clips}: clip folder is missing")
    sim = load_whole_body_run(run).env["sim"]
    library = load_library(clips)
    if not library:
        raise MotionError(f"{clips}: the clip folder holds no .safetensors clips")
    pairs = [(c, k) for c in range(len(library)) for k in range(n_commands)]
    order = itertools.cycle(pairs)  # episodes take the pairs in turn

    def setup(env, ids: np.ndarray) -> list[str]:
        texts = []
        for i in ids:
            c, k = next(order)
            env.task.pin(np.array([i]), np.array([c]))
            env.task.set_commands(np.array([i]), np.array([COMMANDS[k][:3]]))
            texts.append(describe(COMMANDS[k], library[c].label))
        return texts

    steps = max(1, round(seconds / (sim["physics_dt"] * sim["decimation"])))
    overrides = [
        f"env.motion.library={Path(clips).resolve()}",
        "env.randomization.enabled=false",
        "env.commands.resample_s=1e9",
        f"env.max_episode_steps={steps}",
    ]
    cfg = RecordConfig("almi", len(pairs), out, policy=run, n_envs=min(len(pairs), 8), video=video, setup=setup)
    cfg.overrides = overrides
    return record(cfg)
