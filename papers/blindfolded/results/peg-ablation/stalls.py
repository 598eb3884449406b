"""Why blind students fail on their training holes: they stall where friction holds the peg.

    python papers/blindfolded/results/peg-ablation/stalls.py DEMOS SEED [--set KEY=VALUE ...]

Trains the paper scale's blind student at m = 16 on DEMOS (a study's ``demos/blind_seed<SEED>.npz``; overrides as
``embody blindfolded study --set``), then plays it alone (β = 0) on its 16 training holes twice while a blind
expert labels every visited state. Per failed episode: the steps stalled on the board (the tip moved < 0.05 mm a
step for 20 steps, on the face, not inside) and, over them, the mean |x, y| of the student's own action (read back
from the next observation's previous-action columns) against the expert's label.
"""

from __future__ import annotations

import sys

import numpy as np
import torch


def main(demos_path: str, seed: int, overrides: list[str]) -> None:
    from embody.config import apply_overrides
    from embody.papers.blindfolded import config as bcfg
    from embody.papers.blindfolded import demos as demo_io
    from embody.papers.blindfolded import study
    from embody.papers.blindfolded.peg import hole_of, make_env, make_expert, run_episodes
    from embody.sims.tasks.peg_insert import LAST, TIP

    torch.set_num_threads(1)
    cfg = apply_overrides(bcfg.for_scale("paper", seed, "peg"), texts=["m_values=[16]", *overrides])
    domain = study.get_domain(cfg)
    demos = demo_io.load(demos_path, domain.obs_spec)
    policy, _ = study.train_on(cfg, domain, study.first_tasks(demos, 16), seed)
    holes = hole_of(cfg.train_tasks(seed, 16) * 2)
    env = make_env(16, seed=seed * 7 + 1, config=domain.task_config())
    teacher = make_expert("blind", domain.task_config(), seed=99)
    ep = run_episodes(env, policy, holes, privileged=False, record=True, teacher=teacher, beta=0.0)
    env.close()
    print(f"alone: success {ep.success.mean():.2f} of {len(holes)}")
    starts = np.flatnonzero(ep.starts)
    for e, (a, b) in enumerate(zip(starts, np.r_[starts[1:], len(ep.obs)])):
        if ep.success[e]:
            continue
        obs, label = ep.obs[a:b], ep.actions[a:b]
        own = obs[1:, LAST]  # the student's action at row t is row t + 1's previous action
        tip = obs[:-1, TIP] * 1000
        slow = np.linalg.norm(np.diff(obs[:, TIP][:, :2] * 1000, axis=0), axis=1) < 0.05
        stalled = (np.convolve(slow, np.ones(20), "same") >= 20) & (tip[:, 2] < 0.15) & (tip[:, 2] > -0.3)
        if stalled.any():
            student, teacher_xy = np.abs(own[stalled, :2]).mean(), np.abs(label[:-1][stalled, :2]).mean()
            print(
                f"episode {e}: stalled {stalled.sum()} of {b - a} steps; |action x,y| {student:.3f}, label {teacher_xy:.3f}"
            )
        else:
            print(f"episode {e}: no stall ({b - a} steps)")


if __name__ == "__main__":
    args = sys.argv[1:]
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    main(args[0], int(args[1]), sets)
