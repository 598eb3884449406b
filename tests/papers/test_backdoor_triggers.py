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
