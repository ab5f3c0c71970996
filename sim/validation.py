"""Checking a simulator config field by field: its type from the dataclass annotations, every number finite and
inside the range its env allows.

Configs arrive as nested dicts (Hydra's DictConfig/ListConfig, JSON, keyword arguments) and are merged into
the env's config dataclass. `coerce` turns one value into the annotated type (a list into a tuple of the
right length, an int into a float, a Mapping into a nested dataclass) or raises one `ConfigError` naming the
field; `check_ranges` then holds every number of the finished config against a table of allowed intervals
keyed by dotted field path. Both are generic, so a field added to a config is type- and finiteness-checked
without further code; its range is one line in the env's table. NaN and Inf are refused everywhere: a
non-finite setting gives non-finite states, rewards or observations, never a useful experiment.

Messages read `<field path> must be <what is allowed>, got <value>`, which the CLIs print as one line.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import numbers
import os
import types
import typing
from pathlib import Path
from typing import Any, Mapping, Sequence

from sim.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Interval:
    """The allowed values of a number: from `low` to `high`, each end closed unless marked open."""

    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    unit: str = ""

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.open_low else value >= self.low
        below = value < self.high if self.open_high else value <= self.high
        return bool(above and below)

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{'(' if self.open_low else '['}{number(self.low)}, {number(self.high)}{')' if self.open_high else ']'}{unit}"


def number(value: float) -> str:
    """A number as a user would write it: integers in full (up to 2**53), others in %g."""
    if isinstance(value, int) or (math.isfinite(value) and float(value).is_integer() and abs(value) <= 2**53):
        return str(int(value))
    return f"{value:g}"


def positive(high: float, unit: str = "") -> Interval:
    """(0, high]."""
    return Interval(0.0, high, open_low=True, unit=unit)


def at_least_zero(high: float, unit: str = "") -> Interval:
    """[0, high]."""
    return Interval(0.0, high, unit=unit)


MAX_ENVS = 2**20  # what the commands allow (distill's num_envs); beyond, a batch's arrays outgrow a machine's memory


def check_batch_size(num_envs: Any, nthread: Any = 0) -> None:
    """ConfigError unless `num_envs` is a whole number in [1, MAX_ENVS] and `nthread` (MuJoCo's threads; 0: none
    beside the caller) a whole number >= 0: the simulators' own checks were pybind's or MuJoCo's tracebacks, and a
    negative thread count was taken."""
    for name, value, low, high in (("num_envs", num_envs, 1, MAX_ENVS), ("nthread", nthread, 0, 4096)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
            raise ConfigError(f"{name} must be a whole number in [{low}, {high}], got {value!r}")


def _show(value: Any) -> str:
    try:
        text = " ".join(repr(value).split())  # one line, whatever the value
    except ValueError:  # an int too long to print (over 4300 digits)
        text = f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any, name: str, integer: bool) -> float | int:
    kind = "an integer" if integer else "a finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be {kind}, got {_show(value)}")
    if not _finite(value):
        raise ConfigError(f"{name} must be {kind}, got {_show(value)}")
    as_float = float(value)
    if integer:
        if as_float != int(as_float):
            raise ConfigError(f"{name} must be an integer, got {_show(value)}")
        return int(as_float)
    return as_float


def _finite(value: numbers.Real) -> bool:
    """Whether `value` is a finite number that a float can hold (an int beyond 1.8e308 cannot)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _plural(description: str) -> str:
    """"a finite number" -> "finite numbers", "a list of 2 finite numbers" -> "lists of 2 finite numbers"."""
    noun = description.removeprefix("a ").removeprefix("an ")
    if noun.startswith("list of "):
        return "lists of " + noun.removeprefix("list of ")
    return noun if noun.endswith("s") else noun + "s"


def _describe(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is float:
        return "a finite number"
    if annotation is int:
        return "an integer"
    if annotation is bool:
        return "true or false"
    if annotation is str:
        return "a string"
    if annotation is Path:
        return "a file path"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(_describe(args[0]))}"
        return f"a list of {len(args)} {_plural(_describe(args[0]))}"
    if dataclasses.is_dataclass(annotation):
        return f"a mapping of {annotation.__name__} fields"
    if origin is dict:
        return "a mapping"
    return str(annotation)


def coerce(value: Any, annotation: Any, name: str) -> Any:
    """`value` as the type `annotation` describes (float, int, bool, str, Path, tuple[...], dict[str, X],
    X | None, a dataclass, Any); ConfigError naming `name` if it is not one. Numbers must be finite."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return coerce(value, options[0], name)
        for option in options:  # the first that fits
            try:
                return coerce(value, option, name)
            except ConfigError:
                continue
        raise ConfigError(f"{name} must be {' or '.join(_describe(o) for o in options)}, got {_show(value)}")
    if annotation is float or annotation is int:
        return _number(value, name, integer=annotation is int)
    if annotation is bool:
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return bool(value)
        raise ConfigError(f"{name} must be true or false, got {_show(value)}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {_show(value)}")
    if annotation is Path:
        if isinstance(value, (str, os.PathLike)) and str(value):
            return Path(value)
        raise ConfigError(f"{name} must be a file path, got {_show(value)}")
    if origin is collections.abc.Sequence:  # any sequence of one type: checked as a tuple of it
        return coerce(value, tuple[args[0] if args else Any, ...], name)
    if origin is tuple:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise ConfigError(f"{name} must be {_describe(annotation)}, got {_show(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(v, args[0], f"{name}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{name} must be {_describe(annotation)}, got {_show(value)}")
        return tuple(coerce(v, a, f"{name}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping, got {_show(value)}")
        key_type, value_type = args or (Any, Any)
        return {coerce(k, key_type, name): coerce(v, value_type, f"{name}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return dataclasses.replace(value, **coerce_fields(annotation, _fields_of(value), name))
        if isinstance(value, Mapping):
            return annotation(**coerce_fields(annotation, value, name))
        raise ConfigError(f"{name} must be {_describe(annotation)}, got {_show(value)}")
    raise TypeError(f"no coercion for annotation {annotation!r} of {name}")  # a config class this module lacks


def _fields_of(instance: Any) -> dict[str, Any]:
    return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}


def coerce_fields(cls: type, values: Mapping[str, Any], name: str) -> dict[str, Any]:
    """`values` (some fields of dataclass `cls`) coerced to their annotated types; ConfigError for an unknown
    key, naming the valid ones."""
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    result = {}
    for key, value in values.items():
        if key not in hints or key not in fields:
            raise ConfigError(f"unknown option {name}.{key}; valid options: {', '.join(fields)}")
        result[key] = coerce(value, hints[key], f"{name}.{key}")
    return result


def merge(target: Any, overrides: Mapping[str, Any], name: str = "config") -> Any:
    """A copy of `target` (a config dataclass) with `overrides` applied, every env's one config merge: nested
    mappings merge into nested dataclasses and into dict fields, every value is coerced to its field's type;
    ConfigError naming `name`.key for an unknown key (with the valid ones) or a value of the wrong type."""
    hints = typing.get_type_hints(type(target))
    fields = [f.name for f in dataclasses.fields(target)]
    updates = {}
    for key, value in overrides.items():
        if key not in fields:
            raise ConfigError(f"unknown option {name}.{key}; valid options: {', '.join(fields)}")
        current = getattr(target, key)
        if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
            value = merge(current, value, f"{name}.{key}")
        elif isinstance(current, dict) and isinstance(value, Mapping):
            value = {**current, **dict(value)}
        updates[key] = coerce(value, hints[key], f"{name}.{key}")
    return dataclasses.replace(target, **updates)


def check_ranges(config: Any, ranges: Mapping[str, Interval], pairs: Sequence[str] = (), name: str = "") -> None:
    """Raise ConfigError unless every number of `config` (a dataclass, walked through nested dataclasses,
    tuples and dicts) is finite and lies in `ranges[path]` where its dotted path has an entry. A path's
    entry applies to every element of a tuple there; `reward_scales.*` matches every key of a dict. `pairs`
    names [low, high] ranges (tuples of two, or tuples of such pairs) that must also have low <= high."""

    def visit(value: Any, path: str, shown: str) -> None:
        if dataclasses.is_dataclass(value):
            for field in dataclasses.fields(value):
                visit(getattr(value, field.name), f"{path}.{field.name}" if path else field.name,
                      f"{shown}.{field.name}" if shown else field.name)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                wildcard = f"{path}.*"
                visit(item, wildcard if wildcard in ranges else f"{path}.{key}", f"{shown}.{key}")
        elif isinstance(value, (tuple, list)):
            if path in pairs:
                _check_pairs(value, shown, ranges.get(path))
            for index, item in enumerate(value):
                visit(item, path, f"{shown}[{index}]")
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            if not _finite(value):
                raise ConfigError(f"{shown} must be a finite number, got {_show(value)}")
            allowed = ranges.get(path)
            if allowed is not None and value not in allowed:
                raise ConfigError(f"{shown} must lie in {allowed}, got {number(value)}")

    visit(config, "", name)


def _check_pairs(value: Sequence[Any], shown: str, allowed: Interval | None) -> None:
    nested = value and isinstance(value[0], (tuple, list))
    for index, pair in enumerate(value if nested else [value]):
        where = f"{shown}[{index}]" if nested else shown
        ordered = len(pair) == 2 and all(isinstance(v, numbers.Real) and _finite(v) for v in pair) \
            and pair[0] <= pair[1]
        if not ordered or (allowed is not None and not all(v in allowed for v in pair)):
            inside = f" in {allowed}" if allowed is not None else ""
            raise ConfigError(f"{where} must be a [low, high] range with low <= high{inside}, got {list(pair)}")
