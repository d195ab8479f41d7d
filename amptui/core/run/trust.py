"""The trust boundary: a preset or a run folder whose config names code runs that code.

Three keys name code: `model.factory`, `data.factory` ("package.module:function", imported and
called by the trainer) and `run.script` (a Python file amptui starts). A preset you run is your
choice, so `amptui run PRESET` runs its code. A run folder is data that can come from anywhere (a
copy from another machine, a shared disk), so `amptui resume` runs the code its config names only
when that code was given on this machine, or when you say so (a question on a terminal, or
`--trust-code`; the dashboard asks in a dialog).

"Given on this machine": when amptui creates a run folder whose config names code, it records a
digest of (the folder's real path, its device and inode, the code keys and their values) in
amptui's state folder ($XDG_STATE_HOME/amptui/trusted-code/, else ~/.local/state/amptui/...). A
copied folder has another inode; a config.toml edited to name other code has another digest:
neither is found. Stdlib only (the dashboard and `amptui runs` ask this for every run).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder
from amptui.core.statedir import state_home

if TYPE_CHECKING:
    from amptui.core.config.values import Config

CODE_KEYS = ("model.factory", "data.factory", "run.script")
TRUST_FLAG = "--trust-code"


def state_dir() -> Path:
    return state_home() / "trusted-code"


def code_refs(cfg: Config) -> list[str]:
    """The code a config names, as `key = "value"` lines ([] for none)."""
    named = {"model.factory": cfg.model.factory, "data.factory": cfg.data.factory, "run.script": cfg.run.script}
    return [f"{dotted} = {str(named[dotted])!r}" for dotted in CODE_KEYS if named[dotted]]


def _digest(run_dir: Path, refs: list[str]) -> str | None:
    try:
        real = os.path.realpath(run_dir)
        st = os.stat(real)
    except OSError:
        return None
    text = "\0".join([real, str(st.st_dev), str(st.st_ino), *sorted(refs)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def remember(run_dir: Path, refs: list[str]) -> None:
    """Record that this machine's user gave `refs` for this run folder (a failure to write is
    silent: the resume will ask instead)."""
    digest = _digest(run_dir, refs) if refs else None
    if digest is None:
        return
    try:
        folder = state_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        (folder / digest).write_text(f"{os.path.realpath(run_dir)}\n" + "\n".join(refs) + "\n")
    except OSError:
        pass


def forget(run_dir: Path, refs: list[str]) -> None:
    """Drop a run folder's record (the folder is being deleted)."""
    digest = _digest(run_dir, refs) if refs else None
    if digest is not None:
        try:
            (state_dir() / digest).unlink(missing_ok=True)
        except OSError:
            pass


def given_here(run_dir: Path, refs: list[str]) -> bool:
    """Was this code given for this very folder on this machine? (True when it names none.)"""
    if not refs:
        return True
    digest = _digest(run_dir, refs)
    return digest is not None and (state_dir() / digest).is_file()


def run_code(run_dir: Path) -> list[str]:
    """The code a run folder's config.toml names; [] when it names none or cannot be read (the
    command that reads it says why)."""
    try:
        return code_refs(RunFolder(run_dir).load_config())
    except (UserError, OSError, RecursionError):
        return []


def foreign_code(run_dir: Path) -> list[str]:
    """The code a run folder names that was not given on this machine ([] for none)."""
    refs = run_code(run_dir)
    return [] if given_here(run_dir, refs) else refs


def refusal(run_dir: Path, refs: list[str]) -> str:
    """The one line a resume without consent prints."""
    return (f"run {Path(run_dir).name} names code that was not given on this machine ({'; '.join(refs)}); "
            f"resuming runs it as you: look at {RunFolder(run_dir).config}, then resume with {TRUST_FLAG}")


def mark(refs: list[str], given_here: bool) -> str:
    """What run lists add to a run's preset: "" (no code), "[code]" (given on this machine) or
    "[foreign code]" (a resume asks first)."""
    if not refs:
        return ""
    return "[code]" if given_here else "[foreign code]"


def question(run_id: str, refs: list[str]) -> str:
    """What a resume asks before it runs code not given on this machine."""
    return (f"Run {run_id} names code that was not given on this machine:\n  " + "\n  ".join(refs) +
            "\nResuming it imports and runs that code as you. Resume?")
