"""Actors CSV: loading, and errors naming the file and the row."""

import math

import numpy as np
import pytest

from embody.sims.driving.actors import ActorsFileError, Trajectory, load_actors_csv, save_actors_csv


def _write(tmp_path, text, name="actors.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loads_interleaved_actors_in_any_column_order(tmp_path):
    path = _write(
        tmp_path,
        "t,actor,x,y,heading,speed,note\n0,a,0,0,0,10,x\n0,b,5,-4,0.1,20,y\n1,a,10,0,0,10,\n2,a,20,1,0.2,10,\n\n",
    )
    actors = load_actors_csv(path)
    assert list(actors) == ["a", "b"]
    assert actors["a"].t.tolist() == [0.0, 1.0, 2.0] and actors["b"].states().tolist() == [[5.0, -4.0, 0.1, 20.0]]


def test_round_trips_through_save(tmp_path):
    tr = Trajectory([0.0, 0.5], [1.0, 2.25], [0.0, -0.125], [0.0, 0.1], [5.0, 6.0])
    back = load_actors_csv(save_actors_csv(tmp_path / "out.csv", {"car": tr}))["car"]
    assert np.array_equal(back.states(), tr.states()) and np.array_equal(back.t, tr.t)
    again = Trajectory.from_states(tr.t, tr.states())
    assert np.array_equal(again.states(), tr.states())


@pytest.mark.parametrize(
    "text, row, what",
    [
        ("actor,t,x,y,heading,speed\na,0,0,0,0,1\na,2,1,0,0,1\na,1,2,0,0,1\n", 4, "time goes backwards for actor 'a'"),
        ("actor,t,x,y,heading,speed\na,0,0,0,0,1\na,0,1,0,0,1\n", 3, "time repeats"),
        ("actor,t,x,y,heading,speed\na,0,0,0,0,1\nb,1,nan,0,0,1\n", 3, "column x is NaN"),
        ("actor,t,x,y,heading,speed\na,0,0,0,0,inf\n", 2, "column speed is infinite"),
        ("actor,t,x,y,speed\na,0,0,0,1\n", 1, "missing column(s) heading"),
        ("actor,t,x,y,heading,speed\na,0,zero,0,0,1\n", 2, "column x: 'zero' is not a number"),
        ("actor,t,x,y,heading,speed\na,0,0,0,0\n", 2, "5 values for 6 columns"),
        ("actor,t,x,y,heading,speed\n,0,0,0,0,1\n", 2, "actor name is empty"),
        ("actor,t,x,y,heading,speed\n", 2, "no waypoints"),
        ("", 1, "empty"),
    ],
)
def test_bad_files_name_the_file_and_the_row(tmp_path, text, row, what):
    path = _write(tmp_path, text)
    with pytest.raises(ActorsFileError) as e:
        load_actors_csv(path)
    msg = str(e.value)
    assert msg.startswith(f"{path} row {row}: ") and what in msg, msg
    assert "\n" not in msg


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ActorsFileError, match="nope.csv: actors file not found"):
        load_actors_csv(tmp_path / "nope.csv")


def test_trajectory_interpolates_inside_and_extrapolates_at_constant_velocity_after():
    tr = Trajectory([1.0, 3.0], [0.0, 20.0], [0.0, 0.0], [3.0, -3.0], [10.0, 10.0])  # heading across ±pi
    assert tr.at(0.0) == (0.0, 0.0, 3.0, 10.0)  # before the start: the first waypoint
    x, y, h, v = tr.at(2.0)
    assert (x, y, v) == (10.0, 0.0, 10.0) and math.isclose(abs(h), math.pi, abs_tol=0.02)  # the short way round
    x, y, h, v = tr.at(4.0)
    assert math.isclose(x, 20.0 + 10.0 * math.cos(-3.0)) and math.isclose(y, 10.0 * math.sin(-3.0)) and h == -3.0
