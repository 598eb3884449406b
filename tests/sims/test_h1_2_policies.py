"""The committed H1-2 walking policies (assets/h1_2/policies): they load against today's task and walk."""

import numpy as np
import pytest
import torch

from embody.assets import asset_path
from embody.runs import build_env, load_run, load_run_checkpoint

POLICIES = sorted(asset_path("h1_2/policies").glob("velocity-*"))


def test_the_walking_policies_are_committed():
    # three default seeds, two that deploy (a 60- and a 30-minute chain), two robust across engines
    assert len(POLICIES) == 7, POLICIES


def roll_out(run, command=None, steps=250) -> np.ndarray:
    """Base positions (2, 3) before and after ``steps`` control steps of two envs, randomization off; fails on a
    fall or an early end. The committed run's observation spec must still fit today's task."""
    cfg, _ = load_run(run)
    cfg.env["randomization"]["enabled"] = False
    env = build_env(cfg, n_envs=2, seed=0, evaluation=True)
    policy = load_run_checkpoint(run, expect=env).policy
    obs, _ = env.reset()
    if command is not None:
        env.task.set_commands(np.arange(2), np.tile(command, (2, 1)))
        obs = env.task.observe(env.sim.state())
    start = env.sim.state().privileged.base_pos.copy()
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(policy.act(torch.as_tensor(obs)).numpy())
        assert not (terminated | truncated).any()
    end = env.sim.state().privileged.base_pos.copy()
    env.close()
    return np.stack([start, end])


@pytest.mark.parametrize("run", POLICIES, ids=lambda p: p.name)
def test_a_committed_policy_walks_forward_on_command(run):
    """5 s at 0.5 m/s forward, randomization off: no fall, and forward progress. The bar is 0.5 m of the 2.5 m
    asked, a regression guard, not the tracking target (that is `embody bench learning`'s; issue 19's note)."""
    start, end = roll_out(run, command=[0.5, 0.0, 0.0])
    covered = end[:, 0] - start[:, 0]
    assert (covered > 0.5).all(), covered


def test_the_committed_stand_policy_stays_up_on_the_spot():
    """5 s of clips, randomization off: no fall, and within 0.5 m of where it started (it steps in place)."""
    start, end = roll_out(asset_path("h1_2/policies/stand"))
    assert np.linalg.norm(end[:, :2] - start[:, :2], axis=1).max() < 0.5
