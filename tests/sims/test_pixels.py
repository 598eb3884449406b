"""Pixel observations (sims/pixels.py) and SAC from pixels (DrQ-v2's encoder and random shifts): frames rendered
at the observation's size and stacked, a new episode starting from its own first image, uint8 in the replay
buffer, the encoder trained by the critics' loss; `embody train --algo sac --set pixels=N` end to end."""

import json

import numpy as np
import pytest
import torch

from embody.policies.sac import PixelEncoder


def test_frames_stack_and_restart_with_each_episode():
    from embody.sims.pixels import PixelEnv
    from embody.sims.vec_env import make_env

    env = PixelEnv(make_env("cartpole-swingup", n_envs=2, seed=0), size=32, frames=3)
    obs, _ = env.reset()
    assert obs.shape == (2, 3 * 3 * 32 * 32) and obs.dtype == np.uint8 and env.task.observation_size == obs.shape[1]
    stack = obs.reshape(2, 3, 3, 32, 32)
    assert (stack[:, 0] == stack[:, 2]).all()  # a new episode: its first image three times
    for _ in range(5):
        obs, *_ = env.step(np.ones((2, 1)))
    stack = obs.reshape(2, 3, 3, 32, 32)
    assert not (stack[:, 0] == stack[:, 2]).all()  # the cart moved between the oldest and the newest frame
    env.close()


def test_random_shifts_move_whole_images_within_the_padding():
    enc = PixelEncoder((3, 16, 16), shift=2)
    x = torch.zeros(64, 3, 16, 16)
    x[:, :, 8, 8] = 1.0  # one bright pixel
    out = enc.augment(x)
    assert out.shape == x.shape
    where = [tuple(torch.nonzero(o[0])[0].tolist()) for o in out]
    assert all(abs(r - 8) <= 2 and abs(c - 8) <= 2 for r, c in where) and len(set(where)) > 5
    assert (out.sum((1, 2, 3)) == 3).all()  # moved, not blurred: all three channels of the one pixel


def test_one_update_trains_the_encoder_and_the_actor():
    from embody.policies.sac import SAC, SACConfig, SACPolicy

    torch.manual_seed(0)
    policy = SACPolicy(3 * 16 * 16, 1, [16, 16], pixels=[3, 16, 16])
    sac = SAC(None, policy, SACConfig(batch_size=16, buffer_size=64))
    assert sac.buffer.data["obs"].dtype == np.uint8  # pixels stay bytes in the ring
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 3 * 16 * 16), dtype=np.uint8)
    sac.buffer.add(
        obs=images,
        actions=rng.uniform(-1, 1, (64, 1)),
        rewards=images[:, 0] / 255.0,
        next_obs=images,
        terminal=np.zeros(64),
    )
    before = {k: v.clone() for k, v in policy.encoder.state_dict().items()}
    actor = [p.clone() for p in policy.actor.parameters()]
    sac.update()
    assert all(not torch.equal(before[k], v) for k, v in policy.encoder.state_dict().items() if "conv" in k)
    assert all(not torch.equal(a, p) for a, p in zip(actor, policy.actor.parameters()))
    encoder = {id(p) for p in policy.encoder.parameters()}
    assert encoder <= {id(p) for p in policy.param_groups()["critic"]}  # the critics' loss trains it,
    assert not encoder & {id(p) for p in policy.param_groups()["actor"]}  # the actor's does not (it reads it detached)
    assert policy.act(torch.as_tensor(images[:5])).shape == (5, 1)


@pytest.mark.slow
def test_sac_trains_from_pixels_end_to_end(tmp_path):
    from embody.cli import main
    from embody.policies.sac import ReplayBuffer
    from embody.runs import load_run_checkpoint

    out = tmp_path / "pix"
    sets = [
        "pixels=24",
        "sac.learning_starts=40",
        "sac.log_every=80",
        "sac.hidden=[32,32]",
        "sac.batch_size=32",
        "sac.buffer_size=1000",
        "eval_episodes=1",
        "video=false",
    ]
    argv = ["train", "cartpole-swingup", "--algo", "sac", "--envs", "4", "--steps", "160", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    ck = load_run_checkpoint(out)
    assert ck.policy.pixels == [9, 24, 24] and ck.spec["obs_size"] == 9 * 24 * 24
    buf = ReplayBuffer(1000, 9 * 24 * 24, 1, np.uint8).restore(out / "replay.safetensors")
    assert buf.data["obs"].dtype == np.uint8 and buf.size == 160
    assert json.loads((out / "eval.json").read_text())["episodes"] == 1
    assert main(["train", "cartpole-swingup", "--set", "pixels=24", "--out", str(tmp_path / "ppo")]) == 2  # PPO
