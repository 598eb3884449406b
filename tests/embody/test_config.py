from dataclasses import dataclass, field
from typing import Literal

import pytest

from embody.config import ConfigError, apply_override, check, from_dict, load_yaml, parse_override, to_dict
from embody.train import TrainConfig, build_env, resolve_config


@dataclass
class Inner:
    lr: float = 1e-3
    sizes: list[int] = field(default_factory=lambda: [64, 64])
    mode: Literal["a", "b"] = "a"


@dataclass
class Outer:
    name: str = "x"
    steps: int = 10
    inner: Inner = field(default_factory=Inner)
    weights: dict[str, float] = field(default_factory=dict)


def test_overrides_are_typed_and_nested():
    cfg = Outer()
    for text in ["inner.lr=3e-4", "steps=20", "inner.sizes=[32, 32]", "weights.alive=0.5", "inner.mode=b"]:
        apply_override(cfg, *parse_override(text))
    assert cfg.inner.lr == 3e-4 and cfg.steps == 20 and cfg.inner.sizes == [32, 32]
    assert cfg.weights == {"alive": 0.5} and cfg.inner.mode == "b"
    assert from_dict(Outer, to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    "text, message",
    [
        ("inner.lrr=1", "unknown config key 'inner.lrr'.*lr"),
        ("steps=many", "steps: expected int"),
        ("inner.mode=c", "not one of"),
        ("nokey", "key=value"),
    ],
)
def test_bad_overrides_fail_clearly(text, message):
    with pytest.raises(ConfigError, match=message):
        apply_override(Outer(), *parse_override(text))


@pytest.mark.parametrize(
    "text, message",
    [
        ("n_envs=-1", "n_envs = -1: must be ≥ 1"),  # was numpy's "negative dimensions" deep in the task
        ("seed=-3", "seed = -3: must be ≥ 0"),  # was numpy's seeding error
        ("ppo.minibatches=0", "ppo.minibatches = 0: must be ≥ 1"),  # was a ZeroDivisionError in the update
        ("ppo.gamma=1.5", "ppo.gamma = 1.5: must be ≤ 1"),  # was accepted silently
        ("sac.batch_size=0", "sac.batch_size = 0: must be ≥ 1"),
        ("sac.utd=-1", "sac.utd = -1.0: must be > 0"),
        ("sac.lr=.nan", "sac.lr = nan: must be ≥ 0"),
        ("preference.mistake=2", "preference.mistake = 2.0: must be ≤ 1"),
        ("policy.actor_hidden=[64,0]", r"policy.actor_hidden\[1\] = 0: must be ≥ 1"),  # trained a zero-width layer
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(text, message):
    with pytest.raises(ConfigError, match=message):
        apply_override(TrainConfig(), *parse_override(text))


def test_bounds_hold_for_files_and_for_configs_built_in_code(tmp_path):
    (tmp_path / "bad.yaml").write_text("sac:\n  tau: 3\n")
    with pytest.raises(ConfigError, match=r"bad.yaml.sac.tau = 3.0: must be ≤ 1"):
        resolve_config("cartpole-swingup", str(tmp_path / "bad.yaml"))
    for bad in ("[1.0, -1.0]", "[1.0]"):  # low above high; not a pair (was an IndexError)
        with pytest.raises(ConfigError, match=rf"env.commands.lin_vel_x = \{bad[:-1]}\]: must be a \(low, high\)"):
            build_env(resolve_config("h1_2-velocity", overrides=[f"env.commands.lin_vel_x={bad}"]), n_envs=1)
    cfg = TrainConfig()
    check(cfg)  # the defaults are in range
    cfg.ppo.epochs = 0
    with pytest.raises(ConfigError, match="ppo.epochs = 0: must be ≥ 1"):
        check(cfg)


def test_yaml_is_read_safely_and_errors_name_the_file(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("steps: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ConfigError, match="evil.yaml"):
        load_yaml(evil)
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_yaml(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_yaml(tmp_path / "list.yaml")
    (tmp_path / "broken.yaml").write_text("steps: [1\n")  # one line, with where: was PyYAML's five-line report
    with pytest.raises(ConfigError, match=r"^config file \S+broken.yaml is not valid YAML: line 2, column 1: [^\n]+$"):
        load_yaml(tmp_path / "broken.yaml")
    (tmp_path / "binary.yaml").write_bytes(b"\x98\xff")
    with pytest.raises(ConfigError, match="binary.yaml is not a text file"):  # was a UnicodeDecodeError traceback
        load_yaml(tmp_path / "binary.yaml")


def test_train_config_precedence(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("n_envs: 8\nppo:\n  lr: 0.01\nenv:\n  max_episode_steps: 100\n")
    cfg = resolve_config("cartpole-swingup", str(f), ["ppo.lr=0.02"], steps=1000, seed=None)
    assert isinstance(cfg, TrainConfig)
    assert cfg.n_envs == 8 and cfg.steps == 1000 and cfg.ppo.lr == 0.02
    assert cfg.env["max_episode_steps"] == 100 and cfg.env["sim"]["decimation"] == 4
