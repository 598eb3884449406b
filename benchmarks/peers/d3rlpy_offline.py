"""The d3rlpy side of ``embody bench offline``: trains d3rlpy's BC, TD3+BC, IQL, CQL and Decision Transformer on
the bench's dataset with the bench's settings and evaluates them on the point-mass task.

It runs in its own virtual environment (d3rlpy pins gymnasium 1.0.0), which the bench creates; by hand:

    python3 -m venv /tmp/d3 && /tmp/d3/bin/pip install 'd3rlpy==2.8.1' torch
    /tmp/d3/bin/python benchmarks/peers/d3rlpy_offline.py DATA.npz SETTINGS.json OUT.json

DATA.npz holds the arrays of ``pointmass.dataset`` (or any dataset's in that layout); SETTINGS.json the bench's
``settings`` (algos, seeds, steps, networks, learning rates; ``evaluate``: false times training only, for data of
another task); OUT.json receives, per algo, each seed's training steps/s and point-mass return.
"""

import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import d3rlpy  # noqa: E402
import pointmass  # noqa: E402
import structlog  # noqa: E402
import torch  # noqa: E402

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))  # d3rlpy's debug lines


def make(algo: str, s: dict):
    """The d3rlpy algorithm matched to embody's settings ``s`` (same networks, rates, batch, γ, scalers)."""
    enc = d3rlpy.models.VectorEncoderFactory(hidden_units=s["hidden"])
    scalers = dict(
        observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(),
        action_scaler=d3rlpy.preprocessing.MinMaxActionScaler(),
    )
    q = dict(
        actor_encoder_factory=enc,
        critic_encoder_factory=enc,
        actor_learning_rate=s["lr"],
        critic_learning_rate=s["lr"],
        batch_size=s["batch_size"],
        gamma=s["gamma"],
        **scalers,
    )
    if algo == "bc":
        return d3rlpy.algos.BCConfig(
            encoder_factory=enc, learning_rate=s["lr"], batch_size=s["batch_size"], **scalers
        ).create(device="cpu:0")
    if algo == "td3bc":
        return d3rlpy.algos.TD3PlusBCConfig(alpha=2.5, **q).create(device="cpu:0")
    if algo == "iql":
        return d3rlpy.algos.IQLConfig(
            value_encoder_factory=enc, expectile=0.7, weight_temp=3.0, max_weight=100.0, **q
        ).create(device="cpu:0")
    if algo == "cql":  # CQL(H) with a fixed weight, as embody's: no Lagrangian α
        return d3rlpy.algos.CQLConfig(
            conservative_weight=s["cql_alpha"],
            n_action_samples=s["cql_samples"],
            alpha_learning_rate=0.0,
            initial_alpha=1.0,
            temp_learning_rate=s["lr"],
            **q,
        ).create(device="cpu:0")
    dt = s["dt"]
    optim = d3rlpy.optimizers.AdamWFactory(
        weight_decay=1e-4,
        clip_grad_norm=0.25,
        lr_scheduler_factory=d3rlpy.optimizers.WarmupSchedulerFactory(warmup_steps=dt["warmup_steps"]),
    )
    return d3rlpy.algos.DecisionTransformerConfig(
        context_size=dt["context"],
        max_timestep=s["max_timestep"],
        batch_size=dt["batch_size"],
        learning_rate=dt["lr"],
        encoder_factory=d3rlpy.models.VectorEncoderFactory(hidden_units=[dt["embed"]]),
        optim_factory=optim,
        num_heads=1,
        num_layers=dt["layers"],
        observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(),
        action_scaler=d3rlpy.preprocessing.MinMaxActionScaler(),
    ).create(device="cpu:0")


def evaluate(algo: str, model, target_return: float) -> np.ndarray:
    """Returns from the bench's fixed starts; the DT through d3rlpy's stateful wrapper, one wrapper per start."""
    if algo != "dt":
        return pointmass.evaluate(model.predict)
    wrappers = [model.as_stateful_wrapper(target_return) for _ in range(256)]
    last = np.zeros(256)

    def act(x):
        return np.stack([w.predict(x[i], float(last[i])) for i, w in enumerate(wrappers)])

    def feedback(r):
        last[:] = r

    return pointmass.evaluate(act, feedback)


def main() -> None:
    data = dict(np.load(sys.argv[1]))
    s = json.loads(Path(sys.argv[2]).read_text())
    torch.set_num_threads(s["threads"])
    dataset = d3rlpy.dataset.MDPDataset(
        data["observations"],
        data["actions"],
        data["rewards"],
        data["terminals"],
        timeouts=data["timeouts"],
        action_space=d3rlpy.ActionSpace.CONTINUOUS,
    )
    ends = np.flatnonzero(data["terminals"] | data["timeouts"]) + 1
    best = float(max(r.sum() for r in np.split(data["rewards"], ends) if len(r)))  # the DT's target return
    out = {"d3rlpy": d3rlpy.__version__, "algos": {}}
    for algo in s["algos"]:
        rows = []
        for seed in range(s["seeds"]):
            d3rlpy.seed(seed)
            model = make(algo, s)
            steps = s["dt"]["steps"] if algo == "dt" else s["steps"]
            start = time.perf_counter()
            model.fit(
                dataset,
                n_steps=steps,
                n_steps_per_epoch=steps,
                show_progress=False,
                logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
            )
            elapsed = time.perf_counter() - start
            rows.append({"seed": seed, "steps_per_s": steps / elapsed})
            if s.get("evaluate", True):
                rows[-1]["return"] = float(evaluate(algo, model, best).mean())
            print(algo, rows[-1], flush=True)
        out["algos"][algo] = rows
    Path(sys.argv[3]).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
