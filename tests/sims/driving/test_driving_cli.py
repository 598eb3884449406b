"""``embody drive`` end to end (tiny episodes), its input errors, the two-worker runner and a
checkpoint policy."""

import json
import socket

import numpy as np
import pytest

pytest.importorskip("highway_env", reason="needs the driving extra")

from embody.cli import main  # noqa: E402


def test_drive_prints_metrics_and_writes_them_with_a_video(tmp_path, capsys):
    actors = tmp_path / "actors.csv"
    actors.write_text("actor,t,x,y,heading,speed\nghost,0,170,-8,0,20\nghost,2,210,-8,0,20\n")
    out = tmp_path / "run"
    assert (
        main(
            [
                "drive",
                "cut-in",
                "--actors",
                str(actors),
                "--episodes",
                "1",
                "--steps",
                "6",
                "--out",
                str(out),
                "--video",
                "--set",
                "traffic.vehicles=3",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "metrics.json").read_text())
    assert printed == saved
    assert saved["scenario"] == "cut-in" and saved["sim"] == "highway" and saved["policy"] == "expert"
    ep = saved["episodes"][0]
    assert ep["steps"] == 6 and ep["ended_by"] == "max_steps" and ep["collision"] is False and ep["progress_m"] > 20
    assert saved["summary"]["episodes"] == 1 and saved["summary"]["collision_rate"] == 0.0
    from embody.video import read_frames

    frames = read_frames(out / "episode0.mp4")
    assert frames.shape == (7, 240, 640, 3)


def test_drive_fast_settings_and_meta_policy(capsys):
    assert main(["drive", "highway", "--fast", "--policy", "idle", "--steps", "5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scenario"] == "highway+fast" and report["episodes"][0]["steps"] == 5


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["drive", "autobahn"],
            "unknown scenario 'autobahn'; valid: cut-in, hard-brake, highway, highway-dense, merge, roundabout",
        ),
        (["drive", "highway", "--actors", "ACTORS"], "ACTORS row 3: time goes backwards for actor 'a'"),
        (["drive", "highway", "--set", "traffic.cars=2"], "unknown config key 'traffic.cars'"),
        (["drive", "highway", "--video"], "--video needs --out DIR"),
        (["drive", "highway", "--policy", "no/such/run"], "neither expert, idle, constant nor an existing run"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, argv, message):
    bad = tmp_path / "bad.csv"
    bad.write_text("actor,t,x,y,heading,speed\na,1,0,0,0,1\na,0,1,0,0,1\n")
    argv = [str(bad) if a == "ACTORS" else a for a in argv]
    message = message.replace("ACTORS", str(bad))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("embody drive: error: ") and message in err and "\n" not in err, err


def test_an_unreachable_carla_server_is_exit_code_3(capsys):
    pytest.importorskip("carla", reason="the real carla client is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket is closed
    assert main(["drive", "hard-brake", "--sim", "carla", "--carla-port", str(port), "--carla-timeout", "1"]) == 3
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err and "within 1 s" in err


def test_a_checkpoint_policy_drives_through_the_flat_features(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
    from embody.policies.checkpoint import save_checkpoint

    policy = ActorCritic(62, 2, config=ActorCriticConfig(actor_hidden=[8], critic_hidden=[8]))
    with torch.no_grad():
        policy.actor[-1].bias.copy_(torch.tensor([0.4, 0.0]))  # ≈ +2 m/s² whatever it sees
    save_checkpoint(tmp_path / "run" / "checkpoint", policy, {"task": "drive", "obs_size": 62, "action_size": 2})
    assert (
        main(["drive", "highway", "--policy", str(tmp_path / "run"), "--steps", "5", "--set", "traffic.vehicles=0"])
        == 0
    )
    ep = json.loads(capsys.readouterr().out)["episodes"][0]
    assert ep["mean_speed"] > 25.5 and not ep["collision"]
    save_checkpoint(tmp_path / "wrong", ActorCritic(10, 2), {"obs_size": 10, "action_size": 2})
    assert main(["drive", "highway", "--policy", str(tmp_path / "wrong"), "--steps", "1"]) == 2
    assert "driving needs 62" in capsys.readouterr().err


def test_episodes_run_on_two_worker_processes(tmp_path, capsys):
    assert (
        main(
            ["drive", "highway", "--fast", "--episodes", "3", "--workers", "2", "--steps", "10", "--out", str(tmp_path)]
        )
        == 0
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["workers"] == 2 and [e["seed"] for e in report["episodes"]] == [0, 1, 2]
    assert "2 worker processes" in captured.err
    # same seed, same episode, whichever process ran it
    assert main(["drive", "highway", "--fast", "--episodes", "1", "--steps", "10", "--seed", "1"]) == 0
    alone = json.loads(capsys.readouterr().out)["episodes"][0]
    assert alone["progress_m"] == report["episodes"][1]["progress_m"]
    assert np.isfinite(report["summary"]["mean_progress_m"])
