"""MPA (papers/mpa): data frames, exact counterfactual branching, the Q model's preference, the CLI end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("highway_env")
pytest.importorskip("torch")

from embody.papers.mpa.config import DataConfig  # noqa: E402
from embody.papers.mpa.data import (  # noqa: E402
    branch_point,
    dagger_rollouts,
    ego_state,
    expert_plan,
    expert_rollouts,
    make_sim,
    perturb_plan,
    plan_trajectory,
    relative_plan,
)
from embody.papers.mpa.train import q_targets  # noqa: E402
from embody.sims.driving.control import TrajectoryFollower  # noqa: E402


class CruisePlanner:
    """A stand-in base policy: plans straight on at the current speed, drives by the IDM/MOBIL expert."""

    def __init__(self, sim, horizon: int):
        self.sim, self.horizon = sim, horizon

    def plan(self, obs) -> np.ndarray:
        v, k = float(obs.ego[3]), np.arange(1, self.horizon + 1)
        return np.stack(
            [v * self.sim.dt * k, np.zeros(self.horizon), np.zeros(self.horizon), np.full(self.horizon, v)], axis=1
        ).astype(np.float32)

    def act(self, obs) -> np.ndarray:
        return self.sim.expert_action()

    def reset(self) -> None:
        pass


def test_expert_data_shapes_and_frame():
    cfg = DataConfig(expert_max_steps=20, horizon=6)
    obs, plans = expert_rollouts(cfg, [3])
    assert obs.shape == (21 - 6, 6 + 7 * 8) and plans.shape == (len(obs), 6, 4)
    assert np.all(obs[:, 0] == 0.0)  # the ego's road x is hidden from the policy
    speed = obs[:, 3]
    # the plan starts at the ego: its first waypoint is one control step (0.2 s) ahead, in the lane
    assert np.allclose(plans[:, 0, 0], speed * 0.2, atol=0.6)
    assert np.all(np.abs(plans[:, 0, 1]) < 0.3)
    assert np.all(np.diff(plans[:, :, 0], axis=1) > 0)  # moving forward along the road


def test_expert_plan_is_the_expert_s_future_and_labels_dagger_states():
    cfg = DataConfig(expert_max_steps=12, horizon=5, label_every=3)
    obs, plans = expert_rollouts(cfg, [4])
    sim = make_sim(cfg.scenario)
    o = sim.reset(4)
    for _ in range(3):
        o = sim.step(sim.expert_action()).obs
    before = ego_state(sim.observe())
    assert np.allclose(expert_plan(sim, o, cfg.horizon), plans[3])  # the cloned rollout = the episode's future
    assert np.array_equal(ego_state(sim.observe()), before)  # and the sim is back where it was
    # DAgger: a policy that drives straight on is labelled with the expert's plans from where it got to
    drive = CruisePlanner(sim, cfg.horizon)
    drive.act = lambda obs: np.zeros(2)
    d_obs, d_plans, stats = dagger_rollouts(cfg, drive, [4, 5])
    assert stats == {"episodes": 2, "steps": 24, "collisions": 0}
    assert d_obs.shape == (8, obs.shape[1]) and d_plans.shape == (8, 5, 4)
    assert np.array_equal(d_obs[0], obs[0])  # the first state is the reset: the same as the expert's


def test_plan_round_trip_and_perturbation():
    ego = np.array([100.0, -4.0, 0.0, 25.0])
    future = np.stack([100 + 5.0 * np.arange(1, 5), np.full(4, -4.0), np.zeros(4), np.full(4, 25.0)], axis=1)
    plan = relative_plan(future, ego)
    traj = plan_trajectory(plan, ego, t=2.0, dt=0.2)
    assert np.allclose(traj.states()[1:], future) and np.allclose(traj.t, 2.0 + 0.2 * np.arange(5))
    p = perturb_plan(plan, dy=4.0, dv=-5.0, dt=0.2)
    assert np.isclose(p[-1, 1] - plan[-1, 1], 4.0) and np.isclose(p[-1, 3], 20.0)
    assert p[-1, 0] < plan[-1, 0]  # slower: covers less ground


def _ego_track(sim, steps: int) -> np.ndarray:
    rows = []
    for _ in range(steps):
        sim.step(sim.expert_action())
        rows.append(np.concatenate([[a.x, a.y, a.speed] for a in sim.actors()]))
    return np.array(rows)


def test_branching_restores_state_exactly():
    cfg = DataConfig(horizon=5, continue_steps=3, candidates=3)
    a, b = make_sim("highway"), make_sim("highway")
    obs = a.reset(11)
    b.reset(11)
    for _ in range(5):
        obs = a.step(a.expert_action()).obs
        b.step(b.expert_action())
    base, plans, returns = branch_point(
        a, obs, CruisePlanner(a, cfg.horizon), cfg, np.random.default_rng(0), TrajectoryFollower()
    )
    assert plans.shape == (3, 5, 4) and returns.shape == (3,) and np.array_equal(plans[0], base)
    assert np.array_equal(ego_state(a.observe()), ego_state(obs))
    assert np.array_equal(_ego_track(a, 15), _ego_track(b, 15))  # the sim continues as if never branched


def _coast_to(sim, seed: int, steps: int):
    """Reset with ``seed`` and coast ([0, 0]: no braking) ``steps`` steps; the observation then."""
    obs = sim.reset(seed)
    for _ in range(steps):
        obs = sim.step(np.zeros(2)).obs
    return obs


def test_q_prefers_braking_over_driving_into_a_braking_lead():
    from embody.papers.mpa.data import CounterfactualData, policy_obs, run_branch
    from embody.policies.value import QConfig, train_q

    cfg = DataConfig(scenario="hard-brake", horizon=10, continue_steps=5, candidates=6, speed_range=(-10.0, 2.0))
    sim = make_sim(cfg.scenario)
    planner, rng, follower = CruisePlanner(sim, cfg.horizon), np.random.default_rng(0), TrajectoryFollower()
    rows = []
    for seed in (1, 2):  # training branches: the ego coasts at 25 m/s toward the lead, which brakes at 3 s
        for steps in range(4, 16, 2):
            obs = _coast_to(sim, seed, steps)
            rows.append((policy_obs(obs), *branch_point(sim, obs, planner, cfg, rng, follower)))
    cf = CounterfactualData(*(np.array(x, dtype=np.float32) for x in zip(*rows)))
    q = train_q(*q_targets(cf), QConfig(hidden=[64, 64], epochs=200, patience=0, progress=False, val_fraction=0.0))
    # the constructed case (an unseen seed): 14 m behind the lead at 25 m/s as it brakes; keep speed vs brake
    obs = _coast_to(sim, 0, 12)
    keep = planner.plan(obs)
    brake = perturb_plan(keep, 0.0, -10.0, sim.dt)
    state, truth = sim.clone_state(), []
    for plan in (keep, brake):  # the simulator's verdict: keeping speed collides, braking does not
        sim.restore_state(state)
        truth.append(run_branch(sim, obs, plan, planner, cfg, follower))
    assert truth[0] < 0 < truth[1]
    scores = q.score(policy_obs(obs)[None], np.stack([keep, brake])[None])[0]
    assert scores[1] > scores[0]


def test_adapter_targets_and_driving_score():
    from embody.papers.mpa.data import CounterfactualData
    from embody.papers.mpa.train import adapter_targets
    from embody.sims.driving import driving_score
    from embody.stats import bootstrap_ci

    rng = np.random.default_rng(0)
    base = rng.normal(size=(2, 3, 4)).astype(np.float32)
    plans = np.stack([base, base + 1.0, base - 2.0], axis=1)  # (S=2, M=3, H=3, 4)
    cf = CounterfactualData(
        rng.normal(size=(2, 5)).astype(np.float32),
        base,
        plans,
        np.array([[5.0, 1.0, 0.0], [0.0, 9.0, 1.0]], dtype=np.float32),
    )
    cond, residual = adapter_targets(cf, top_k=1)
    assert cond.shape == (2, 5 + 12) and residual.shape == (2, 3, 4)
    assert np.allclose(residual[0], 0.0) and np.allclose(residual[1], 1.0)  # base best → zero residual
    assert q_targets(cf)[2].tolist() == [0.0, -4.0, -5.0, 0.0, 9.0, 1.0]  # advantage over the base plan
    both = cf.concat(
        CounterfactualData(cf.obs, cf.base_plan, cf.plans, cf.returns[:, ::-1].copy(), np.ones(2, dtype=np.int8))
    )
    assert np.array_equal(adapter_targets(both, top_k=1)[1], residual)  # the adapter learns the perturbation family
    assert len(q_targets(both)[2]) == 12  # the Q model learns everything
    half = both.subset(0.5)  # the first half of each source (at least 2 points)
    assert half.source.tolist() == [0, 0, 1, 1]
    assert driving_score({"collision": False, "off_road_steps": 0, "progress_m": 150.0}, 300.0) == 0.5
    assert driving_score({"collision": True, "off_road_steps": 0, "progress_m": 300.0}, 300.0) == 0.0
    assert driving_score({"collision": False, "off_road_steps": 2, "progress_m": 300.0}, 300.0) == 0.0
    lo, hi = bootstrap_ci([0.0, 1.0, 1.0, 0.0])
    assert 0.0 <= lo < 0.5 < hi <= 1.0


@pytest.mark.slow
def test_mpa_eval_tiny_end_to_end(tmp_path):
    from embody.cli import main

    out = tmp_path / "mpa"
    assert main(["mpa", "eval", "--scale", "tiny", "--out", str(out)]) == 0
    for name in ("report.md", "results.json", "score_vs_data.png", "score_vs_k.png"):
        assert (out / name).stat().st_size > 0, name
    result = json.loads((out / "results.json").read_text())
    ev = result["eval"]
    assert set(ev["settings"]) == {"expert", "base", "base+adapter", "base+adapter+Q"}
    assert ev["settings"]["expert"]["in-domain"]["collision"] == 0.0  # the reference the base agent cloned
    for agent in ev["settings"].values():
        assert set(agent) == {"in-domain", "out-of-domain", "safety-critical"}
        for s in agent.values():
            assert 0.0 <= s["score"] <= 1.0 and s["score_ci"][0] <= s["score"] <= s["score_ci"][1]
    assert len(ev["sweep_data_size"]) >= 3 and len(ev["sweep_k"]) >= 3
    assert "| in-domain" in (out / "report.md").read_text()
    # the Q diagnostic on the same models: advantages of argmax-Q, random and oracle picks on held-out points
    assert main(["mpa", "diagnose", "--scale", "tiny", "--out", str(out)]) == 0
    diag = json.loads((out / "diagnose.json").read_text())
    adv = diag["advantage"]
    assert diag["heldout_points"] >= 1 and adv["oracle"] >= max(adv["q_pick"], adv["random"], 0.0)
    assert main(["mpa", "diagnose", "--out", str(tmp_path / "empty")]) == 2  # no models: a clear error
    _seeds_as_jobs(out, tmp_path)
    _retrain_q(out, tmp_path)


def _retrain_q(models, tmp_path):
    """``eval --retrain-q``: a Q ablation on trained models (here a 3-member pessimistic ensemble)."""
    from embody.cli import main

    quick = ["--set", "eval.episodes=1", "--set", "eval.data_fractions=[1.0]", "--set", "eval.k_values=[8]"]
    q_set = ["--set", "q.members=3", "--set", "agent.q_pessimism=2.0"]
    out = tmp_path / "q3"
    assert main(["mpa", "eval", "--out", str(out), "--models", str(models), "--retrain-q", *q_set, *quick]) == 0
    result = json.loads((out / "results.json").read_text())
    assert result["train"]["q"]["retrained"] and result["config"]["q"]["members"] == 3
    assert "--retrain-q" in result["command"]
    assert main(["mpa", "eval", "--out", str(out), "--retrain-q", *quick]) == 2  # nothing to retrain on


def _seeds_as_jobs(models, tmp_path):
    """``eval --seeds``: each seed a job of the core runner, its result equal to a one-seed run, the tables
    pooled from every seed's episodes; ``merge`` pools folders run apart (on the trained tiny models)."""
    from embody.cli import main

    quick = [
        "--models",
        str(models),
        "--set",
        "eval.episodes=1",
        "--set",
        "eval.data_fractions=[1.0]",
        "--set",
        "eval.k_values=[8]",
    ]
    single, seeds, more = tmp_path / "single", tmp_path / "seeds", tmp_path / "more"
    assert main(["mpa", "eval", "--out", str(single), *quick]) == 0
    assert main(["mpa", "eval", "--out", str(seeds), "--seeds", "2", *quick]) == 0
    assert sorted(p.name for p in (seeds / "jobs").iterdir()) == ["seed0.json", "seed1.json"]

    def ev(path):
        e = json.loads(path.read_text())["eval"]
        return {k: v for k, v in e.items() if k != "time_s"}

    assert ev(seeds / "seed0" / "results.json") == ev(single / "results.json")
    pooled = json.loads((seeds / "results.json").read_text())
    assert pooled["config"]["seeds"] == [0, 1] and "seeds 0, 1 pooled" in (seeds / "report.md").read_text()
    assert all(s["episodes"] == 2 for per in pooled["eval"]["scenarios"].values() for s in per.values())
    assert main(["mpa", "eval", "--out", str(more), "--seed", "2", "--seeds", "2", *quick]) == 0
    assert main(["mpa", "merge", "--from", str(seeds), "--from", str(more), "--out", str(tmp_path / "all")]) == 0
    merged = json.loads((tmp_path / "all" / "results.json").read_text())
    assert merged["config"]["seeds"] == [0, 1, 2, 3]
    assert main(["mpa", "merge", "--from", str(seeds), "--from", str(seeds), "--out", str(tmp_path / "x")]) == 2


def test_bev_perception_conditions_the_adapter_and_q_on_the_base_policy_s_features():
    """End to end from the BEV camera: the base BC reads the frames through its CNN, and the counterfactual data
    (what the adapter and the Q model learn from) holds that CNN's features of each branch point."""
    from embody.papers.mpa.config import for_scale
    from embody.papers.mpa.data import BEV, counterfactual_data, policy_obs
    from embody.papers.mpa.policy import Models, MPAAgent
    from embody.policies.trajectory import TrajectoryBCConfig, train_trajectory_bc

    cfg = DataConfig(perception="bev", expert_episodes=1, expert_max_steps=20, branch_max_steps=7, branch_every=6)
    obs, plans = expert_rollouts(cfg, [0])
    assert obs.shape == (20 + 1 - cfg.horizon, 6 + int(np.prod(BEV.shape())))  # 21 states: H-step futures
    sim = make_sim("highway", "bev")
    o = policy_obs(sim.reset(0))
    np.testing.assert_array_equal(o[6:], np.moveaxis(sim.observe().image, -1, 0).ravel())  # frames, channels first
    bc = train_trajectory_bc(obs, plans, TrajectoryBCConfig(hidden=[32], epochs=2, image=BEV.shape(), progress=False))
    agent = MPAAgent("base", Models(bc), for_scale("tiny").agent, sim.dt)
    features = bc.config.image_features
    assert agent.condition(sim.observe()).shape == (6 + features,)
    cf = counterfactual_data(cfg, agent, [1])
    assert cf.obs.shape == (2, 6 + features) and cf.plans.shape == (2, cfg.candidates, cfg.horizon, 4)


def test_branch_return_prices_collisions_leaving_the_road_and_closing_in():
    from embody.papers.mpa.data import branch_return
    from embody.sims.driving.base import StepMetrics

    def step(progress, collision=False, off_road=False, ttc=float("inf")):
        return StepMetrics(0.0, collision, off_road, progress, ttc, float("inf"), 20.0)

    cfg = DataConfig(off_road_exit_penalty=100.0)
    clean = [step(10.0), step(20.0)]
    assert branch_return(clean, 5.0, cfg) == 15.0
    assert branch_return([step(10.0), step(20.0, collision=True)], 5.0, cfg) == 15.0 - 100.0
    off = [step(10.0, off_road=True), step(20.0, off_road=True)]
    assert branch_return(off, 5.0, cfg) == 15.0 - 2 * 10.0 - 100.0  # per step, and once for leaving at all
    assert branch_return([step(10.0, ttc=1.0), step(20.0)], 5.0, cfg) == 15.0 - 2.0 * 0.5
    assert branch_return([], 5.0, cfg) == 0.0
