"""embody sweep's parts that need no Ray: the grid, point names, the spec pin, the table and plot (the sweep itself
runs on a real loopback cluster in test_scale.py)."""

import json

import pytest

from embody.config import ConfigError
from embody.sweep import SweepSpec, check_spec, parse_grid, point_name, summarize, write_report


def test_grid_values_split_outside_brackets_and_read_as_yaml():
    grid = parse_grid(["ppo.lr=0.001,0.0003", "env.randomization.kp_scale=[0.8,1.2],[1.0,1.0]", "video=true"])
    assert grid == {"ppo.lr": [0.001, 0.0003], "env.randomization.kp_scale": [[0.8, 1.2], [1.0, 1.0]], "video": [True]}
    spec = SweepSpec("cartpole-swingup", grid, [0, 1])
    assert (
        len(spec.points()) == 4
        and point_name(spec.points()[0]) == "ppo.lr=0.001-env.randomization.kp_scale=_0.8_1.2_-video=True"
    )
    for bad in (["ppo.lr"], ["ppo.lr="], []):
        with pytest.raises(ConfigError, match="--set-grid|at least one"):
            parse_grid(bad)


def test_a_folder_holding_another_sweep_is_refused_naming_what_differs(tmp_path):
    check_spec(tmp_path, SweepSpec("cartpole-swingup", {"ppo.lr": [0.001]}, [0]))
    check_spec(tmp_path, SweepSpec("cartpole-swingup", {"ppo.lr": [0.001]}, [0]))  # the same: a resume
    with pytest.raises(ConfigError, match=r"holds another sweep \(grid.ppo.lr, seeds differ\)"):
        check_spec(tmp_path, SweepSpec("cartpole-swingup", {"ppo.lr": [0.01]}, [0, 1]))


def test_the_report_averages_seeds_per_point(tmp_path):
    spec = SweepSpec("cartpole-swingup", {"ppo.lr": [0.001, 0.01]}, [0, 1])
    rows = [
        {"point": {"ppo.lr": lr}, "seed": s, "metrics": {"return_mean": r}, "curve": [[0, 0.0], [8, r]], "run": "x"}
        for lr, s, r in [(0.001, 0, 10.0), (0.001, 1, 20.0), (0.01, 0, 4.0), (0.01, 1, 4.0)]
    ]
    assert summarize(rows)[0] == {"point": "ppo.lr=0.001", "n": 2, "return_mean": (15.0, 5.0)}
    write_report(tmp_path, spec, rows)
    assert "| ppo.lr=0.001 | 2 | 15 ± 5 |" in (tmp_path / "sweep.md").read_text()
    assert len(json.loads((tmp_path / "sweep.json").read_text())["trials"]) == 4 and (tmp_path / "sweep.png").exists()
