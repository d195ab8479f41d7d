"""Managing runs from a UI: delete, why a resume would be refused, the equivalent command line,
what two runs' configs differ in, the runs folder check, exporting a compare table.

No torch here (the dashboard imports this): the checks that need torch stay in `launch`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amptui.core.config import presets as presetmod
from amptui.core.config import values as cfgmod
from amptui.core.config.scriptsets import SCRIPT_SETTABLE, script_option
from amptui.core.errors import UserError
from amptui.core.run import runlock, trust
from amptui.core.run import runs as runsmod
from amptui.core.run.runfiles import RunFolder
from amptui.core.safefile import atomic_write_text
from amptui.core.tunenames import is_trial


def runs_folder_problem(root: Path) -> str | None:
    """Why runs cannot be created in `root` (a file in the way), in one line; None if they can.
    (The dashboard asks before launching: the folder may have changed since it opened.)"""
    root = Path(root)
    if root.exists() and not root.is_dir():
        return f"runs folder {root} is a file, not a folder; start amptui with --runs-dir DIR (or AMPTUI_RUNS_DIR)"
    return None


@dataclass(frozen=True)
class ResumeHints:
    """How the asking interface names the actions a refusal points to."""

    stop: str       # "{run_id}" is filled in
    new_run: str


CLI_HINTS = ResumeHints(stop="amptui stop {run_id}", new_run="`amptui run`")
DASHBOARD_HINTS = ResumeHints(stop="s on its run screen", new_run="r")


def resume_refusal(run_dir: Path, info: runsmod.RunInfo | None = None,
                   hints: ResumeHints = DASHBOARD_HINTS) -> str | None:
    """Why `amptui resume` would refuse this run, or None when it would take it up. Cheap (no
    checkpoint is read, no torch), so views suggest a resume only where one works; the resume
    itself (`startchecks.check_resumable`) asks this first, then checks that the checkpoint fits."""
    run_dir = Path(run_dir)
    info = info or runsmod.load_run(run_dir)
    if info.status == "running":
        return f"run {info.run_id} is still running; stop it first ({hints.stop.format(run_id=info.run_id)})"
    try:
        script = RunFolder(run_dir).load_config().run.script
    except UserError as exc:
        return str(exc)
    if script:
        return f"run {info.run_id} ran your own script; resume it the way that script resumes"
    if is_trial(info.preset):
        return (f"run {info.run_id} is a trial of a tune: a trial is not resumed by itself; run the tune "
                "again, or its winner as a preset")
    if info.status == "completed":
        return f"run {info.run_id} has completed; start a new one with {hints.new_run}"
    if not RunFolder(run_dir).checkpoint.is_file():
        return (f"run {info.run_id} has no checkpoint to resume from (it ended {info.status} before its first "
                f"checkpoint); start it again with {hints.new_run}")
    return None


def delete_run(run_dir: Path, alive=runsmod.process_alive) -> None:
    """Remove a run's folder, holding its lock across the removal: a live writer (whatever its
    run.json says) is refused, and no resume can start in a half-removed folder. The folder is
    first renamed out of the way (atomic), then removed. `alive`: for folders from before the lock
    file, run.json's pid check."""
    run_dir = Path(run_dir)
    run = RunFolder(run_dir)
    if not run.is_run():
        raise UserError(f"{run_dir} is not a run folder")
    legacy = not os.path.lexists(run.lock)
    try:
        lock = runlock.acquire(run_dir)
    except runlock.RunLocked:
        raise UserError(f"run {run_dir.name} is running; stop it before deleting it") from None
    with lock:
        ended = runsmod.load_run(run_dir, own_lock=True).status != "killed"  # killed: no end record
        # No end record and a free lock: a writer whose lock file was removed may still live. Its
        # recorded pids, each with its start time, decide (run.json's; the last start record's).
        # (Another host's pid is judged by the lock alone, unless the folder predates locks.)
        launch = runsmod.read_launch_info(run_dir)
        here = launch.get("host") in (None, socket.gethostname())
        if not ended and ((legacy or here) and alive(launch) or session_writer_alive(run_dir)):
            if legacy:
                run.lock.unlink(missing_ok=True)  # refused: leave the folder as it was
            raise UserError(f"run {run_dir.name} is running (its process lives, though it holds no lock); "
                            "stop it before deleting it")
        trust.forget(run_dir, trust.run_code(run_dir))
        doomed = run_dir.with_name(f".deleting-{run_dir.name}-{os.getpid()}")
        os.rename(run_dir, doomed)  # from here no command finds the run
        shutil.rmtree(doomed, ignore_errors=True)
    if doomed.exists():
        raise UserError(f"run {run_dir.name} is gone from the list, but {doomed} could not be removed entirely")


def session_writer_alive(run_dir: Path) -> bool:
    """Is the process that wrote the run's last `start` record alive on this host? Only a process
    created before that record can have written it: a later one that reuses the pid did not."""
    from amptui.core.stream.eventends import read_ends
    from amptui.core.stream.events import primary_events_file
    from amptui.core.stream.records import Start

    starts = [r for r in read_ends(primary_events_file(run_dir)).records() if isinstance(r, Start)]
    if not starts:
        return False
    start = starts[-1]
    pid, t = start.get("pid"), start.get("t")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(t, (int, float)):
        return False
    if start.get("host") not in (None, socket.gethostname()):
        return False  # written elsewhere: its lock (shared with this host or not) is all we can go by
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.create_time() <= t + 1.0
    except psutil.Error:
        return False


def toml_value(value: Any) -> str:
    """A value as `--set` expects it (a TOML value)."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def equivalent_command(run_dir: Path, runs_display: str | None = None) -> str:
    """`amptui run PRESET --set ...` that starts a run with this run's config (resolved for the
    machine it ran on: auto values are shown as decided); for a script run, `amptui run --script
    FILE` (or -m MODULE) with the keys a script run takes (its arguments are not in the config)."""
    cfg = RunFolder(run_dir).load_config()
    if cfg.run.script:
        return _script_command(cfg, runs_display)
    name = cfg.run.name
    try:
        preset = presetmod.find_preset(name) if name else None
        base = preset.config().flat() if preset else cfgmod.Config().flat()
        ref = preset.name if preset and preset.builtin else (str(preset.path) if preset else "")
    except UserError:
        preset, base, ref = None, cfgmod.Config().flat(), ""
    words = ["amptui", "run"] + ([ref] if ref else [])
    for key, value in cfg.flat().items():
        if key == "run.name" and preset is not None:
            continue
        if base.get(key) != value:
            words += ["--set", f"{key}={toml_value(value)}"]
    if runs_display:
        words += ["--runs-dir", runs_display]
    return " ".join(shlex.quote(w) for w in words)


def _script_command(cfg: cfgmod.Config, runs_display: str | None) -> str:
    """`amptui run --script FILE --set ...` (or -m MODULE) for a script run: only the keys a script
    run takes (core/config/scriptsets.py); its own loop decided the rest. Its arguments are not in
    the config, so none are shown."""
    flat, defaults = cfg.flat(), cfgmod.Config().flat()
    words = ["amptui", "run", *script_option(cfg.run.script)]
    for key in SCRIPT_SETTABLE:
        if flat[key] != defaults[key]:
            words += ["--set", f"{key}={toml_value(flat[key])}"]
    if runs_display:
        words += ["--runs-dir", runs_display]
    return " ".join(shlex.quote(w) for w in words)


def export_compare(root: Path, text: str, fmt: str) -> Path:
    """Write a compare table into the runs folder; returns the file written."""
    problem = runs_folder_problem(root)
    if problem:
        raise UserError(problem)
    root = Path(root)
    suffix = {"markdown": "md", "csv": "csv"}[fmt]
    path = root / f"compare-{time.strftime('%Y%m%d-%H%M%S')}.{suffix}"
    n = 1
    while path.exists():
        n += 1
        path = root / f"compare-{time.strftime('%Y%m%d-%H%M%S')}-{n}.{suffix}"
    atomic_write_text(path, text if text.endswith("\n") else text + "\n")
    return path


def gpu_count_guess() -> int:
    """CUDA GPUs this machine shows, without importing torch (for marking toggles at once; the
    launcher's preflight has the last word)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        count = len(list(Path("/proc/driver/nvidia/gpus").iterdir()))
    except OSError:
        count = 0
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        count = min(count, len(ids))
    return count
