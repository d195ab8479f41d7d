"""A script run's exit, as its launcher saw it: the exit code amptui passes on, and the `end` record
the launcher writes when the script's process ended without one.

`sys.exit(3)` is seen by the script's own process (jobs/scriptrun.py writes `failed`, "exit code
3"); `os._exit(5)` and a signal end the process before anything of it runs, so the launcher that
waited on it writes the end record instead (under the run's lock, which the dead process let go).
"""

from __future__ import annotations

import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from amptui.core.config import values as cfgmod
from amptui.core.errors import ConfigError, UserError
from amptui.core.events import EventReader, EventWriter
from amptui.core.records import End, ErrorInfo
from amptui.core.run import runlock
from amptui.core.run.runfiles import RunFolder


def lone_script(run_dir: Path) -> bool:
    """A script run in one process (under torchrun its supervisor writes the run's end itself)."""
    try:
        raw = cfgmod.read_toml(RunFolder(run_dir).config)
    except (ConfigError, OSError):
        return False
    run, dist = raw.get("run"), raw.get("dist")
    mode = dist.get("mode") if isinstance(dist, dict) else None
    return isinstance(run, dict) and bool(run.get("script")) and mode not in cfgmod.TORCHRUN_MODES


def shell_code(returncode: int) -> int:
    """The exit code as a shell reports it: a death by signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def exit_words(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name} (exit code {shell_code(returncode)})"
    return f"exit code {returncode}"


def record_exit(run_dir: Path, offset: int, started: float, returncode: int) -> dict[str, Any] | None:
    """Write the `end` record of a script whose process ended (`returncode`, as Popen says it)
    without one: `failed` with its exit code or signal. None when it could not be written (another
    process has taken the run since, or the disk refuses)."""
    path = RunFolder(run_dir).events
    seen = EventReader(path, offset=offset).read()
    steps = [r["step"] for r in seen if r.get("kind") == "step" and isinstance(r.get("step"), int)]
    error = ErrorInfo("Exit" if returncode >= 0 else "Signal", exit_words(returncode), 0)
    try:
        with runlock.acquire(run_dir), EventWriter(path) as writer:
            return writer.write(End(status="failed", total_time_s=time.time() - started,
                                    steps=max(steps, default=0), error=asdict(error)))
    except (OSError, UserError):  # RunLocked: someone resumed it meanwhile
        return None
