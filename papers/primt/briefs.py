"""What a judge is told about a task: one sentence, named observation channels, and the goals over them.

A goal is ``maximize`` or ``minimize`` of an expression: a channel name, ``abs(NAME)``, or ``distance(A, B)`` for
two channel groups named ``A_x, A_y, A_z`` and ``B_x, B_y, B_z``. The same lines go into every prompt, so a real
model and the information-limited stand-in read the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from embody.config import ConfigError

from .frames import Scene

_XYZ = ("x", "y", "z")


@dataclass(frozen=True)
class Brief:
    """A task's description for judges: ``channels`` maps a name to its observation column."""

    task: str
    text: str
    channels: dict[str, int]
    goals: tuple[tuple[str, str], ...]  # (maximize | minimize, expression)
    scene: Scene | None = None  # how the visual judge draws it (None: no visual judge)
    pose: Callable[[np.ndarray, Any], np.ndarray] | None = None  # (obs (m, o), the task) → joint positions (m, j)
    visual_goals: tuple[tuple[str, str], ...] = ()  # over colour blobs: above(A, B), distance(A, B)

    def series(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """The named channels of observations (..., o) as {name: (...)}."""
        return {name: obs[..., col] for name, col in self.channels.items()}


def _xyz(prefix: str, start: int) -> dict[str, int]:
    return {f"{prefix}_{a}": start + i for i, a in enumerate(_XYZ)}


BRIEFS = {
    "cartpole-swingup": Brief(
        "cartpole-swingup",
        "A cart on a rail swings a pole from hanging down to upright and balances it there, the cart near the "
        "rail's centre and the pole still once up. pole_cos is 1 when the pole is upright and -1 when it hangs "
        "down; getting it up matters most.",
        {"cart_x": 0, "pole_cos": 1, "pole_sin": 2, "cart_vel": 3, "pole_angvel": 4},
        # pole_cos alone: with the cart's offset and the pole's speed as goals too, the stand-in preferred a pole
        # hanging still to one swinging up (labels agreed with the true reward 37 % of the time)
        (("maximize", "pole_cos"),),
        Scene(
            "cartpole",
            {"cart": ("red", (0.9, 0.1, 0.1)), "pole": ("blue", (0.1, 0.2, 0.9))},
            camera={"lookat_z": 1.0, "distance": 5.0, "azimuth": 90.0, "elevation": 0.0},
        ),
        lambda obs, task: np.stack([obs[:, 0], np.arctan2(obs[:, 2], obs[:, 1])], axis=1),
        (("maximize", "above(blue, red)"),),
    ),
    "arm-reach": Brief(
        "arm-reach",
        "A 7-joint arm brings the tip of the peg it holds to a target point and holds it there (positions in m).",
        {**_xyz("tip", 14), **_xyz("target", 27)},
        (("minimize", "distance(tip, target)"),),
        Scene(
            "peg_arm",
            {"peg": ("orange", (1.0, 0.5, 0.0))},
            marker_cols=(27, 28, 29),
            marker=("green", (0.1, 0.9, 0.1), 0.02),
            camera={"lookat_x": 0.45, "lookat_z": 0.25, "distance": 1.4, "azimuth": 90.0, "elevation": -15.0},
        ),
        lambda obs, task: task.home + obs[:, :7],
        (("minimize", "distance(orange, green)"),),
    ),
    # PRIMT's two locomotion tasks, the DeepMind Control Suite's through Shimmy (extra dmc); no scene: text judges
    # only. Columns: the dict observation laid out in key order (sims/gymnasium_env.py).
    "gym:dm_control/hopper-stand-v0": Brief(
        "gym:dm_control/hopper-stand-v0",
        "A planar one-legged hopper gets up from the floor and stands with its torso high and still. torso_z is the "
        "torso's height offset (m), torso_pitch its tilt (rad); standing tall matters most.",
        {"torso_z": 0, "torso_pitch": 1, "forward_speed": 8},
        (("maximize", "torso_z"),),
    ),
    "gym:dm_control/walker-walk-v0": Brief(
        "gym:dm_control/walker-walk-v0",
        "A planar two-legged walker stands up and walks forward at 1 m/s or more with its torso above 1.2 m. "
        "torso_height is in m, forward_speed in m/s.",
        {"torso_height": 0, "torso_z_speed": 15, "forward_speed": 16},
        (("maximize", "torso_height"), ("maximize", "forward_speed")),
    ),
}


def brief_for(task: str) -> Brief:
    if task not in BRIEFS:
        raise ConfigError(f"primt: no judge brief for task {task!r}; briefs exist for {', '.join(sorted(BRIEFS))}")
    return BRIEFS[task]


def evaluate(expression: str, series: dict[str, np.ndarray]) -> np.ndarray:
    """A goal expression over named series (each (...,)); unknown names or forms raise ``ValueError``."""
    if m := re.fullmatch(r"abs\((\w+)\)", expression):
        return np.abs(series[m[1]])
    if m := re.fullmatch(r"distance\((\w+),\s*(\w+)\)", expression):
        a, b = (np.stack([series[f"{p}_{x}"] for x in _XYZ], -1) for p in (m[1], m[2]))
        return np.linalg.norm(a - b, axis=-1)
    if re.fullmatch(r"\w+", expression) and expression in series:
        return series[expression]
    raise ValueError(f"cannot evaluate goal expression {expression!r} over channels {sorted(series)}")
