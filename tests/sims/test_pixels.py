"""Pixel observations (sims/pixels.py) and SAC from pixels (DrQ-v2's encoder and random shifts): frames rendered
at the observation's size and stacked, a new episode starting from its own first image, uint8 in the replay
buffer, the encoder trained by the critics' loss; `embody train --algo sac --set pixels=N` end to end."""

import json

import numpy as np
import pytest
import torch

from embody.policies.networks import PixelEncoder


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


def test_random_shifts_equal_replicate_padding_then_a_crop_on_uint8_frames():
    enc = PixelEncoder((3, 16, 16), shift=2)
    x = torch.randint(0, 256, (8, 3, 16, 16), dtype=torch.uint8)
    torch.manual_seed(1)
    out = enc.augment(x)
    torch.manual_seed(1)
    dy, dx = (torch.randint(0, 5, (8,)) for _ in range(2))  # the same draws, in the same order
    padded = torch.nn.functional.pad(x.float(), (2, 2, 2, 2), mode="replicate")
    crops = torch.stack([padded[i, :, dy[i] : dy[i] + 16, dx[i] : dx[i] + 16] for i in range(8)])
    assert out.dtype == torch.uint8 and torch.equal(out.float(), crops)


def test_a_bfloat16_encoder_agrees_with_float32_and_keeps_float32_weights():
    torch.manual_seed(0)
    full = PixelEncoder((9, 24, 24))
    half = PixelEncoder((9, 24, 24), precision="bfloat16")
    half.load_state_dict(full.state_dict())
    images = torch.randint(0, 256, (32, 9 * 24 * 24), dtype=torch.uint8)
    grads = []
    for enc in (full, half):
        f = enc(images)
        assert f.dtype == torch.float32
        (f * torch.linspace(-1, 1, f.shape[-1])).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in enc.parameters()]))
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in enc.parameters())
    assert (full(images) - half(images)).abs().max() < 0.05  # features in [-1, 1] (tanh)
    assert torch.nn.functional.cosine_similarity(*grads, dim=0) > 0.99
    with pytest.raises(ValueError, match="float32, bfloat16"):
        PixelEncoder((9, 24, 24), precision="float16")


def test_the_pixel_precision_is_saved_with_a_sac_policy_and_checked_before_a_run():
    from embody.policies.sac import SACPolicy
    from embody.runs import build_env
    from embody.train import TrainConfig

    policy = SACPolicy(3 * 16 * 16, 1, [16, 16], pixels=[3, 16, 16], pixel_precision="bfloat16")
    assert SACPolicy.from_kwargs(policy.init_kwargs()).encoder.precision == "bfloat16"
    with pytest.raises(ValueError, match="pixel_precision: 'half'"):
        build_env(TrainConfig(task="cartpole-swingup", pixels=16, pixel_precision="half"))


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
        "pixel_precision=bfloat16",
        "eval_episodes=1",
        "video=false",
    ]
    argv = ["train", "cartpole-swingup", "--algo", "sac", "--envs", "4", "--steps", "160", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    ck = load_run_checkpoint(out)
    assert ck.policy.pixels == [9, 24, 24] and ck.spec["obs_size"] == 9 * 24 * 24
    assert ck.policy.encoder.precision == "bfloat16"
    buf = ReplayBuffer(1000, 9 * 24 * 24, 1, np.uint8).restore(out / "replay.safetensors")
    assert buf.data["obs"].dtype == np.uint8 and buf.size == 160
    assert json.loads((out / "eval.json").read_text())["episodes"] == 1


def test_the_state_becomes_privileged_for_a_state_critic():
    from embody.sims.pixels import PixelEnv
    from embody.sims.vec_env import make_env

    inner = make_env("cartpole-swingup", n_envs=2, seed=0)
    inner.task.config.max_episode_steps = 2
    env = PixelEnv(inner, size=16, frames=2)
    assert env.privileged_size == env.task.privileged_size == 5 and env.state_observation_size == 5
    _, priv = env.reset()
    np.testing.assert_array_equal(priv, inner.task.observe(inner.sim.state()))
    _, _, _, _, info = env.step(np.ones((2, 1)))
    final = inner.task.observe(inner.sim.state())
    _, _, _, truncated, info = env.step(np.ones((2, 1)))
    assert truncated.all()
    assert info.final_privileged_obs.shape == (2, 5) and not np.array_equal(info.final_privileged_obs, final)
    np.testing.assert_array_equal(info.privileged_obs, inner.task.observe(inner.sim.state()))  # after the reset


def test_a_pixel_actor_critic_reads_images_and_its_critic_the_state():
    from embody.policies.actor_critic import ActorCritic, ActorCriticConfig

    with pytest.raises(ValueError, match="privileged observation for its critic"):
        ActorCritic(3 * 16 * 16, 1, 0, ActorCriticConfig(pixels=[3, 16, 16]))
    policy = ActorCritic(3 * 16 * 16, 1, 5, ActorCriticConfig(pixels=[3, 16, 16]))
    images = torch.randint(0, 256, (4, 3 * 16 * 16), dtype=torch.uint8)
    state = torch.randn(4, 5)
    assert policy.critic_size == 5 and torch.equal(policy.critic_input(images, state), state)
    assert policy.value(state).shape == (4,) and policy.act(images).shape == (4, 1)
    assert {id(p) for p in policy.encoder.parameters()} <= {id(p) for p in policy.actor_parameters()}


def test_ppo_keeps_images_as_uint8_and_its_critic_on_the_state():
    from embody.policies.actor_critic import ActorCritic, ActorCriticConfig
    from embody.policies.ppo import PPO, PPOConfig, RolloutBuffer
    from embody.sims.pixels import PixelEnv
    from embody.sims.vec_env import make_env

    env = PixelEnv(make_env("cartpole-swingup", n_envs=2, seed=0), size=16, frames=2)
    policy = ActorCritic(env.observation_size, 1, env.privileged_size, ActorCriticConfig(pixels=list(env.pixel_shape)))
    ppo = PPO(env, policy, PPOConfig(n_steps=4, epochs=1, minibatches=2))
    buf = RolloutBuffer(4, 2, env.observation_size, policy.critic_size, 1, ppo.device, torch.uint8)
    ppo.collect(buf, [])
    assert buf.obs.dtype == torch.uint8 and buf.obs.float().std() > 0 and buf.critic_obs.shape == (4, 2, 5)
    before = [p.detach().clone() for p in policy.encoder.parameters()]
    ppo.update(buf, 0.0)
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.encoder.parameters()))  # the PPO loss trains it


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "shac"])
def test_ppo_and_shac_train_from_pixels_end_to_end(tmp_path, algo):
    from embody.cli import main
    from embody.runs import load_run_checkpoint

    out = tmp_path / algo
    sets = ["pixels=16", "eval_episodes=1", "video=false", "ppo.n_steps=8", "shac.horizon=8"]
    sets += ["pixel_precision=bfloat16"] if algo == "shac" else []  # D.VA's encoder at half the cost
    argv = ["train", "cartpole-swingup", "--algo", algo, "--envs", "4", "--steps", "64", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    ck = load_run_checkpoint(out)
    assert ck.policy.config.pixels == [9, 16, 16] and ck.policy.critic_size == 5
    assert ck.policy.encoder.precision == ("bfloat16" if algo == "shac" else "float32")
    assert json.loads((out / "eval.json").read_text())["episodes"] == 1
