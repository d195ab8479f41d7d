"""The runs folders this user has used, so a dashboard opened anywhere can find runs made elsewhere.

Every run folder amptui makes (`amptui run`, A/B, tune trials, a Monitor, a script run) records its
runs folder in amptui's state directory (core/statedir.py): runs-folders.json,
{"format": 1, "folders": {"/abs/path": last used, unix seconds}}. The file is bounded (the
MAX_FOLDERS most recently used), written atomically under a lock, and a missing or damaged file
counts as empty: recording is a convenience and never fails a run.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from amptui.core import statedir

FORMAT = 1
MAX_FOLDERS = 50
NAME = "runs-folders.json"
_MAX_BYTES = 256 * 1024


def record_path() -> Path:
    return statedir.state_home() / NAME


def _folders(data: Any) -> dict[str, float]:
    folders = data.get("folders") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(folders, dict):
        return {}
    # float() first: an integer too large for a float (400 digits in a damaged file) is no time
    return {p: float(t) for p, t in folders.items()
            if isinstance(p, str) and os.path.isabs(p) and isinstance(t, (int, float))
            and not isinstance(t, bool) and (isinstance(t, float) or abs(t) < 2 ** 63) and math.isfinite(t)}


def remember(root: Path | str) -> None:
    """Record `root` as used now (silently nothing where the state directory cannot be written)."""
    where = os.path.realpath(root)

    def change(data: Any) -> dict[str, Any]:
        folders = _folders(data)
        folders[where] = time.time()
        kept = dict(sorted(folders.items(), key=lambda kv: kv[1], reverse=True)[:MAX_FOLDERS])
        return {"format": FORMAT, "folders": kept}

    statedir.update_json(NAME, change)


def used_folders(existing: bool = True) -> list[Path]:
    """The runs folders recorded, most recently used first (only those still there: `existing`)."""
    folders = sorted(_folders(statedir.read_json(NAME, _MAX_BYTES)).items(), key=lambda kv: kv[1], reverse=True)
    return [Path(p) for p, _ in folders if not existing or os.path.isdir(p)]


NAMED_AT_MOST = 3  # other folders a hint names before "and N more"


def others_hint(root: Path | str) -> str | None:
    """For someone finding no run in `root`: the other runs folders recorded as used (up to
    NAMED_AT_MOST, then "and N more") and the commands that look there; None when there are none."""
    here = os.path.realpath(root)
    others = [str(f) for f in used_folders() if os.path.realpath(f) != here]
    if not others:
        return None
    named = ", ".join(others[:NAMED_AT_MOST]) + (f" and {len(others) - NAMED_AT_MOST} more"
                                                 if len(others) > NAMED_AT_MOST else "")
    return (f"other runs folders used: {named}; `amptui runs --all-folders` lists their runs, "
            "`--runs-dir DIR` picks one")
