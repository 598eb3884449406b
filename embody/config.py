"""Typed config dataclasses: YAML files (safe_load only) and ``--set a.b=value`` overrides.

Configs are plain dataclasses composed by fields (no inheritance chains that silently
override values). Every override is checked against the field's type and unknown keys fail
with the list of valid ones. Numeric fields declare their valid range in the type
(``batch_size: PosInt``, ``gamma: Unit``, ranges ``Span``): a value outside it is refused naming the key.
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import yaml

from embody import exits


class ConfigError(ValueError):
    """A config file or override that cannot be read or does not fit the config's fields (exit code 2)."""

    exit_code = exits.INPUT


@dataclasses.dataclass(frozen=True)
class Bounds:
    """A numeric field's valid interval, carried by its type: ``Annotated[float, Bounds(gt=0)]``."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None

    def check(self, value: Any, where: str) -> None:
        for bound, sign, holds in (
            (self.ge, "≥", operator.ge),
            (self.gt, ">", operator.gt),
            (self.le, "≤", operator.le),
        ):
            if bound is not None and not holds(value, bound):  # NaN holds nothing
                raise ConfigError(f"{where} = {value!r}: must be {sign} {bound}")


@dataclasses.dataclass(frozen=True)
class Ascending:
    """A (low, high) range whose low is not above its high: ``Annotated[tuple[float, float], Ascending()]``."""

    def check(self, value: Any, where: str) -> None:
        if len(value) != 2 or value[0] > value[1]:
            raise ConfigError(f"{where} = {list(value)}: must be a (low, high) range, low not above high")


Count = Annotated[int, Bounds(ge=0)]
PosInt = Annotated[int, Bounds(ge=1)]
PosFloat = Annotated[float, Bounds(gt=0)]
NonNeg = Annotated[float, Bounds(ge=0)]
Unit = Annotated[float, Bounds(ge=0, le=1)]  # shares, probabilities, discounts
Seed = Annotated[int, Bounds(ge=0, le=2**32 - 1)]  # what numpy's seeding accepts
Span = Annotated[tuple[float, float], Ascending()]  # a range values are drawn from


def to_dict(obj: Any) -> Any:
    """A dataclass (possibly nested) as plain dicts/lists, ready for YAML or JSON."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def _field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def check(obj: Any, where: str = "") -> None:
    """Every bounded field of dataclass ``obj`` (nested ones too) within its bounds, for configs built in code;
    a value read through ``--set`` or a file was checked on the way in."""
    for name, tp in _field_types(type(obj)).items():
        value, key = getattr(obj, name), f"{where}{name}"
        for b in getattr(tp, "__metadata__", ()):
            b.check(value, key)
        if dataclasses.is_dataclass(value):
            check(value, f"{key}.")


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against annotation ``tp``; build nested dataclasses from dicts."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is Annotated:
        value = _coerce(value, args[0], where)
        for b in tp.__metadata__:
            b.check(value, where)
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, a, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0])
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        inner = args[0] if args else Any
        return origin(_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {k: _coerce(v, args[1] if args else Any, f"{where}.{k}") for k, v in value.items()}
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):  # YAML 1.1 reads 3e-4 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if tp in (int, float, str, bool) and not (isinstance(value, tp) and not (tp is int and isinstance(value, bool))):
        raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


def from_dict(cls, data: dict, where: str = "config"):
    """Build dataclass ``cls`` from a mapping; unknown keys fail with the valid ones."""
    types_ = _field_types(cls)
    unknown = set(data) - set(types_)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(types_)}")
    return cls(**{k: _coerce(v, types_[k], f"{where}.{k}") for k, v in data.items()})


def parse_override(text: str) -> tuple[str, Any]:
    """'a.b=value' → ('a.b', value) with the value read as YAML (so 3, 1e-3, true, [1, 2] work)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    try:
        return key.strip(), yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: cannot parse value: {yaml_problem(e)}") from None


def apply_override(obj: Any, key: str, value: Any) -> None:
    """Set dotted ``key`` inside dataclass ``obj`` (dict fields accept new keys)."""
    *path, last = key.split(".")
    target = obj
    for i, part in enumerate(path):
        target = _child(target, part, ".".join(path[: i + 1]))
    if isinstance(target, dict):
        target[last] = value
        return
    types_ = _field_types(type(target))
    if last not in types_:
        raise ConfigError(f"unknown config key {key!r}; valid at that level: {sorted(types_)}")
    setattr(target, last, _coerce(value, types_[last], key))


def _child(obj: Any, part: str, where: str) -> Any:
    if isinstance(obj, dict):
        if part not in obj:
            raise ConfigError(f"unknown config key {where!r}; valid: {sorted(obj)}")
        return obj[part]
    if not dataclasses.is_dataclass(obj) or part not in _field_types(type(obj)):
        valid = sorted(_field_types(type(obj))) if dataclasses.is_dataclass(obj) else []
        raise ConfigError(f"unknown config key {where!r}; valid: {valid}")
    return getattr(obj, part)


def load_yaml(path: str | Path) -> dict:
    """Read a YAML mapping with safe_load; errors name the file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {yaml_problem(e)}") from None
    except (UnicodeDecodeError, IsADirectoryError) as e:
        raise ConfigError(f"config file {path} is not a text file: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return data


def yaml_problem(e: yaml.YAMLError) -> str:
    """A YAML parse error on one line: ``line 2, column 1: expected the node content, but found '<stream end>'``."""
    mark, problem = getattr(e, "problem_mark", None), getattr(e, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(e).split())
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def save_yaml(obj: Any, path: str | Path) -> None:
    """Write a config dataclass to ``path`` as YAML, fields in declaration order (not atomic)."""
    Path(path).write_text(yaml.safe_dump(to_dict(obj), sort_keys=False))


def apply_overrides(cfg: Any, flags: dict[str, Any] | None = None, texts: Iterable[str] = ()) -> Any:
    """Apply ``flags`` (dotted key -> value; None values skipped), then ``key=value`` texts, in place."""
    for key, value in (flags or {}).items():
        if value is not None:
            apply_override(cfg, key, value)
    for text in texts:
        apply_override(cfg, *parse_override(text))
    return cfg
