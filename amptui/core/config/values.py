"""Presets made into configurations: parsing, merging and validation against the schema.

A preset is a TOML file that states only what differs from the defaults (the keys, their types
and defaults are in `schema`). `build_config` merges defaults, the preset and `--set` overrides
and validates the result before anything starts; every mistake becomes a `ConfigError` naming
the file, the key and (for TOML syntax) the line.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from amptui.core import safefile
from amptui.core.config import autopilot, layers
from amptui.core.config.keychecks import check_range, check_value, schema_key, shown_name
from amptui.core.config.schema import (
    SCHEMA,
    SECTIONS,
    AmpConfig,
    DataConfig,
    DebugConfig,
    DistConfig,
    LogConfig,
    ModelConfig,
    NumericsConfig,
    OptimConfig,
    RunConfig,
    SchedConfig,
    defaults,
)
from amptui.core.errors import ConfigError
from amptui.core.urls import notify_url_problem


@dataclass(frozen=True)
class Config:
    """A complete, validated configuration: one typed, frozen section per table of a preset
    (`cfg.amp.dtype`). Built by `build_config`; dicts are for files and records only (`to_dict`)."""

    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sched: SchedConfig = field(default_factory=SchedConfig)
    amp: AmpConfig = field(default_factory=AmpConfig)
    numerics: NumericsConfig = field(default_factory=NumericsConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    log: LogConfig = field(default_factory=LogConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)

    @classmethod
    def _of(cls, values: Mapping[str, Mapping[str, Any]]) -> "Config":
        """From checked values (build_config's): every section and key present."""
        return cls(**{section: kind(**values[section]) for section, kind in SECTIONS.items()})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The nested dict a file or record holds: {"amp": {"dtype": ...}, ...} (fresh, yours to change)."""
        return {section: self._section(section) for section in SECTIONS}

    def flat(self) -> dict[str, Any]:
        """{"section.key": value} for every key."""
        return {f"{section}.{name}": value for section in SECTIONS for name, value in self._section(section).items()}

    def get(self, dotted: str) -> Any:
        section, name = dotted.split(".", 1)
        return getattr(getattr(self, section), name)

    def with_overrides(self, overrides: Mapping[str, Any], source: str = "--set") -> "Config":
        """A new Config with `{"section.key": value}` applied and checked (this one is unchanged)."""
        return build_config(self, overrides, source=source)

    def _section(self, section: str) -> dict[str, Any]:
        values = getattr(self, section)  # a table (model.args) copied: the caller may change it
        return {name: dict(v) if isinstance(v := getattr(values, name), Mapping) else v for name in SCHEMA[section]}


# --- parsing ------------------------------------------------------------------------------

TOML_LIMIT = 64 * 1024 * 1024  # a preset or config.toml: room for a long description, never /dev/zero


def read_toml(path: Path, follow_links: bool = False) -> dict[str, Any]:
    """Parse a TOML file; syntax errors name the file and line. The file is opened as data
    (core/safefile.py): a regular file of bounded size, and no symlink unless `follow_links`
    (a preset the user named or saved: their own link)."""
    try:
        text = safefile.read_text(path, TOML_LIMIT, follow=follow_links)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except safefile.UnsafeFile as exc:
        raise ConfigError(f"cannot read {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_toml(text, str(path))


def parse_toml(text: str, source: str) -> dict[str, Any]:
    """TOML with bounded nesting: too deep is a ConfigError like any syntax error."""
    try:
        return safefile.check_depth(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        # tomllib says "... (at line 3, column 7)"; keep that, prefix the file.
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    except (RecursionError, ValueError):
        raise ConfigError(f"{source}: invalid TOML: nested deeper than {safefile.MAX_DEPTH} levels") from None


_SET_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$", re.S)


def parse_set(assignments: Iterable[str]) -> dict[str, Any]:
    """Turn `--set amp.dtype=bfloat16` style strings into {"amp.dtype": "bfloat16"}.

    Values are TOML values; a bare word that is not valid TOML (bfloat16, cpu) is taken as a
    string so the common case needs no quotes.
    """
    overrides: dict[str, Any] = {}
    for item in assignments:
        match = _SET_RE.match(item)
        if not match:
            raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. amp.dtype=bfloat16")
        section, name, raw = match.group(1), match.group(2), match.group(3).strip()
        key = f"{section}.{name}"
        schema_key(key, "--set")
        if raw == "":
            raise ConfigError(f"--set {key}: missing value after '='")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            if re.fullmatch(r"[A-Za-z0-9_.:/+\-]+", raw):
                value = raw
            else:
                raise ConfigError(f"--set {key}: {raw!r} is not a TOML value (quote strings: {key}='\"...\"')") from None
        overrides[key] = value
    return overrides


def flatten(doc: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A preset document -> {"section.key": value}, refusing unknown sections and keys."""
    flat: dict[str, Any] = {}
    for section, table in doc.items():
        if section not in SCHEMA:
            raise ConfigError(f"{source}: unknown section [{shown_name(section)}] (known: {', '.join(SCHEMA)})")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: {section} must be a table [{section}], not a value")
        extra = {}
        for name, value in table.items():
            key = f"{section}.{name}"
            if section == "model" and table.get("factory") and name not in SCHEMA["model"]:
                extra[name] = value  # a user model's own keyword arguments
                continue
            schema_key(key, source)
            flat[key] = value
        if extra:
            flat["model.args"] = {**table.get("args", {}), **extra} if isinstance(table.get("args", {}), dict) else extra
    return flat


def build_config(base: Config | Mapping[str, Mapping[str, Any]] | None = None,
                 overrides: Mapping[str, Any] | None = None,
                 *, source: str = "preset", overrides_source: str = "--set") -> Config:
    """defaults <- base (a preset document, a config dict or a Config) <- overrides ({"a.b": v}) -> Config."""
    values = defaults()
    below = base.flat() if isinstance(base, Config) else flatten(base or {}, source)
    for layer, where in ((below, source), (dict(overrides or {}), overrides_source)):
        for dotted, value in layer.items():
            section, name = dotted.split(".", 1)
            values[section][name] = check_value(dotted, value, where)
            check_range(dotted, values[section][name], where)  # blamed on the layer that set it
    cfg = Config._of(values)
    try:
        _check_combinations(cfg, source)
    except ConfigError:
        if not overrides:
            raise
        build_config(base, source=source)  # the preset alone is wrong: this raises, naming it
        _check_combinations(cfg, overrides_source)  # else the overrides made it so: name them
        raise
    return cfg


def _check_combinations(cfg: Config, source: str) -> None:
    """Rules across keys that need no hardware knowledge (those live in launch.preflight)."""
    model, data, dist, debug = cfg.model, cfg.data, cfg.dist, cfg.debug
    layers.check_rules(cfg.amp.layers, source)
    autopilot.parse(cfg.amp.autopilot, source)
    if problem := notify_url_problem(cfg.log.notify_url):
        raise ConfigError(f"{source}: log.notify_url {problem}")
    if model.name == "alexnet" and data.img_size < 63 and not model.factory:
        raise ConfigError(f"{source}: model.name = \"alexnet\" needs data.img_size >= 63 (its feature maps vanish "
                          f"below that), got {data.img_size}")
    if dist.node_rank >= dist.nnodes:
        raise ConfigError(f"{source}: dist.node_rank ({dist.node_rank}) must be < dist.nnodes ({dist.nnodes})")
    if debug.fail_rank >= world_size(cfg) and debug.fail_at_step:
        raise ConfigError(f"{source}: debug.fail_rank ({debug.fail_rank}) must be < the world size "
                          f"({world_size(cfg)})")
    for dotted, ref in (("model.factory", model.factory), ("data.factory", data.factory)):
        if ref and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", ref):
            raise ConfigError(f"{source}: {dotted} = {ref!r} must look like \"package.module:function\"")
        if ref and _builtin_module(ref):
            raise ConfigError(f"{source}: {dotted} = {ref!r} names {_builtin_module(ref)}, not your code: a factory "
                              "cannot take the name of a module built into Python or amptui; name your own module")
    if model.factory or data.factory:
        return  # the user's code decides what fits together
    if data.name == "random" and model.name not in ("mlp", "planlab"):
        raise ConfigError(f"{source}: data.name = \"random\" (regression tensors) needs model.name = \"mlp\"")
    if model.name in ("mlp", "planlab") and data.name != "random":
        raise ConfigError(f"{source}: model.name = \"{model.name}\" trains on data.name = \"random\"")
    if model.pretrained and model.name not in ("alexnet", "resnet18"):
        raise ConfigError(f"{source}: model.pretrained needs model.name alexnet or resnet18")
    if (data.name == "text") != (model.name == "gpt"):
        raise ConfigError(f"{source}: model.name = \"gpt\" and data.name = \"text\" go together (got model.name = "
                          f"\"{model.name}\", data.name = \"{data.name}\")")
    if model.name == "gpt" and model.n_embd % model.n_head:
        raise ConfigError(f"{source}: model.n_embd ({model.n_embd}) must be a multiple of model.n_head "
                          f"({model.n_head})")


def _builtin_module(ref: str) -> str:
    """"Python's os module" when a factory's module is one built into Python (the standard library)
    or amptui's own, else "": a factory is the user's code, so such a name is either a mistake or a
    way to run what a preset only pretends is a model (`os:system`)."""
    top = ref.partition(":")[0].split(".")[0]
    if top == "amptui":
        return f"amptui's own {ref.partition(':')[0]}"
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return f"Python's {top} module"
    return ""


def resolve_num_workers(cfg: Config, cpus: int | None = None) -> int:
    """data.num_workers for this machine: as given, or for "auto" none when the data is made on the
    device (synthetic, random), else min(8, CPU cores per process on this machine - 1)."""
    data = cfg.data
    if data.num_workers != "auto":
        return int(data.num_workers)
    if data.name in ("synthetic", "random") and not data.factory:
        return 0
    if cpus is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    dist = cfg.dist
    per_node = dist.nproc_per_node if dist.mode in TORCHRUN_MODES else 1
    return max(0, min(8, cpus // per_node - 1))


TORCHRUN_MODES = ("ddp", "fsdp")  # the dist.mode values launched under torchrun, one process per rank


def world_size(cfg: Config) -> int:
    dist = cfg.dist
    return dist.nproc_per_node * dist.nnodes if dist.mode in TORCHRUN_MODES else 1


def to_toml(values: Mapping[str, Mapping[str, Any]], header: str = "") -> str:
    """TOML whose only line break is "\n" and which holds no unprintable character: tomli_w keeps
    U+2028, U+0085, bidi overrides, no-break spaces raw inside strings, which YAML (a SkyPilot task
    embedding the preset) reads as line breaks and a terminal shows as a space. Every one is
    written as its \\u escape instead (only strings can hold them): the same TOML value."""
    import tomli_w

    text = escape_unprintable(tomli_w.dumps({s: dict(v) for s, v in values.items()}))
    return (escape_unprintable(header) + "\n" + text) if header else text


def escape_unprintable(text: str) -> str:
    """Every character but "\n" that is not printable (str.isprintable: controls, line and
    paragraph separators, format characters, spaces other than " ") as a \\uXXXX escape."""
    return "".join(c if c == "\n" or c.isprintable() else
                   (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}") for c in text)


def minimal(values: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Only the keys that differ from the defaults: what a saved preset needs to say."""
    base = defaults()
    out: dict[str, dict[str, Any]] = {}
    for section, keys in values.items():
        diff = {k: v for k, v in keys.items() if base[section].get(k) != v}
        if diff:
            out[section] = diff
    return out


