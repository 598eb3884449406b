"""papers/blindfolded/teleop.py: several successful episodes in ONE session.

Regression: after an episode ending in a successful insertion (the peg ~2 cm deep, 1 mm clearance),
the homing move before the next episode lifted the peg out of the hole at the homing speed, in 10 mm
joint-target steps at 0.25 m/s: the peg wedged and the supervisor damped the arm within 3 ticks (wrist
force 62.9 N over ‖f₀‖ against its 60 N limit; the ~470 joint6 clamps logged before it are the torque
window's, from the first homing move down from the ready pose, no fault), so a session of ~10
demonstrations could not be recorded. At the default 0.1 m/s it reached 28 N: no margin on a loaded
machine.

As in test_blindfolded_teleop.py: `embody robot-sim peg_arm` in its own process on loopback DDS, the
peg arm's DDS driver with its default safety supervisor; only the human is scripted (it holds "down":
the start is right above the simulated board's hole, so each episode ends in the task's success test).
"""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from embody.papers.blindfolded import teleop as T  # noqa: E402
from embody.sims.tasks.peg_insert import PegInsertConfig  # noqa: E402

DOMAIN = 20 + os.getpid() % 30  # not the other loopback tests' ranges
SEED = 3
CONFIG = PegInsertConfig(start_xy_noise=0.0)  # the simulated board's hole is at the nominal place
EPISODES = 3
FAST = {"rate_hz": 25, "home_speed": 0.25, "seed": SEED}  # as the other teleop tests home


class HoldDown:
    """The simulated human: holds "down" (−z) on every read."""

    name = "scripted"

    def read(self):
        return np.array([0.0, 0.0, -1.0]), set()

    def close(self):
        pass


@pytest.mark.slow
def test_consecutive_successful_episodes_in_one_session(peg_robot_sim, tmp_path):
    """Three insertions in one session: each homing move lifts the peg out of the hole without a fault."""
    from embody.datasets import load

    driver = peg_robot_sim(T.TeleopTask(CONFIG, SEED).robot)
    out = tmp_path / "demos"
    with driver:
        summary = T.teleoperate(
            driver,
            CONFIG,
            HoldDown(),
            episodes=EPISODES,
            out=out,
            max_steps=200,
            display=T.TerminalDisplay(io.StringIO()),
            **FAST,
        )
    counters = summary["counters"]
    assert summary["fault"] is None and not summary["aborted"], summary
    assert summary["phase"] == "POLICY", summary
    assert [e["outcome"] for e in summary["episodes"]] == ["success"] * EPISODES, summary
    assert counters["faults"] == 0 and counters["wrench"] == 0 and counters["workspace"] == 0, counters
    assert counters["clamped_q"] == 0, counters  # no homing target past a joint limit
    ds = load(out)
    assert ds.num_episodes == EPISODES == summary["dataset_episodes"]
    for i in range(EPISODES):
        ep = ds.episode(i)
        assert T.OUTCOMES[int(ep["embody.teleop.outcome"][0])] == "success"
        assert ep["embody.state.ee_pos"][-1, 2] < 0.0  # ends in the hole
        assert ep["embody.state.ee_pos"][0, 2] > 0.03  # and each starts homed above it (out of the hole)
