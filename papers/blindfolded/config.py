"""The blindfolded-experts study's typed configuration and its two scales (``for_scale("tiny" | "paper")``).

A study crosses information levels × m (demonstrated tasks) × seeds; each cell collects one expert
demonstration on each of m training tasks, trains a history-conditioned BC policy on them and evaluates
it on those training tasks and on held-out tasks. The domain (``maze`` or ``peg``) has its own
sub-config; ``StudyConfig.domain`` selects it (study.DOMAINS).

tiny:  9×9 mazes, 4 levels × m ∈ {1, 2, 4, 8} × 2 seeds, 32 held-out mazes: well under a minute on 2 busy cores.
paper: 13×13 mazes, 5 levels × m ∈ {1, 2, 4, 8, 16, 32} × 3 seeds, 100 held-out mazes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .history_bc import HistoryBCConfig


@dataclass
class MazeConfig:
    """The maze domain (a minigrid maze seen through an egocentric window); sizes in grid squares."""

    cells: int = 4  # maze cells per side: a (2·cells+1)² minigrid grid
    view: int = 3  # minigrid's agent_view_size (odd, >= 3): the learner's egocentric window
    max_steps: int = 100  # per episode, experts and learners alike
    min_goal_distance: int = 4  # the goal is at least this many moves from the start (not in the first view)
    levels: list[str] = field(default_factory=lambda: ["informed", "region-5", "blind", "blind-wall"])  # maze.Level
    sample: bool = True  # learners sample their actions (greedy argmax can loop forever)


@dataclass
class PegConfig:
    """The peg domain (peg.PegDomain): holes within ±8 mm, MuJoCo, the GRU student (policies/bc.py)."""

    levels: list[str] = field(default_factory=lambda: ["informed", "region-4mm", "region-8mm", "blind"])  # peg.LEVELS
    max_steps: int = 600  # per episode, experts and students alike
    demos_per_task: int = 4  # expert episodes per demonstrated hole (other start poses / regions); failures dropped
    expert_eval_tasks: int = 32  # held-out holes on which the experts' success is reported
    n_envs: int = 16
    hidden: int = 64  # GRU width (student)
    epochs: int = 150
    seq_len: int = 64
    batch_size: int = 256
    lr: float = 2e-3
    dagger_betas: list[float] | None = None  # expert-action probability per DAgger iteration (None: 0.5, 0.25, 0.125)
    search_dagger: bool = True  # DAgger for the search levels too (region, blind); the informed level always has it
    demo_noise: float = 0.0  # DART: N(0, σ²) added to the expert's executed action while demonstrating (labels clean)
    teacher_resync: float = 0.0  # m: a search teacher skips ahead to a student that slid past it (SearchExpert)
    contact_history: bool = False  # the learner also observes elapsed time and when/where it first touched the board
    search_progress: bool = False  # ... and how far its search has slid and reached (PegInsert.progress)
    last_action: bool = True  # the learner observes its previous action (False: zeros, the copycat ablation)


@dataclass
class StudyConfig:
    """The blindfolded study: information ``levels`` × demonstration counts ``m_values`` × ``seeds``, learners evaluated
    on training tasks and on ``heldout`` held-out tasks."""

    scale: str = "tiny"
    seed: int = 0  # the first seed; replicate r uses seed + r
    domain: str = "maze"
    maze: MazeConfig = field(default_factory=MazeConfig)
    peg: PegConfig = field(default_factory=PegConfig)
    bc: HistoryBCConfig = field(default_factory=HistoryBCConfig)
    m_values: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    seeds: int = 2  # replicates
    heldout: int = 32  # held-out tasks (the same for every cell)
    train_eval_episodes: int = 16  # training-task evaluation episodes (the m tasks cycled; learners sample)
    heldout_seed_base: int = 10_000_000  # held-out task seeds; training tasks of replicate s: s·100000 + i
    bootstrap: int = 1000  # resamples for the 95% confidence intervals
    threads: int = 1  # torch CPU threads per process (more only slows small GRUs on a shared machine)
    workers: int = 1  # processes running (seed, level) jobs in parallel (the results do not depend on it)

    def train_tasks(self, replicate_seed: int, m: int) -> list[int]:
        """The first m training tasks of a replicate (nested: m=1's task is one of m=2's)."""
        return [replicate_seed * 100_000 + i for i in range(m)]

    def heldout_tasks(self) -> list[int]:
        """The held-out task seeds, the same for every cell."""
        return [self.heldout_seed_base + i for i in range(self.heldout)]


def for_scale(scale: str, seed: int = 0, domain: str = "maze") -> StudyConfig:
    """The tiny (CI) or paper configuration, every random choice seeded from ``seed``."""
    if domain == "peg":
        return _peg_scale(scale, seed)
    if domain != "maze":
        raise ValueError(f"unknown domain {domain!r}; valid: maze, peg")
    if scale == "tiny":
        return StudyConfig(
            "tiny",
            seed,
            domain,
            maze=MazeConfig(max_steps=100),
            bc=HistoryBCConfig(hidden=64, embed=64, epochs=120, target_loss=0.02, seed=seed),
            m_values=[1, 2, 4, 8],
            seeds=2,
            heldout=32,
            train_eval_episodes=8,
        )
    if scale == "paper":
        return StudyConfig(
            "paper",
            seed,
            domain,
            maze=MazeConfig(
                cells=6,
                view=3,
                max_steps=300,
                min_goal_distance=6,
                levels=["informed", "region-3", "region-5", "blind", "blind-wall"],
            ),
            bc=HistoryBCConfig(hidden=128, embed=128, epochs=300, batch_episodes=16, target_loss=0.01, seed=seed),
            m_values=[1, 2, 4, 8, 16, 32],
            seeds=3,
            heldout=100,
            train_eval_episodes=32,
        )
    raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")


def _peg_scale(scale: str, seed: int) -> StudyConfig:
    """peg tiny: a pipeline check (~1 min on 2 busy cores): 3 levels × m ∈ {1, 2} × 1 seed, 8 held-out
    holes, 300-step episodes, a small GRU. peg paper: 4 levels × m ∈ {1, 2, 4, 8, 16} × 3 seeds, 32 held-out
    holes, 600-step episodes, 4 expert episodes per hole (DART noise 0.1), the contact-history observation, BC + 3
    DAgger iterations for the informed level, BC alone for the search levels (~15 min per seed with ``--workers 2``
    on 2 cores; README.md). The tiny scale keeps the plain
    33-dim observation, the one teleop datasets record."""
    if scale == "tiny":
        return StudyConfig(
            "tiny",
            seed,
            "peg",
            peg=PegConfig(
                levels=["informed", "region-4mm", "blind"],
                max_steps=300,
                demos_per_task=2,
                expert_eval_tasks=8,
                n_envs=8,
                hidden=32,
                epochs=15,
                seq_len=32,
            ),
            m_values=[1, 2],
            seeds=1,
            heldout=8,
            train_eval_episodes=4,
        )
    if scale == "paper":
        return StudyConfig(
            "paper",
            seed,
            "peg",
            peg=PegConfig(
                max_steps=600,
                demos_per_task=4,
                expert_eval_tasks=32,
                n_envs=16,
                hidden=64,
                epochs=60,
                contact_history=True,
                demo_noise=0.1,
                search_dagger=False,
            ),
            m_values=[1, 2, 4, 8, 16],
            seeds=3,
            heldout=32,
            train_eval_episodes=16,
        )
    raise ValueError(f"unknown scale {scale!r}; valid: tiny, paper")
