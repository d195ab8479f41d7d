"""amptui's own settings file, `$XDG_CONFIG_HOME/amptui/config.toml` (else ~/.config/amptui/):
the dashboard's keymap, by action name. Optional; a bad one is refused with one line naming the
file and key, so the dashboard never opens with keys the user did not mean.

    [keymap]
    "home.run" = "ctrl+r"          # the key(s), comma-separated, as Textual names them
    "run.stop" = "S"

The dashboard checks the action names (dashboard/keymap.py); this room only reads the file and
checks its shape. What the dashboard remembers for itself (the theme) is state, not settings: it
lives in `state_file()`, beside the other state amptui keeps.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from amptui.core import safefile
from amptui.core.config.values import read_toml
from amptui.core.errors import ConfigError

SECTIONS = ("keymap",)
STATE_LIMIT = 64 * 1024
# Textual key names: letters, digits, "+" for modifiers, "_" in names like question_mark; or one
# printable character ("/", "?", "R"). Several keys are separated by commas.
_KEY_RE = re.compile(r"^(?:[A-Za-z0-9_+]+|[!-~])$")


def config_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "amptui" / "config.toml"


def state_file(name: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "amptui" / name


@dataclass(frozen=True)
class UserConfig:
    keymap: dict[str, str] = field(default_factory=dict)  # action name -> "key[,key...]"
    path: Path | None = None                              # the file read (None: there is none)


def load(path: Path | None = None) -> UserConfig:
    """The settings file, checked for shape (a missing file is the defaults)."""
    path = path or config_file()
    if not os.path.lexists(path):
        return UserConfig()
    doc = read_toml(path, follow_links=True)  # the user's own file: their link is theirs
    for section in doc:
        if section not in SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}] (known: {', '.join(SECTIONS)})")
    keymap = doc.get("keymap", {})
    if not isinstance(keymap, dict):
        raise ConfigError(f"{path}: keymap: must be a table of action = \"key\" lines")
    for action, keys in keymap.items():
        if not isinstance(keys, str) or not keys.strip():
            raise ConfigError(f"{path}: keymap.{action}: must be a key name in quotes, e.g. \"ctrl+r\"")
        for key in keys.split(","):
            if not _KEY_RE.match(key.strip()):
                raise ConfigError(f"{path}: keymap.{action}: {key.strip()!r} is not a key name "
                                  "(e.g. \"r\", \"R\", \"ctrl+r\", \"f5\", \"/\")")
    return UserConfig(keymap={a: ",".join(k.strip() for k in v.split(",")) for a, v in keymap.items()}, path=path)


def read_state(name: str) -> dict:
    """A small JSON state file (a missing or damaged one reads as empty: state is a convenience)."""
    try:
        value = safefile.load_json(state_file(name), STATE_LIMIT)
    except (OSError, ValueError, safefile.UnsafeFile):
        return {}
    return value if isinstance(value, dict) else {}


def write_state(name: str, value: dict) -> None:
    """Replace a state file atomically; a failure to write is silent (the state is only remembered)."""
    import json

    path = state_file(name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        safefile.atomic_write_text(path, json.dumps(value, sort_keys=True))
    except (OSError, safefile.UnsafeFile):
        pass
