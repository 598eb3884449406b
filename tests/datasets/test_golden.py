"""The golden fixture: a dataset our writer produced and the real lerobot 0.4.4 loaded (arrays equal,
decoded frames identical; scripts/lerobot_peer_check.py). Recording it again must give the same
layout, schemas and metadata, so that what lerobot read then, it reads now. The values (data, episode
statistics, stats.json and their checksums) were re-recorded once when arm-reach's tip pose moved from the
site sensors, which lag a physics step, to the arm's kinematics; layout, info.json and videos are the originals."""

import json
from pathlib import Path

import numpy as np
import pytest

from embody.datasets.format import load, validate
from embody.datasets.record import RecordConfig, record

GOLDEN = Path(__file__).parent / "golden" / "arm-reach-v3"
# how the fixture was recorded (`embody record arm-reach --episodes 2 --envs 1 --set ...`)
SETTINGS = ["env.sim.render_width=64", "env.sim.render_height=48", "env.max_episode_steps=12"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("golden") / "arm-reach-v3"
    record(RecordConfig(task="arm-reach", episodes=2, out=out, n_envs=1, overrides=SETTINGS))
    return out


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_golden_fixture_is_valid():
    assert validate(GOLDEN) == []


def test_same_layout_and_metadata(fresh):
    assert files(fresh) == files(GOLDEN)
    new, old = (json.loads((r / "meta" / "info.json").read_text()) for r in (fresh, GOLDEN))
    # One difference on purpose (issue 27): actions now name the joints they drive, a list of strings of the same
    # form lerobot read for observation.state in this fixture.
    assert new["features"]["action"].pop("names") == new["features"]["observation.state"]["names"]
    assert old["features"]["action"].pop("names") is None
    # And one setting added since (issue 19): the recorded sim config names its rotor inertia, the model file's.
    assert new["embody"]["recording"]["env_config"]["sim"].pop("armature") == "model"
    assert "armature" not in old["embody"]["recording"]["env_config"]["sim"]
    # And one render setting (issue 24): reflective floors, off.
    assert new["embody"]["recording"]["env_config"]["sim"].pop("reflections") is False
    assert "reflections" not in old["embody"]["recording"]["env_config"]["sim"]
    assert new == old


def test_same_parquet_schemas(fresh):
    import pyarrow.parquet as pq

    for rel in files(GOLDEN):
        if rel.endswith(".parquet"):
            assert pq.read_schema(fresh / rel).remove_metadata() == pq.read_schema(GOLDEN / rel).remove_metadata(), rel


def test_same_values_and_frames_within_codec_loss(fresh):
    a, b = load(fresh), load(GOLDEN)
    for e in range(b.num_episodes):
        ea, eb = a.episode(e), b.episode(e)
        assert ea.keys() == eb.keys()
        for key in eb:
            np.testing.assert_array_equal(ea[key], eb[key], err_msg=key)  # the simulation is deterministic
        fa, fb = a.frames(e, "observation.images.main"), b.frames(e, "observation.images.main")
        assert np.abs(fa.astype(float) - fb.astype(float)).mean() < 2.0
