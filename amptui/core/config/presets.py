"""Built-in and saved presets: finding them by name or path, loading, saving atomically."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from amptui.core.config import values as cfgmod
from amptui.core.config.scriptsets import preset_script_refusal
from amptui.core.errors import ConfigError, UserError
from amptui.core.fmt import shown
from amptui.core.safefile import atomic_write_text as atomic_write_text  # importable from here for older callers

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "presets"  # amptui/presets
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
DESCRIPTION_SHOWN = 500  # a list shows the start of a description (the file keeps it whole)


def saved_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "amptui" / "presets"


@dataclass(frozen=True)
class Preset:
    name: str
    path: Path
    builtin: bool
    description: str = ""

    def document(self) -> dict[str, Any]:
        """The preset's TOML document, checked against the schema (unknown keys refused)."""
        doc = cfgmod.read_toml(self.path, follow_links=True)
        cfgmod.flatten(doc, str(self.path))
        refuse_script(doc, str(self.path))
        return doc

    def config(self, overrides: Mapping[str, Any] | None = None) -> cfgmod.Config:
        values = self.document()
        cfg = cfgmod.build_config(values, overrides, source=str(self.path))
        if not cfg.run.name:
            cfg = cfg.with_overrides({"run.name": self.name}, source=str(self.path))
        return cfg


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or ".." in name:
        raise UserError(f"preset name {name!r}: use letters, digits, '-', '_', '.', '+' (at most 64), "
                        "no path separators")
    return name


def refuse_script(doc: Mapping[str, Any], source: str) -> None:
    """A preset is amptui's trainer's config: one naming `run.script` is refused (ConfigError, one
    line), as the rest of it would be silently ignored (core/config/scriptsets.py says why)."""
    run = doc.get("run")
    refusal = preset_script_refusal(source, run.get("script") if isinstance(run, Mapping) else None)
    if refusal:
        raise ConfigError(refusal)


def _describe(path: Path) -> str:
    """The preset's description, or why it will not load (so a list shows broken files as such)."""
    try:
        doc = cfgmod.read_toml(path, follow_links=True)
        cfgmod.build_config(doc, source=str(path))
        refuse_script(doc, str(path))
    except ConfigError as exc:
        return shown("(invalid: " + str(exc).removeprefix(f"{path}: ") + ")")
    return shown(doc.get("run", {}).get("description", ""))[:DESCRIPTION_SHOWN]


def list_presets() -> list[Preset]:
    """Built-ins first (sorted, quickstart on top), then saved presets; a saved preset never hides a
    built-in of the same name."""
    found: list[Preset] = []
    builtin = sorted(BUILTIN_DIR.glob("*.toml"), key=lambda p: (p.stem != "quickstart", p.stem))
    names = set()
    for path in builtin:
        found.append(Preset(path.stem, path, True, _describe(path)))
        names.add(path.stem)
    directory = saved_dir()
    if directory.is_dir():
        for path in sorted(directory.glob("*.toml")):
            if path.stem not in names and NAME_RE.match(path.stem):  # else not a name `run` could take
                found.append(Preset(path.stem, path, False, _describe(path)))
    return found


def find_preset(ref: str) -> Preset:
    """A built-in name, a saved name, or a path to a .toml file."""
    if ref.endswith(".toml") or os.sep in ref:
        path = Path(ref).expanduser()
        try:
            found = path.is_file()
        except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
            found = False
        if not found:
            raise UserError(f"preset file {ref!r}: no such file")
        return Preset(path.stem, path, False, _describe(path))
    for preset in list_presets():
        if preset.name == ref:
            return preset
    names = [p.name for p in list_presets()]
    close = difflib.get_close_matches(ref, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UserError(f"no preset named {ref!r}: {hint}(known: {', '.join(names)}; or give a path to a .toml file)")


def is_builtin(name: str) -> bool:
    return (BUILTIN_DIR / f"{name}.toml").exists()


def save_preset(name: str, cfg: cfgmod.Config, *, force: bool = False, source: str = "") -> Path:
    """Write the keys of `cfg` that differ from the defaults to the saved-presets folder, atomically."""
    check_name(name)
    if is_builtin(name):
        raise UserError(f"preset {name!r} is built in; choose another name")
    refuse_script(cfg.to_dict(), f"preset {name!r}")  # it would not load again
    directory = saved_dir()
    target = directory / f"{name}.toml"
    if target.exists() and not force:
        raise UserError(f"preset {name!r} already exists at {target}; use --force to overwrite")
    body = cfgmod.minimal(_with_own_description(cfg.to_dict(), source))  # a Config: valid, so it loads again
    header = f"# amptui preset {name!r}" + (f", saved from {source}" if source else "")
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, cfgmod.to_toml(body, header))
    return target


def delete_preset(name: str) -> Path:
    """Remove a saved preset's file (built-ins are refused). The folder entry itself is removed: a
    link there is unlinked, its target left alone; anything but a file or a link is refused."""
    import stat

    check_name(name)
    if (BUILTIN_DIR / f"{name}.toml").exists():
        raise UserError(f"preset {name!r} is built in and cannot be deleted (saved presets can: "
                        "see `amptui presets list`)")
    target = saved_dir() / f"{name}.toml"
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        saved = [p.name for p in list_presets() if not p.builtin]
        raise UserError(f"no saved preset named {name!r} in {saved_dir()}"
                        + (f" (saved: {', '.join(saved)})" if saved else " (none saved)")) from None
    except OSError as exc:
        raise UserError(f"{target}: cannot read: {exc.strerror or exc}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UserError(f"{target} is not a preset file; remove it by hand if it should go")
    try:
        os.unlink(target)  # never follows a link: the link goes, what it points to stays
    except OSError as exc:
        raise UserError(f"{target}: cannot delete: {exc.strerror or exc}") from None
    return target


def _with_own_description(out: dict[str, dict[str, Any]], source: str) -> dict[str, dict[str, Any]]:
    """A saved preset describes itself ("quickstart with amp.dtype=bfloat16"), unless its
    description was edited: the parent's description no longer says what it is."""
    if not source:
        return out
    try:
        parent = find_preset(source).config().to_dict()
    except UserError:
        return out
    if out.get("run", {}).get("description", "") not in ("", parent["run"]["description"]):
        return out
    out.setdefault("run", {})["description"] = describe_changes(source, parent, out)
    return out


def describe_changes(source: str, parent: Mapping[str, Mapping[str, Any]],
                     values: Mapping[str, Mapping[str, Any]], most: int = 3) -> str:
    """"P with a.b=1, c.d=x" for the keys where `values` differ from the preset P's."""
    changes = [f"{section}.{key}={_shown_value(value)}" for section, keys in values.items()
               for key, value in keys.items()
               if (section, key) not in (("run", "name"), ("run", "description"))
               and parent.get(section, {}).get(key) != value]
    if not changes:
        return f"copy of {source}"
    more = f" and {len(changes) - most} more" if len(changes) > most else ""
    return f"{source} with {', '.join(changes[:most])}{more}"


def _shown_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)
