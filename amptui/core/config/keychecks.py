"""One key's value checked against the schema: its type, choices and minimum (check_value), and the
open ranges torch itself enforces mid-run (check_range). values.py checks a whole config with these."""

from __future__ import annotations

from typing import Any

from amptui.core.config.dtypes import DTYPES, FULL_DTYPE
from amptui.core.config.schema import SCHEMA, Key
from amptui.core.errors import ConfigError

_SHORT_DTYPES = {d.short: d.name for d in (*DTYPES.values(), FULL_DTYPE)}  # "bf16" -> "bfloat16", "fp32" -> "float32"


def shown_name(name: str) -> str:
    """A user's key as it can be shown on one line."""
    return name if name.isprintable() else repr(name)[1:-1]


def schema_key(dotted: str, source: str) -> Key:
    section, _, name = dotted.partition(".")
    if section not in SCHEMA:
        raise ConfigError(f"{source}: unknown section '{shown_name(section)}' in '{shown_name(dotted)}' "
                          f"(known: {', '.join(SCHEMA)})")
    if name not in SCHEMA[section]:
        close = [k for k in SCHEMA[section] if k.startswith(name[:3])] if name else []
        hint = f"; did you mean {section}.{close[0]}?" if close else f" (known: {', '.join(SCHEMA[section])})"
        raise ConfigError(f"{source}: unknown key '{shown_name(dotted)}'{hint}")
    return SCHEMA[section][name]


_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
               "auto|bool": '"auto", true or false', "auto|int": '"auto" or an integer', "table": "a table of keyword arguments",
               "list": "a list of strings"}


def check_value(dotted: str, value: Any, source: str = "--set") -> Any:
    """Validate one value against its key; returns it normalised (int -> float for float keys)."""
    key = schema_key(dotted, source)
    bad = ConfigError(f"{source}: {dotted} must be {_TYPE_WORDS[key.type]}, got {value!r}")
    if key.type == "bool":
        if not isinstance(value, bool):
            raise bad
    elif key.type == "auto|bool":
        if not (isinstance(value, bool) or value == "auto"):
            raise bad
    elif key.type == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
    elif key.type == "auto|int":
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
    elif key.type == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise bad
    elif key.type == "str":
        if not isinstance(value, str):
            raise bad
    elif key.type == "table":
        if not isinstance(value, dict):
            raise bad
    elif key.type == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad
    if key.choices is not None and isinstance(value, str) and value not in key.choices:
        value = _SHORT_DTYPES.get(value, value)  # `--set amp.dtype=bf16`: the short names every table shows
    if key.choices is not None and value not in key.choices:
        raise ConfigError(f"{source}: {dotted} must be one of {', '.join(key.choices)}; got {value!r}")
    if key.minimum is not None and value < key.minimum:
        raise ConfigError(f"{source}: {dotted} must be >= {key.minimum:g}, got {value!r}")
    return value


_OPEN_RANGES = {  # (low, high, low inclusive, high inclusive): bounds torch itself enforces mid-run
    "amp.growth_factor": (1.0, None, False, False),
    "amp.backoff_factor": (0.0, 1.0, False, False),
    "amp.init_scale": (0.0, None, False, False),
    "sched.factor": (0.0, 1.0, True, False),
    "run.seed": (0, 2**32 - 1, True, True),
}


def check_range(dotted: str, x: Any, source: str) -> None:
    if dotted in _OPEN_RANGES:
        low, high, low_in, high_in = _OPEN_RANGES[dotted]
        if (low is not None and (x < low or (x == low and not low_in))) or \
                (high is not None and (x > high or (x == high and not high_in))):
            lo = "" if low is None else ("[" if low_in else "(") + f"{low:g}"
            hi = "" if high is None else (f"{high:g}" if isinstance(high, float) else str(high)) + \
                ("]" if high_in else ")")
            where = f"in {lo}, {hi}" if low is not None and high is not None else \
                (f"> {low:g}" if not low_in else f">= {low:g}")
            raise ConfigError(f"{source}: {dotted} must be {where}, got {x!r}")
