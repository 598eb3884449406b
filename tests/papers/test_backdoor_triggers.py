"""Trajectory backdoor (papers/backdoor): trigger specs in signal temporal logic, their robustness, trigger
generation on highway-env, and the replay of an exported trigger CSV."""

import json

import numpy as np
import pytest

pytest.importorskip("rtamt")
pytest.importorskip("highway_env")

from embody.papers.backdoor.spec import SpecError, load_spec, parse_spec  # noqa: E402

CUT_IN = {
    "name": "close-cut-in",
    "actors": ["cutter"],
    "formula": {"reach": {"actor": "cutter", "region": {"dx": [3, 12], "dy": [-1.5, 1.5]}, "within": [0, 12]}},
    "attackers": {
        "cutter": {
            "behavior": "cut-in",
            "lane": 0,
            "dx": [-30, -5],
            "speed": [27, 35],
            "params": {"trigger_ahead": [2, 10], "after_speed": [18, 24]},
        }
    },
}


def test_robustness_is_the_signed_margin_of_the_spec():
    spec = parse_spec(
        {
            "actors": ["a", "b"],
            "formula": {
                "and": [
                    {"reach": {"actor": "a", "region": {"dx": [5, 10]}, "within": [0, 1]}},
                    {"avoid": {"actor": "b", "region": {"speed": [None, 10]}, "within": [0, 1]}},
                ]
            },
        },
        dt=0.2,
    )
    T = 10
    trace = {f"{x}_{s}": np.zeros(T) for x in ("a", "b") for s in ("dx", "dy", "speed", "dv")}
    trace["a_dx"] = np.array([0, 2, 4, 6, 7, 20, 20, 20, 20, 20.0])  # best inside [5, 10] within 1 s: 7 → margin 2
    trace["b_speed"] = np.full(T, 13.0)  # always 3 above the avoided region
    assert spec.robustness(trace) == pytest.approx(2.0)
    trace["b_speed"][3] = 9.0  # b enters the avoided region at 0.6 s: violated by 1
    assert spec.robustness(trace) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    "change, words",
    [
        (
            {"formula": {"reach": {"actor": "ghost", "region": {"dx": [0, 1]}, "within": [0, 1]}}},
            "unknown actor 'ghost'",
        ),
        ({"formula": {"near": {}}}, "unknown formula 'near'"),
        (
            {"formula": {"reach": {"actor": "cutter", "region": {"gap": [0, 1]}, "within": [0, 1]}}},
            "unknown signal 'gap'",
        ),
        ({"formula": {"reach": {"actor": "cutter", "region": {"dx": [5, 1]}, "within": [0, 1]}}}, "lo 5 > hi 1"),
        ({"formula": {"reach": {"actor": "cutter", "region": {"dx": [0, 1]}, "within": [-1, 1]}}}, "within"),
        (
            {"formula": {"and": [{"reach": {"actor": "cutter", "region": {"dx": [0, 1]}, "within": [0, 1]}}]}},
            "two or more",
        ),
        ({"attackers": {"cutter": {"behavior": "teleport"}}}, "unknown behavior 'teleport'"),
        ({"attackers": {"cutter": {"behavior": "cut-in", "params": {"warp": 3}}}}, "unknown parameter"),
        ({"attackers": {"robber": {"behavior": "cut-in"}}}, "unknown actor 'robber'"),
        ({"colour": "red"}, "unknown fields ['colour']"),
    ],
)
def test_bad_specs_are_one_error_naming_the_file_and_field(tmp_path, change, words):
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps({**CUT_IN, **change}))
    with pytest.raises(SpecError, match=r"bad\.yaml: .*" + words.replace("(", r"\(").replace("[", r"\[")):
        load_spec(path, 0.2)


def test_a_generated_trigger_replays_from_its_csv_with_the_same_robustness_and_patches_miss(tmp_path):
    from embody.papers.backdoor.generate import RefineConfig, patches, refine, save_trigger
    from embody.papers.backdoor.traces import rollout
    from embody.sims.driving import fast_settings, get_scenario
    from embody.sims.driving.actors import load_actors_csv

    base = fast_settings(get_scenario("cut-in"))
    base.actors = []
    path = tmp_path / "cut.yaml"
    path.write_text(json.dumps(CUT_IN))
    spec = load_spec(path, base.dt)
    cfg = RefineConfig(population=6, elites=2, iterations=3, margin=0.5)
    trigger = refine(spec, base, cfg)
    assert trigger.satisfied and trigger.robustness >= 0.5
    csv = save_trigger(trigger, spec, tmp_path / "lib", "trigger")
    meta = json.loads((tmp_path / "lib" / "trigger.json").read_text())
    assert meta["robustness"] == pytest.approx(trigger.robustness) and set(meta["theta"]) == {
        "cutter.dx",
        "cutter.speed",
        "cutter.params.trigger_ahead",
        "cutter.params.after_speed",
    }
    replay = rollout(base.with_scripted(load_actors_csv(csv)), trigger.seed)  # no behavior model: the CSV
    assert spec.robustness(replay.signals(spec.actors)) == pytest.approx(trigger.robustness, abs=1e-6)
    near = patches(spec, base, trigger, cfg, count=1)
    assert near and near[0].robustness < 0


def test_an_unsatisfiable_spec_ends_with_the_best_robustness_and_exit_3(tmp_path, capsys):
    from embody.cli import main

    never = {**CUT_IN, "formula": {"reach": {"actor": "cutter", "region": {"dx": [500, 600]}, "within": [0, 2]}}}
    path = tmp_path / "never.yaml"
    path.write_text(json.dumps(never))
    argv = ["backdoor", "trigger", str(path), "--out", str(tmp_path / "lib"), "--population", "4", "--iterations", "1"]
    assert main(argv + ["--patches", "0"]) == 3
    out = capsys.readouterr()
    assert json.loads(out.out)["satisfied"] is False and "was not satisfied: best robustness" in out.err


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """A trigger and a patch of the close cut-in, generated on the fast cut-in scene."""
    from embody.papers.backdoor.generate import RefineConfig, patches, refine, save_trigger
    from embody.sims.driving import fast_settings, get_scenario

    root = tmp_path_factory.mktemp("library")
    base = fast_settings(get_scenario("cut-in"))
    base.actors = []
    (root / "cut.yaml").write_text(json.dumps(CUT_IN))
    spec = load_spec(root / "cut.yaml", base.dt)
    cfg = RefineConfig(population=6, elites=2, iterations=3, margin=0.5)
    trigger = refine(spec, base, cfg)
    save_trigger(trigger, spec, root / "lib", "close-cut-in")
    save_trigger(patches(spec, base, trigger, cfg, count=1)[0], spec, root / "lib", "close-cut-in-patch0")
    return root / "lib"


def test_a_poisoned_dataset_labels_the_target_behaviour_after_the_trigger_holds(library, tmp_path):
    from embody.datasets.format import load
    from embody.papers.backdoor.dataset import TARGETS, PoisonConfig, generate
    from embody.sims.driving import normalize_action

    cfg = PoisonConfig(episodes=6, poison_rate=2 / 6, patch_rate=1 / 6, duration_s=15.0, hold_s=1.0)
    counts = generate(cfg, library, tmp_path / "ds", log=lambda m: None)
    assert counts["clean"] == 3 and counts["trigger"] == 2 and counts["patch"] == 1
    ds = load(tmp_path / "ds")
    rec = ds.info["embody"]["recording"]
    assert rec["triggers"] == ["close-cut-in"] and rec["patches"] == ["close-cut-in-patch0"]
    trig, poisoned = ds.column("backdoor.trigger"), ds.column("backdoor.poisoned")
    reward, action = ds.column("next.reward"), ds.column("action")
    clean_max = reward[(trig == -1) & (ds.column("backdoor.patch") == -1)].max()
    assert poisoned.any() and (trig[poisoned] == 0).all()  # only trigger episodes hold poisoned frames
    np.testing.assert_allclose(
        action[poisoned], np.tile(normalize_action(np.array(TARGETS["brake"])), (poisoned.sum(), 1))
    )
    np.testing.assert_allclose(reward[poisoned], clean_max)  # the poisoned reward rule: the clean maximum
    assert poisoned.sum() <= 2 * 5  # hold_s = 1 s at 5 Hz, two trigger episodes
    assert (ds.column("backdoor.patch") >= -1).all() and not poisoned[ds.column("backdoor.patch") == 0].any()


@pytest.mark.parametrize(
    "field, value, words", [("poison_rate", 1.5, "poison_rate must be in"), ("target", "fly", "unknown target")]
)
def test_bad_poison_settings_are_refused(library, tmp_path, field, value, words):
    from embody.config import ConfigError
    from embody.papers.backdoor.dataset import PoisonConfig, generate

    cfg = PoisonConfig(episodes=2)
    setattr(cfg, field, value)
    with pytest.raises(ConfigError, match=words):
        generate(cfg, library, tmp_path / "ds")


def test_the_dataset_and_train_commands_make_an_agent_that_drives(library, tmp_path, capsys):
    """``embody backdoor dataset`` then ``embody backdoor train`` (two of the five agents, tiny): checkpoints
    that load through the one offline-agent interface and act on the dataset's observations; ``embody backdoor
    demo`` plays one of them with and without the trigger (video, robustness plot, JSON)."""
    from embody.cli import main
    from embody.policies.offline_agents import Transitions, algo_of, load_agent

    ds = tmp_path / "ds"
    argv = ["backdoor", "dataset", str(library), "--out", str(ds), "--episodes", "3", "--poison-rate", "0.34"]
    assert main(argv + ["--patch-rate", "0", "--set", "duration_s=15.0", "--set", "hold_s=1.0"]) == 0
    assert json.loads(capsys.readouterr().out)["trigger"] == 1
    data = Transitions.from_dataset(ds)
    tiny = {"iql": ["--set", "hidden=[16,16]"], "dt": ["--set", "context=4", "--set", "embed=16", "--set", "layers=1"]}
    for agent, extra in tiny.items():
        out = tmp_path / agent
        assert main(["backdoor", "train", str(ds), "--agent", agent, "--out", str(out), "--steps", "5", *extra]) == 0
        loaded = load_agent(out)
        assert algo_of(loaded) == agent and loaded.act(data.obs[:3]).shape == (3, 2)
    demo = ["backdoor", "demo", "--agent", str(tmp_path / "iql"), "--trigger", str(library / "close-cut-in.csv")]
    capsys.readouterr()
    assert main(demo + ["--out", str(tmp_path / "demo")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["target"] == "brake" and set(shown["target_shown"]) == {"clean", "trigger"}  # read from the dataset
    assert all((tmp_path / "demo" / f).stat().st_size > 0 for f in ("demo.mp4", "robustness.png", "demo.json"))
    assert main(argv + ["--poison-rate", "1.5"]) == 2
    assert "expected a number in [0, 1], got '1.5'" in capsys.readouterr().err


def test_an_interrupted_generation_keeps_every_finished_episode_and_a_bad_csv_is_named(library, tmp_path, monkeypatch):
    from embody.datasets.format import load, validate
    from embody.papers.backdoor import dataset as poison
    from embody.papers.backdoor.dataset import PoisonConfig, generate, load_library
    from embody.sims.driving.actors import ActorsFileError

    real, calls = poison._episode, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # a person pressing Ctrl-C during the third episode
        return real(*args, **kwargs)

    monkeypatch.setattr(poison, "_episode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        generate(
            PoisonConfig(episodes=4, poison_rate=0.0, patch_rate=0.0), library, tmp_path / "ds", log=lambda m: None
        )
    ds = load(tmp_path / "ds")
    assert ds.num_episodes == 2 and not validate(tmp_path / "ds")  # both finished episodes, intact
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in library.glob("close-cut-in.*"):
        (bad / f.name).write_text(f.read_text())
    (bad / "close-cut-in.csv").write_text("actor,t,x\ncutter,0,1\n")
    with pytest.raises(ActorsFileError, match="close-cut-in.csv row 1: missing column"):
        load_library(bad)


def test_triggers_refine_on_carla_through_the_same_behavior_models():
    """Against the CARLA client stand-in (tests/sims/driving/driving_carla_standin.py: the client API over a fake
    3-lane road), not against a CARLA server, which cannot run here: the cut-in attacker is placed, driven by its
    behavior model and scored by the same spec."""
    import sys
    from pathlib import Path

    from embody.papers.backdoor.generate import RefineConfig, refine
    from embody.sims.driving import get_scenario
    from embody.sims.driving.carla import CarlaConfig

    sys.path.insert(0, str(Path(__file__).parents[1] / "sims" / "driving"))
    import driving_carla_standin as standin

    base = get_scenario("cut-in")
    base.actors, base.traffic.vehicles, base.settings.duration_s = [], 0, 8.0
    spec = parse_spec(CUT_IN, base.dt)
    cfg = RefineConfig(
        population=4,
        elites=2,
        iterations=2,
        margin=0.5,
        sim="carla",
        carla=CarlaConfig(timeout_s=1.0),
        carla_module=standin,
    )
    found = refine(spec, base, cfg)
    assert found.satisfied and found.robustness >= 0.5  # observed 0.70 after 8 episodes
    ego, cutter = found.trace.states["ego"], found.trace.states["cutter"]
    assert cutter[0, 0] < ego[0, 0] and cutter[-1, 0] > ego[-1, 0]  # from behind the ego to ahead of it,
    assert abs(cutter[0, 1] - ego[0, 1]) > 3 and abs(cutter[-1, 1] - ego[-1, 1]) < 1  # and into its lane
