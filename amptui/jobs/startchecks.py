"""What `launch.start` refuses before a trainer starts in a run folder, each in one line
(UserError) and before anything there is written: a folder a trainer could not write, or would
write outside of through a link, and a resume that cannot continue (a finished or damaged run, no
checkpoint, a config.toml the checkpoint no longer fits, data no longer there).

Its own room so that launch.py keeps to starting and stopping processes: these only read the
folder (and, through `check_checkpoint`, last.pt), and start nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from amptui.core import safefile
from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.core.prepare import preflight
from amptui.core.run import checkpoints, runlock, runops, runs
from amptui.core.run.runfiles import CONFIG_FILE, EVENTS_FILE, OUTPUT_LOG, RUN_JSON, STOP_FILE, RunFolder

# A check that reads a run's last.pt (torch: the trainer's layer provides it) and raises UserError
# when a resume cannot continue from it; called with the run folder and its current config.
CheckpointCheck = Callable[[Path, cfgmod.Config], None]

# Files a trainer writes into its run folder: each must be a regular file or absent, checked
# before a trainer starts (a folder or a link in their place would fail it, or lead it outside).
_WRITTEN = (RUN_JSON, OUTPUT_LOG, EVENTS_FILE, CONFIG_FILE, STOP_FILE)


def check_run_files(run_dir: Path) -> None:
    """Refuse (UserError, one line) a run folder a trainer could not write, or would write
    outside of through a link: checked before anything is started or written."""
    if run_dir.is_symlink():
        raise UserError(f"run {run_dir.name}: its folder is a symbolic link; copy the run instead")
    names = [*_WRITTEN, *(p.name for p in run_dir.glob("events.rank*.jsonl"))]
    try:
        for name in names:
            safefile.check_regular(run_dir / name)
        run = RunFolder(run_dir)
        for folder in (run.checkpoints, run_dir / "tensorboard"):
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                raise safefile.UnsafeFile(f"{folder}: not a folder (a link or a file)")
        for path in (run.checkpoint, run.checkpoint_info):
            safefile.check_regular(path)
    except safefile.UnsafeFile as exc:
        raise UserError(f"run {run_dir.name}: {exc}; move it away to use this run") from None


def refuse_resume_early(run_dir: Path) -> None:
    """A resume that would be refused (completed, no checkpoint, damaged config) writes nothing:
    not even the lock's record. A live run is left to the lock, whose refusal names the holder."""
    info = runs.load_run(run_dir)
    refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS) if info.status != "running" else None
    if refusal:
        raise UserError(refusal)


def check_resumable(run_dir: Path, locked: bool = False,
                    check_checkpoint: CheckpointCheck | None = None) -> runs.RunInfo:
    """Refuse (UserError, one line) a resume that cannot work. `locked`: the caller holds the
    run's lock (launch.start does), so no other writer can start meanwhile. `check_checkpoint`
    reads last.pt itself when its last.json does not describe it (see core/run/checkpoints.py)."""
    info = runs.load_run(run_dir, own_lock=locked)
    if info.status == "running":
        raise runlock.RunLocked(runlock.in_use_message(run_dir, fallback={"pid": info.pid}))
    refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS)
    if refusal:
        raise UserError(refusal)
    current = RunFolder(run_dir).load_config()
    _check_checkpoint_fits(run_dir, current, check_checkpoint)
    # The machine may have changed since: the same checks as a new run.
    preflight.check_data(current)
    return info


def _check_checkpoint_fits(run_dir: Path, current: cfgmod.Config,
                           check_checkpoint: CheckpointCheck | None) -> None:
    """Refuse a resume whose config.toml no longer describes what the checkpoint holds: from
    last.json when it describes last.pt and the code that wrote it is this code, else by
    `check_checkpoint` (which reads last.pt: its tensors must still fit the model)."""
    run = RunFolder(run_dir)
    directory = run.checkpoints
    info = checkpoints.read_info(directory)
    if info is not None and info.get("code") == checkpoints.code_fingerprint():
        checkpoints.check_config_fits(run_dir.name, info.get("config"), current.to_dict())
    elif check_checkpoint is not None:
        check_checkpoint(run_dir, current)
    else:
        raise UserError(f"run {run_dir.name}: cannot check {run.checkpoint} here: "
                        f"{checkpoints.stale_reason(directory)}; resume it with `amptui resume {run_dir.name}`")
