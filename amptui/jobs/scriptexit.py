"""A run's exit, as its launcher saw it: the exit code amptui passes on, and the `end` record
the launcher writes when the process it started ended without one.

`sys.exit(3)` is seen by the script's own process (jobs/scriptrun.py writes `failed`, "exit code
3"); `os._exit(5)` and a signal end the process before anything of it runs, and a trainer that
cannot even import amptui (a Python that finds it only in the working folder) dies before its
first record: the launcher that waited on it writes the end record instead (under the run's lock,
which the dead process let go), `failed` with the last lines of the run's own output.log.
"""

from __future__ import annotations

import signal
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from amptui.core import safefile
from amptui.core.config import values as cfgmod
from amptui.core.errors import ConfigError, UserError
from amptui.core.run import runlock
from amptui.core.run.runfiles import RunFolder
from amptui.core.stream.events import EventReader, EventWriter
from amptui.core.stream.records import End, ErrorInfo, Step


def lone_script(run_dir: Path) -> bool:
    """A script run in one process (under torchrun its supervisor writes the run's end itself)."""
    try:
        raw = cfgmod.read_toml(RunFolder(run_dir).config)
    except (ConfigError, OSError):
        return False
    run, dist = raw.get("run"), raw.get("dist")
    mode = dist.get("mode") if isinstance(dist, dict) else None
    return isinstance(run, dict) and bool(run.get("script")) and mode not in cfgmod.TORCHRUN_MODES


def launcher_writes_end(run_dir: Path, offset: int, returncode: int) -> bool:
    """Does the launcher write the end of a process that ended (`returncode`) without one? For a
    lone script, always (os._exit, a signal); for amptui's trainer (or torchrun's supervisor) when
    it exited by itself having recorded nothing: it died before its first record (a signal's
    death stays `killed`, as `amptui runs` says it)."""
    if lone_script(run_dir):
        return True
    return returncode > 0 and not EventReader(RunFolder(run_dir).events, offset=offset).read()


OUTPUT_TAIL_BYTES = 4000  # of output.log, read for its last lines (however long the log grew)


def output_tail(run_dir: Path, lines: int = 3) -> list[str]:
    """The last non-empty lines of the run's output.log (its own words: a traceback's last line,
    Python's "No module named ..."), [] when there is none to read."""
    try:
        text = safefile.read_tail(RunFolder(run_dir).output_log, OUTPUT_TAIL_BYTES,
                                  within=run_dir).decode("utf-8", "replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()][-lines:]


def python_exit_code(code: object) -> int:
    """The exit status Python gives `SystemExit(code)`: None is 0, an int (True is 1) is taken
    modulo 256 as the OS does (256 exits 0), anything else (a message) is printed and exits 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF
    return 1


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
    """Write the `end` record of a process that ended (`returncode`, as Popen says it) without one:
    `failed` with its exit code or signal, and, when it recorded nothing at all, the last lines of
    its output (why it died before its first record). None when it could not be written (another
    process has taken the run since, or the disk refuses)."""
    path = RunFolder(run_dir).events
    seen = EventReader(path, offset=offset).read()
    steps = [r.step for r in seen if isinstance(r, Step) and isinstance(r.step, int)]
    words, tail = exit_words(returncode), [] if seen else output_tail(run_dir)
    if tail:
        words += f" before its first record: {' / '.join(tail)}"
    error = ErrorInfo("Exit" if returncode >= 0 else "Signal", words, 0, "\n".join(tail))
    try:
        with runlock.acquire(run_dir), EventWriter(path) as writer:
            return writer.write(End(status="failed", total_time_s=time.time() - started,
                                    steps=max(steps, default=0), error=asdict(error)))
    except (OSError, UserError):  # RunLocked: someone resumed it meanwhile
        return None
