"""The runs folders this user has used, so a dashboard opened anywhere can find runs made elsewhere.

Every run folder amptui makes (`amptui run`, A/B, tune trials, a Monitor, a script run) records its
runs folder in amptui's state directory: $XDG_STATE_HOME/amptui/runs-folders.json (default
~/.local/state/amptui/), {"format": 1, "folders": {"/abs/path": last used, unix seconds}}. The file
is bounded (the MAX_FOLDERS most recently used), written atomically under a lock, and a missing or
damaged file counts as empty: recording is a convenience and never fails a run.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from pathlib import Path

from amptui.core import safefile

FORMAT = 1
MAX_FOLDERS = 50
_MAX_BYTES = 256 * 1024


def record_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "amptui" / "runs-folders.json"


def _read() -> dict[str, float]:
    try:
        data = safefile.load_json(record_path(), _MAX_BYTES)
        folders = data["folders"] if isinstance(data, dict) and data.get("format") == FORMAT else {}
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return {}
    if not isinstance(folders, dict):
        return {}
    return {p: float(t) for p, t in folders.items()
            if isinstance(p, str) and os.path.isabs(p) and isinstance(t, (int, float))
            and not isinstance(t, bool) and math.isfinite(t)}


def remember(root: Path | str) -> None:
    """Record `root` as used now (silently nothing where the state directory cannot be written)."""
    path = record_path()
    try:
        where = os.path.realpath(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            folders = _read()
            folders[where] = time.time()
            kept = dict(sorted(folders.items(), key=lambda kv: kv[1], reverse=True)[:MAX_FOLDERS])
            safefile.atomic_write_text(path, json.dumps({"format": FORMAT, "folders": kept}, indent=1) + "\n")
    except OSError:
        pass


def used_folders(existing: bool = True) -> list[Path]:
    """The runs folders recorded, most recently used first (only those still there: `existing`)."""
    folders = sorted(_read().items(), key=lambda kv: kv[1], reverse=True)
    return [Path(p) for p, _ in folders if not existing or os.path.isdir(p)]
