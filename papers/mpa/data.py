"""Expert demonstrations and counterfactual branches.

Frames. Everything is in the scenario's road frame (x along the road, y left). A *plan* is H
future ego waypoints at the control rate, D = 4 values each, relative to the ego now:
``(x_k - x_0, y_k - y_0, heading_k, speed_k)`` for k = 1..H (t + k·dt); positions are offsets in
road-frame axes (no rotation: the road is the reference), heading and speed are absolute. The
policy observation (``policy_obs``) is, with ``perception = "kinematic"``, ``Observation.flat()`` with
the ego's x zeroed (x is distance since the road's start: meaningless to a policy), so O = 6 + 7·K_others;
with ``perception = "bev"`` (end to end) the ego's own 6 values, x zeroed, then the BEV camera's frames
(``embody.sims.driving.bev``: C·H·W pixel values, channels first) and nothing about other vehicles.
The adapter and the Q model condition on the base policy's ``features`` of it (``condition``): the
observation itself for the kinematic policy, its image encoder's features for the end-to-end one.

Counterfactual branching (``counterfactual_data``): along closed-loop rollouts of the base
policy — which, with probability ``explore`` after each branch point, follow one of that point's
perturbed plans until the next, so that branch points also come from states the base policy would
not reach (near misses, other lanes, other speeds) — every ``branch_every`` steps the sim state
is cloned; the base plan and
``candidates - 1`` perturbations of it (a lane to the left/right or none, plus noise, and a
speed change, both ramped in) are each followed for H steps by the trajectory follower, then the
base policy drives ``continue_steps`` more; the branch's return (``branch_return``) is recorded
and the state restored before the next branch and before the rollout continues.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from embody.sims.driving import Observation, fast_settings, get_scenario, make_driving_sim
from embody.sims.driving.actors import Trajectory
from embody.sims.driving.base import StepMetrics
from embody.sims.driving.bev import BEVCamera, BEVSettings
from embody.sims.driving.control import TrajectoryFollower

from .config import DataConfig

D = 4  # values per waypoint: dx, dy, heading, speed


PERCEPTIONS = ("kinematic", "bev")
BEV = BEVSettings()  # the end-to-end policy's camera: 2 grayscale frames, 128 × 32 px at 1 px/m


def make_sim(scenario: str, perception: str = "kinematic"):
    """A HighwaySim playing ``scenario`` with the fast settings (config.py says why); with ``perception = "bev"``
    its observations carry the BEV camera's frames."""
    if perception not in PERCEPTIONS:
        raise ValueError(f"unknown perception {perception!r}; valid: {', '.join(PERCEPTIONS)}")
    sim = make_driving_sim("highway", fast_settings(get_scenario(scenario)))
    return BEVCamera(sim, BEV) if perception == "bev" else sim


def policy_obs(obs: Observation) -> np.ndarray:
    """The policy input (O,) float32 (module docstring): kinematic features, or the ego's and the BEV frames."""
    if obs.image is None:
        o = obs.flat()
    else:
        o = np.concatenate([obs.ego, np.moveaxis(obs.image, -1, 0).ravel()]).astype(np.float32)
    o[0] = 0.0
    return o


def condition(policy, obs: Observation) -> np.ndarray:
    """What the adapter and the Q model condition on at ``obs``: ``policy.condition(obs)`` for a policy with a
    perception of its own (MPAAgent), else the observation itself."""
    return policy.condition(obs) if hasattr(policy, "condition") else policy_obs(obs)


def ego_state(obs: Observation) -> np.ndarray:
    """(4,) x, y, heading, speed of the ego in the road frame."""
    return np.asarray(obs.ego[:4], dtype=np.float64)


def relative_plan(future: np.ndarray, ego: np.ndarray) -> np.ndarray:
    """Absolute future states (H, 4) → a plan (H, 4) relative to ``ego`` (4,) (module docstring)."""
    plan = np.array(future, dtype=np.float32)
    plan[:, :2] -= np.asarray(ego[:2], dtype=np.float32)
    return plan


def plan_trajectory(plan: np.ndarray, ego: np.ndarray, t: float, dt: float) -> Trajectory:
    """A plan (H, 4) made absolute as a Trajectory from the ego now (t) through t + H·dt."""
    plan = np.asarray(plan, dtype=np.float64)
    states = np.vstack([np.asarray(ego[:4], dtype=np.float64), plan])
    states[1:, :2] += states[0, :2]
    states[:, 3] = np.maximum(states[:, 3], 0.0)
    return Trajectory.from_states(t + dt * np.arange(len(states)), states)


# ---------------------------------------------------------------- expert demonstrations


def expert_rollouts(cfg: DataConfig, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """IDM/MOBIL expert episodes → obs (N, O) and the expert's future plans (N, H, 4).

    A step contributes when the H following states exist (the episode did not end before)."""
    obs_all, plans = [], []
    for seed in seeds:
        sim = make_sim(cfg.scenario, cfg.perception)
        obs = sim.reset(seed)
        observations, states = [obs], [ego_state(obs)]
        for _ in range(cfg.expert_max_steps):
            r = sim.step(sim.expert_action())
            observations.append(r.obs)
            states.append(ego_state(r.obs))
            if r.done:
                break
        states_a = np.array(states)
        for i in range(len(observations) - cfg.horizon):
            obs_all.append(policy_obs(observations[i]))
            plans.append(relative_plan(states_a[i + 1 : i + 1 + cfg.horizon], states_a[i]))
        sim.close()
    return np.array(obs_all, dtype=np.float32), np.array(plans, dtype=np.float32)


def expert_plan(sim, obs: Observation, horizon: int) -> np.ndarray | None:
    """The expert's own plan (H, 4) from the sim's current state (whose observation is ``obs``):
    its next ``horizon`` states in a cloned rollout, relative to the ego now; None when the rollout
    ends first (a collision, the road's end). The sim is restored."""
    state, ego, future = sim.clone_state(), ego_state(obs), []
    for _ in range(horizon):
        r = sim.step(sim.expert_action())
        future.append(ego_state(r.obs))
        if r.done:
            break
    sim.restore_state(state)
    return relative_plan(np.array(future), ego) if len(future) == horizon else None


def dagger_rollouts(cfg: DataConfig, policy, seeds: list[int]) -> tuple[np.ndarray, np.ndarray, dict]:
    """DAgger's data: ``policy`` (act, reset) drives; every ``label_every`` steps the state it reached
    is labelled with the expert's plan from there (``expert_plan``). → obs (N, O), plans (N, H, 4),
    and the rollouts' stats (episodes, steps, collisions)."""
    obs_all, plans, stats = [], [], {"episodes": len(seeds), "steps": 0, "collisions": 0}
    for seed in seeds:
        sim = make_sim(cfg.scenario, cfg.perception)
        obs = sim.reset(seed)
        policy.reset()
        for step in range(cfg.expert_max_steps):
            plan = expert_plan(sim, obs, cfg.horizon) if step % cfg.label_every == 0 else None
            if plan is not None:
                obs_all.append(policy_obs(obs))
                plans.append(plan)
            r = sim.step(policy.act(obs))
            obs, stats["steps"] = r.obs, stats["steps"] + 1
            if r.done:
                stats["collisions"] += int(r.metrics.collision)
                break
        sim.close()
    return (
        np.array(obs_all, dtype=np.float32).reshape(len(obs_all), -1),
        np.array(plans, dtype=np.float32).reshape(len(plans), cfg.horizon, D),
        stats,
    )


# ---------------------------------------------------------------- perturbations and returns


def perturb_plan(base: np.ndarray, dy: float, dv: float, dt: float) -> np.ndarray:
    """``base`` (H, 4) shifted laterally by ``dy`` [m] and in speed by ``dv`` [m/s], both ramped in
    smoothly over the first half of the plan; positions and headings follow the change."""
    h = len(base)
    k = np.arange(1, h + 1) / max(h / 2.0, 1.0)
    ramp = np.where(k >= 1.0, 1.0, 3 * k**2 - 2 * k**3)  # smoothstep
    out = np.array(base, dtype=np.float64)
    speed_delta = np.maximum(out[:, 3] + dv * ramp, 0.0) - out[:, 3]
    out[:, 3] += speed_delta
    out[:, 0] += np.cumsum(speed_delta) * dt
    out[:, 1] += dy * ramp
    step_x = np.maximum(np.diff(np.concatenate([[0.0], out[:, 0]])), 1.0)
    out[:, 2] += np.arctan2(dy * np.diff(np.concatenate([[0.0], ramp])), step_x)
    return out.astype(np.float32)


def sample_perturbations(rng: np.random.Generator, n: int, cfg: DataConfig) -> np.ndarray:
    """(n, 2) (dy, dv) draws: a lane change left/right or none (± lateral_m or 0) plus noise, a speed change."""
    lanes = rng.choice([-cfg.lateral_m, 0.0, cfg.lateral_m], size=n)
    dy = lanes + rng.normal(0.0, cfg.lateral_noise_m, size=n)
    dv = rng.uniform(*cfg.speed_range, size=n)
    return np.stack([dy, dv], axis=1)


def branch_return(steps: list[StepMetrics], start_progress: float, cfg: DataConfig) -> float:
    """progress [m] over the branch − collision_penalty·(collided) − off_road_penalty·(off-road steps)
    − off_road_exit_penalty·(left the road at all)
    − ttc_penalty·Σ max(0, 1 − ttc / ttc_threshold_s)."""
    if not steps:
        return 0.0
    progress = steps[-1].progress_m - start_progress
    collided = any(s.collision for s in steps)
    off = sum(s.off_road for s in steps)
    ttc = sum(max(0.0, 1.0 - s.ttc_s / cfg.ttc_threshold_s) for s in steps if math.isfinite(s.ttc_s))
    penalty = cfg.collision_penalty * collided + cfg.off_road_penalty * off + cfg.off_road_exit_penalty * (off > 0)
    return float(progress - penalty - cfg.ttc_penalty * ttc)


def run_branch(
    sim, obs: Observation, plan: np.ndarray, base_policy, cfg: DataConfig, follower: TrajectoryFollower
) -> float:
    """From the sim's current state (whose observation is ``obs``): follow ``plan`` for H steps,
    then ``base_policy`` for ``continue_steps``; returns the branch's return. Leaves the sim moved."""
    start = sim.metrics().progress_m
    traj = plan_trajectory(plan, ego_state(obs), obs.t, sim.dt)
    steps: list[StepMetrics] = []
    for k in range(cfg.horizon + cfg.continue_steps):
        action = follower.action(obs.ego, traj, obs.t) if k < cfg.horizon else base_policy.act(obs)
        r = sim.step(action)
        obs = r.obs
        steps.append(r.metrics)
        if r.done:
            break
    return branch_return(steps, start, cfg)


@dataclass
class CounterfactualData:
    """Grouped by branch point (S of them), M candidate plans each (index 0: the base plan).

    obs (S, O), base_plan (S, H, 4), plans (S, M, H, 4), returns (S, M), source (S,): 0 where the other
    candidates are the perturbation family (the adapter's and the Q model's data), 1 where they are the
    trained adapter's own samples (more data for the Q model, on the proposals it will rank)."""

    obs: np.ndarray
    base_plan: np.ndarray
    plans: np.ndarray
    returns: np.ndarray
    source: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.source is None:
            self.source = np.zeros(len(self.obs), dtype=np.int8)

    def where(self, mask: np.ndarray) -> CounterfactualData:
        """The branch points where ``mask`` (S,) is true."""
        return CounterfactualData(
            self.obs[mask], self.base_plan[mask], self.plans[mask], self.returns[mask], self.source[mask]
        )

    def subset(self, fraction: float) -> CounterfactualData:
        """The first ``fraction`` of the branch points of each source (the data-size sweep)."""
        keep = np.zeros(len(self.obs), dtype=bool)
        for s in np.unique(self.source):
            idx = np.flatnonzero(self.source == s)
            keep[idx[: max(2, int(round(fraction * len(idx))))]] = True
        return self.where(keep)

    def concat(self, other: CounterfactualData) -> CounterfactualData:
        """Both sets' branch points, this one's first (same M and H)."""
        return CounterfactualData(
            *(
                np.concatenate([a, b])
                for a, b in (
                    (self.obs, other.obs),
                    (self.base_plan, other.base_plan),
                    (self.plans, other.plans),
                    (self.returns, other.returns),
                    (self.source, other.source),
                )
            )
        )

    def save(self, path) -> None:
        """Write the arrays to a compressed ``.npz`` at ``path``."""
        np.savez_compressed(
            path, obs=self.obs, base_plan=self.base_plan, plans=self.plans, returns=self.returns, source=self.source
        )

    @classmethod
    def load(cls, path) -> CounterfactualData:
        """Read what ``save`` wrote (``source`` None in files without it)."""
        with np.load(path) as z:
            return cls(z["obs"], z["base_plan"], z["plans"], z["returns"], z["source"] if "source" in z else None)


def branch_point(
    sim,
    obs: Observation,
    base_policy,
    cfg: DataConfig,
    rng: np.random.Generator,
    follower: TrajectoryFollower,
    propose=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All candidates from the sim's current state: (base plan (H, 4), plans (M, H, 4), returns (M,));
    the sim is restored to the state it had on entry. The M − 1 other candidates are perturbations of
    the base plan, or ``propose(obs (O,), base (H, 4), n) → (n, H, 4)``'s."""
    state = sim.clone_state()
    base = base_policy.plan(obs)
    n = cfg.candidates - 1
    if propose is None:
        others = [perturb_plan(base, dy, dv, sim.dt) for dy, dv in sample_perturbations(rng, n, cfg)]
    else:
        others = list(propose(condition(base_policy, obs), base, n))
    plans = np.stack([base] + others)
    returns = np.empty(len(plans), dtype=np.float32)
    for m, plan in enumerate(plans):
        sim.restore_state(state)
        base_policy.reset()
        returns[m] = run_branch(sim, obs, plan, base_policy, cfg, follower)
    sim.restore_state(state)
    base_policy.reset()
    return base, plans, returns


def counterfactual_data(
    cfg: DataConfig, base_policy, seeds: list[int], progress=None, propose=None, driver=None
) -> CounterfactualData:
    """Branch along closed-loop rollouts (module docstring). ``base_policy``: act(obs), plan(obs) →
    (H, 4), reset(): the base plan and the branches' continuation. ``driver`` (act, reset; default the
    base policy) drives the rollouts between branch points. ``progress``: an embody Progress counting
    branch points. ``propose``: see ``branch_point`` (the data's source is then 1)."""
    driver = driver or base_policy
    rng = np.random.default_rng(cfg.seed + 7 + (propose is not None))
    follower = TrajectoryFollower()
    rows: list[tuple] = []
    for seed in seeds:
        sim = make_sim(cfg.scenario, cfg.perception)
        obs = sim.reset(seed)
        base_policy.reset()
        driver.reset()
        explore = None  # a perturbed plan the rollout follows until the next branch point
        for step in range(cfg.branch_max_steps):
            if step % cfg.branch_every == 0:
                rows.append(
                    (condition(base_policy, obs), *branch_point(sim, obs, base_policy, cfg, rng, follower, propose))
                )
                explore = None
                if rng.random() < cfg.explore:
                    explore = plan_trajectory(
                        rows[-1][2][rng.integers(1, cfg.candidates)], ego_state(obs), obs.t, sim.dt
                    )
                if progress is not None:
                    progress.update(len(rows), mean_return=float(np.mean([r[3].mean() for r in rows])))
            r = sim.step(driver.act(obs) if explore is None else follower.action(obs.ego, explore, obs.t))
            obs = r.obs
            if r.done:
                break
        sim.close()
    obs_a, base, plans, rets = (np.array(x, dtype=np.float32) for x in zip(*rows))
    return CounterfactualData(obs_a, base, plans, rets, np.full(len(obs_a), int(propose is not None), np.int8))
