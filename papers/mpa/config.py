"""MPA's typed configuration and its two scales (``for_scale("tiny" | "paper")``).

tiny:  the whole pipeline (expert data → base BC + DAgger → counterfactual branches → adapter →
       proposal branches → Q → closed-loop evaluation and sweeps) in ~40 s alone on 2 cores, 2.5 min
       on a busy machine; numbers are noisy.
paper: end to end — the base policy drives from the BEV camera (data.py) — with 6 DAgger rounds, up to
       912 + 3 × 6 × 38 branch points × 8 plans, a 5-member pessimistic Q ensemble, 10 full-length episodes
       per scenario. results/paper (kinematic base, 3 DAgger rounds, one Q MLP: 33 min on a busy 2-core
       machine) is reproduced with --set data.perception=kinematic --set data.dagger_iterations=3
       --set q.members=1.

Both use the driving sims' fast settings (``fast_settings``: ≤ 12 background vehicles, 5 Hz
integration, no traffic–traffic collision checks), which keep highway-env at ~300 steps/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from embody.config import Span
from embody.policies.diffusion import DiffusionConfig
from embody.policies.trajectory import TrajectoryBCConfig
from embody.policies.value import QConfig

SETTINGS = {  # setting → scenarios (embody.sims.driving.get_scenario names)
    "in-domain": ("highway",),
    "out-of-domain": ("highway-dense", "merge"),
    "safety-critical": ("cut-in", "hard-brake"),
}


@dataclass
class DataConfig:
    """Expert demonstrations and counterfactual branching (data.py)."""

    scenario: str = "highway"  # the training traffic
    perception: str = "kinematic"  # the base policy's input: "kinematic" features or "bev" (end to end, data.py)
    horizon: int = 10  # H waypoints at the control rate (dt = 0.2 s: a 2 s plan)
    expert_episodes: int = 5
    expert_max_steps: int = 150
    dagger_iterations: int = 1  # base BC: rounds of DAgger after cloning the expert's own episodes
    dagger_episodes: int = 2  # base-policy episodes per round, labelled by the expert
    label_every: int = 2  # label every n-th state of a DAgger rollout (each label is an H-step cloned rollout)
    branch_episodes: int = 3  # base-policy rollouts to branch from
    branch_max_steps: int = 100
    branch_every: int = 6  # branch at every n-th control step of a rollout
    explore: float = 0.3  # after a branch point, the rollout follows one of its perturbed plans with this probability
    candidates: int = 6  # plans per branch point: the base plan + (candidates - 1) perturbed ones
    proposal_rounds: int = 2  # then rounds of rollouts branching on the trained adapter's own samples (Q data):
    proposal_episodes: int = 1  # the first driven by the base policy, later ones by the base+adapter+Q agent
    continue_steps: int = 8  # base-policy steps after the H plan steps (the Q model's long horizon)
    lateral_m: float = 4.0  # lateral perturbation: one lane left/right (± lateral_m) or none, plus noise
    lateral_noise_m: float = 0.7
    speed_range: Span = (-8.0, 4.0)  # [m/s] speed perturbation, ramped in
    collision_penalty: float = 100.0  # return = progress [m] - penalties
    off_road_penalty: float = 10.0  # per off-road step
    off_road_exit_penalty: float = 0.0  # once, if the branch leaves the road at all
    ttc_threshold_s: float = 2.0  # per step: ttc_penalty * max(0, 1 - ttc / threshold)
    ttc_penalty: float = 2.0
    seed: int = 0


@dataclass
class AgentConfig:
    """How the three agents plan at inference time (policy.py)."""

    candidates: int = 8  # K adapter samples
    ddim_steps: int = 5
    eta: float = 1.0  # DDIM eta: 1 stochastic (diverse candidates)
    adapter_top_k: int = 1  # the adapter learns the top-k plans (by return) of each branch point (the best
    # is the base plan itself where no perturbation beat it: a zero residual, so the adapter stays near the base)
    include_base: bool = True  # base+adapter+Q: keep the base plan unless a proposal's predicted advantage
    q_margin_rmse: float = 0.0  # exceeds this many of the Q model's validation RMSEs (our conservative addition)
    q_pessimism: float = 1.0  # a Q ensemble scores a proposal by the members' mean − this × their std
    replan_every: int = 5  # adapter agents commit to a chosen plan for this many control steps (1 s), as the
    # counterfactual branches followed theirs (policy.py: the paper scale replans every step); the base agent
    # replans every step (as in data collection)


@dataclass
class EvalConfig:
    """Closed-loop evaluation: episodes per scenario and agent, the data-fraction and K sweeps, bootstrap resamples."""

    episodes: int = 3  # per scenario and agent; seeds seed_base, seed_base + 1, ...
    seed_base: int = 1000  # evaluation traffic seeds, disjoint from training seeds
    max_steps: int = 50  # per episode (0: the scenario's duration)
    data_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 1.0])
    k_values: list[int] = field(default_factory=lambda: [1, 4, 8])
    sweep_scenarios: list[str] = field(default_factory=lambda: ["highway", "cut-in"])
    bootstrap: int = 1000


@dataclass
class MPAConfig:
    """The whole MPA pipeline: data, base BC, diffusion adapter, Q model, agents and evaluation."""

    scale: str = "tiny"
    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    bc: TrajectoryBCConfig = field(default_factory=TrajectoryBCConfig)
    adapter: DiffusionConfig = field(default_factory=DiffusionConfig)
    q: QConfig = field(default_factory=QConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


def for_scale(scale: str, seed: int = 0) -> MPAConfig:
    """The tiny (CI) or paper configuration, every random choice seeded from ``seed``."""
    if scale == "tiny":
        return MPAConfig(
            "tiny",
            seed,
            DataConfig(seed=seed),
            TrajectoryBCConfig(hidden=[128, 128], epochs=40, patience=10, seed=seed, progress=False),
            DiffusionConfig(
                timesteps=50, hidden=[128, 128], epochs=80, batch_size=64, ddim_steps=5, seed=seed, progress=False
            ),
            QConfig(hidden=[128, 128], members=2, epochs=60, batch_size=64, patience=15, seed=seed, progress=False),
            AgentConfig(candidates=8),
            EvalConfig(),
        )
    if scale == "paper":
        return MPAConfig(
            "paper",
            seed,
            DataConfig(
                expert_episodes=30,
                expert_max_steps=150,
                branch_episodes=24,
                branch_max_steps=150,
                branch_every=4,
                candidates=8,
                continue_steps=10,
                dagger_iterations=6,
                dagger_episodes=10,
                proposal_rounds=3,
                proposal_episodes=6,
                perception="bev",
                off_road_exit_penalty=100.0,  # one step off the road zeroes the driving score, as a collision does
                seed=seed,
            ),
            TrajectoryBCConfig(hidden=[256, 256], epochs=200, patience=20, seed=seed),
            DiffusionConfig(timesteps=100, hidden=[256, 256, 256], epochs=300, ddim_steps=10, seed=seed),
            QConfig(hidden=[256, 256], members=5, epochs=200, patience=20, seed=seed),
            AgentConfig(candidates=16, ddim_steps=10, q_pessimism=2.0, replan_every=1),
            EvalConfig(
                episodes=10,
                max_steps=0,
                data_fractions=[0.1, 0.3, 1.0],
                k_values=[1, 4, 8, 16],
                sweep_scenarios=["highway", "highway-dense", "cut-in", "hard-brake"],
            ),
        )
    raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
