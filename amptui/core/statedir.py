"""amptui's state directory: $XDG_STATE_HOME/amptui (default ~/.local/state/amptui). What amptui
remembers for this user between sessions lives here (trusted code, the runs folders used, the
dashboard's toggle edits); everything in it is advice, read as damaged-tolerant JSON."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable

from amptui.core import safefile


def state_home() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "amptui"


def read_json(name: str, limit: int) -> Any:
    """The JSON document `name` of the state directory; None when missing, unreadable or damaged."""
    try:
        return safefile.load_json(state_home() / name, limit)
    except (OSError, ValueError, TypeError, RecursionError):
        return None


def update_json(name: str, change: Callable[[Any], Any]) -> None:
    """Rewrite `name` as `change(its current document or None)`, atomically and under a lock (two
    amptui processes may update it together). Silently nothing where it cannot be written."""
    path = state_home() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            data = change(read_json(name, 1024 * 1024))
            safefile.atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    except OSError:
        pass
