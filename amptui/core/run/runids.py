"""Run ids as people type them: the whole id, any unique prefix (`20261121-2315`), the short tail
the dashboard shows (`8ab8`, `quickstart-8ab8`), or `last` (the newest run).

`resolve_run_dir` is the one resolver every command that takes a run id calls (runs.run_dir
delegates to it). An ambiguous id names the candidates; an id the folder does not hold says so,
pointing at another runs folder only then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from amptui.core.errors import UserError
from amptui.core.run.folders import others_hint, used_folders
from amptui.core.run.runfiles import RunFolder

LAST = "last"
MAX_LISTED = 6            # candidates named in an "ambiguous" message
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$")
_STAMP = re.compile(r"^\d{8}-\d{6}")


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id or "") or ".." in run_id:
        raise UserError(f"{run_id!r} is not a run id (see `amptui runs`)")
    return run_id


def run_ids(root: Path) -> list[str]:
    """The addressable run folders of `root`, oldest first (by the time stamp their ids start with,
    then by when the folder was made)."""
    found = []
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UserError(f"{root}: cannot read the runs folder ({exc.strerror or exc})") from None
    for entry in entries:
        name = entry.name
        if not RUN_ID_RE.match(name) or ".." in name or not entry.is_dir(follow_symlinks=False):  # as runs.list_runs lists them
            continue
        if not RunFolder(Path(entry.path)).is_run():
            continue
        try:
            made = entry.stat().st_ctime
        except OSError:
            made = 0.0
        stamp = _STAMP.match(name)
        found.append((stamp.group(0) if stamp else "", made, name))
    return [name for _, _, name in sorted(found)]


def matching(ids: list[str], text: str) -> list[str]:
    """The ids `text` names: the id itself, else those it begins or ends (at a dash) with."""
    if text in ids:
        return [text]
    return [i for i in ids if i.startswith(text) or i.endswith("-" + text)]


def resolve_run_dir(root: Path, text: str) -> Path:
    """The run folder `text` names in `root` (see the module's docstring); a UserError otherwise."""
    check_run_id(text)
    root = Path(root)
    exact = root / text
    if text != LAST and not exact.is_symlink() and RunFolder(exact).is_run():
        return exact
    ids = run_ids(root)
    if text == LAST:
        if not ids:
            raise UserError(f"`last`: no runs in {root} yet{_elsewhere_hint(root)}")
        return root / ids[-1]
    found = matching(ids, text)
    if len(found) == 1:
        return root / found[0]
    if found:
        listed = ", ".join(found[-MAX_LISTED:][::-1]) + (f" and {len(found) - MAX_LISTED} more"
                                                         if len(found) > MAX_LISTED else "")
        raise UserError(f"run id {text!r} is ambiguous in {root}: it names {len(found)} runs ({listed}); "
                        "give more of it")
    raise UserError(f"no run {text!r} in {root}{_elsewhere_hint(root, text)}")


def _elsewhere_hint(root: Path, text: str | None = None) -> str:
    """Where the user might mean: another runs folder this user has used that holds the run (from
    the state directory's record), else the other folders used, else the generic pointer."""
    if text is not None:
        here = os.path.realpath(root)
        for folder in used_folders():
            if os.path.realpath(folder) == here:
                continue
            try:
                if matching(run_ids(folder), text):
                    return f" (it is in {folder}: add --runs-dir {folder})"
            except UserError:
                continue
    hint = others_hint(root)
    return f" ({hint})" if hint else " (see `amptui runs --runs-dir DIR` for another folder)"
