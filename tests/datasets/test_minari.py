"""Minari export/import against the real minari package (minari.load_dataset, MinariDataset, its writer)."""

import json

import numpy as np
import pytest

minari = pytest.importorskip("minari")
pytest.importorskip("h5py")

from embody.datasets.format import DatasetFormatError, DatasetWriter, feature, load  # noqa: E402
from embody.datasets.minari import end_flags, export_minari, import_minari  # noqa: E402

LENGTHS = (5, 7, 7)  # the first episode ends early (termination), the others at the time limit (truncation)


@pytest.fixture
def minari_home(tmp_path, monkeypatch):
    home = tmp_path / "minari_home"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(home))
    return home


def _write(root, with_policy_obs: bool = True):
    rng = np.random.default_rng(0)
    features = {
        "observation.state": feature("float32", (4,)),
        "action": feature("float32", (2,)),
        "next.reward": feature("float32", (1,)),
        "next.done": feature("bool", (1,)),
    }
    if with_policy_obs:
        features["embody.observation"] = feature("float32", (6,))
    episodes = []
    with DatasetWriter(root, fps=50, features=features, robot_type="peg_arm") as w:
        for n in LENGTHS:
            ep = {k: rng.normal(size=(n, *ft["shape"])).astype(np.float32) for k, ft in features.items()}
            ep["next.done"] = np.zeros((n, 1), bool)
            ep["next.done"][-1] = True
            for t in range(n):
                w.add_frame({k: v[t] for k, v in ep.items()}, task="peg-insert")
            w.save_episode()
            episodes.append(ep)
    return episodes


def test_export_is_read_by_minari_load_dataset(tmp_path, minari_home):
    episodes = _write(tmp_path / "ds")
    data_dir = export_minari(tmp_path / "ds")
    assert data_dir == minari_home / "embody" / "peg-insert-v0" / "data"
    mds = minari.load_dataset("embody/peg-insert-v0")
    assert (mds.total_episodes, mds.total_steps) == (3, sum(LENGTHS))
    assert mds.observation_space.shape == (6,) and mds.action_space.shape == (2,)  # embody.observation preferred
    assert mds.spec.dataset_id == "embody/peg-insert-v0" and mds.spec.version == 0
    for ep, src, n in zip(mds.iterate_episodes(), episodes, LENGTHS):
        assert len(ep) == n and ep.observations.shape == (n + 1, 6)
        np.testing.assert_array_equal(ep.observations[:n], src["embody.observation"])
        np.testing.assert_array_equal(ep.observations[n], src["embody.observation"][-1])  # o_N repeats o_{N-1}
        np.testing.assert_array_equal(ep.actions, src["action"])
        np.testing.assert_allclose(ep.rewards, src["next.reward"][:, 0])
        assert ep.infos == {}
    ends = [(ep.terminations.tolist(), ep.truncations.tolist()) for ep in minari.MinariDataset(data_dir)]
    assert ends[0] == ([False] * 4 + [True], [False] * 5)  # shorter than the time limit: terminated
    assert ends[1] == ([False] * 7, [False] * 6 + [True])  # at the time limit: truncated
    assert len(mds.sample_episodes(2)) == 2


def test_export_falls_back_to_observation_state_and_refuses_to_overwrite(tmp_path, minari_home):
    episodes = _write(tmp_path / "ds", with_policy_obs=False)
    data_dir = export_minari(load(tmp_path / "ds"), tmp_path / "out", dataset_id="lab/arm-v3", time_limit=100)
    mds = minari.MinariDataset(data_dir)
    assert mds.id == "lab/arm-v3" and mds.observation_space.shape == (4,)
    np.testing.assert_array_equal(mds[1].observations[:-1], episodes[1]["observation.state"])
    assert all(ep.terminations[-1] and not ep.truncations[-1] for ep in mds)  # all shorter than time_limit
    with pytest.raises(FileExistsError, match="already there"):
        export_minari(tmp_path / "ds", tmp_path / "out", dataset_id="lab/arm-v3")
    with pytest.raises(ValueError, match="malformed Minari dataset id"):
        export_minari(tmp_path / "ds", tmp_path / "out2", dataset_id="no version")


def _rollouts(env_id: str, max_steps: int, episodes: int) -> list:
    """Episodes the way minari's DataCollector buffers them: reset obs + one obs per step (N+1)."""
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    env = gym.make(env_id, max_episode_steps=max_steps)
    env.action_space.seed(0)
    buffers = []
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        o, a, r, te, tr = [obs], [], [], [], []
        while not (te and (te[-1] or tr[-1])):
            action = env.action_space.sample()
            obs, rew, term, trunc, _ = env.step(action)
            o.append(obs), a.append(action), r.append(rew), te.append(term), tr.append(trunc)
        buffers.append(
            EpisodeBuffer(
                id=i,
                seed=i,
                observations=np.stack(o),
                actions=np.stack(a),
                rewards=r,
                terminations=te,
                truncations=tr,
                infos={},
            )
        )
    env.close()
    return buffers


@pytest.mark.parametrize(
    "env_id,max_steps,data_format",
    [("CartPole-v1", 25, "hdf5"), ("Pendulum-v1", 12, "hdf5"), ("CartPole-v1", 25, "arrow")],
)
def test_import_a_dataset_minari_wrote(tmp_path, minari_home, env_id, max_steps, data_format):
    buffers = _rollouts(env_id, max_steps, episodes=4)
    with pytest.warns(UserWarning):  # minari warns about the missing author, code_permalink, ...
        mds = minari.create_dataset_from_buffers(
            f"test/{env_id.lower()}-v0", buffers, env=env_id, data_format=data_format
        )
    ds = import_minari(minari_home / "test" / f"{env_id.lower()}-v0", tmp_path / "ours", fps=50)
    assert ds.num_episodes == 4 and ds.num_frames == mds.total_steps
    assert ds.info["robot_type"] == env_id and ds.tasks == [f"test/{env_id.lower()}-v0"]
    for i, ep in enumerate(mds.iterate_episodes()):
        ours = ds.episode(i)
        np.testing.assert_array_equal(ours["observation.state"], ep.observations[:-1])  # the final o_N is dropped
        np.testing.assert_array_equal(ours["action"].reshape(ep.actions.shape), ep.actions)
        np.testing.assert_allclose(ours["next.reward"], ep.rewards, rtol=1e-6)  # stored as float32
        np.testing.assert_array_equal(ours["next.done"], ep.terminations | ep.truncations)
        np.testing.assert_array_equal(ours["next.terminated"], ep.terminations)
    if env_id == "CartPole-v1":  # Discrete(2): an int64 scalar column
        assert ds.features["action"]["dtype"] == "int64" and ds.features["action"]["shape"] == (1,)

    # and back: termination vs truncation survives through next.terminated
    back = minari.MinariDataset(export_minari(ds, tmp_path / "back", dataset_id="test/back-v0"))
    for a, b in zip(mds.iterate_episodes(), back.iterate_episodes()):
        np.testing.assert_array_equal(a.observations[:-1], b.observations[:-1])
        np.testing.assert_array_equal(a.terminations, b.terminations)
        np.testing.assert_array_equal(a.truncations, b.truncations)


def test_import_accepts_the_data_dir_or_the_hdf5_file_and_names_bad_files(tmp_path, minari_home):
    _write(tmp_path / "ds")
    data_dir = export_minari(tmp_path / "ds")
    ds = import_minari(
        data_dir / "main_data.hdf5", tmp_path / "a", fps=50, robot_type="peg_arm", observation_key="embody.observation"
    )
    assert ds.features["embody.observation"]["shape"] == (6,) and ds.num_frames == sum(LENGTHS)
    assert ds.features["action"]["dtype"] == "float32"

    with pytest.raises(DatasetFormatError, match="missing"):
        import_minari(tmp_path / "nowhere", tmp_path / "b", fps=50)
    with pytest.raises(DatasetFormatError, match="not a Minari dataset"):
        import_minari(tmp_path / "ds", tmp_path / "b", fps=50)  # an embody dataset, not a Minari one

    meta = json.loads((data_dir / "metadata.json").read_text())
    bad = tmp_path / "bad" / "data"
    bad.mkdir(parents=True)
    dict_space = {"type": "Dict", "subspaces": {"pos": json.loads(meta["observation_space"])}}
    (bad / "metadata.json").write_text(json.dumps({**meta, "observation_space": json.dumps(dict_space)}))
    with pytest.raises(DatasetFormatError, match=r"metadata\.json: observation_space is a Dict space"):
        import_minari(bad.parent, tmp_path / "b", fps=50)
    (bad / "metadata.json").write_text(json.dumps(meta))
    (bad / "main_data.hdf5").write_bytes(b"not hdf5")
    with pytest.raises(DatasetFormatError, match=r"main_data\.hdf5: not an HDF5 file"):
        import_minari(bad.parent, tmp_path / "b", fps=50)


def test_end_flags_split_done_into_termination_and_truncation():
    done = np.array([0, 0, 1], bool)
    assert [x.tolist() for x in end_flags(done, time_limit=5)] == [[0, 0, 1], [0, 0, 0]]
    assert [x.tolist() for x in end_flags(done, time_limit=3)] == [[0, 0, 0], [0, 0, 1]]
    assert [x.tolist() for x in end_flags(np.zeros(3, bool), time_limit=5)] == [[0, 0, 0], [0, 0, 1]]  # cut short
    assert [x.tolist() for x in end_flags(done, 3, terminated=done)] == [[0, 0, 1], [0, 0, 0]]
