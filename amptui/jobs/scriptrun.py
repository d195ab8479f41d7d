"""`python -m amptui.jobs.scriptrun RUN_DIR SCRIPT [ARGS...]`: how `amptui run --script` starts
a user's script (one process; under DDP torchrun's supervisor does the same job).

The script runs in this process as `__main__`, exactly as `python SCRIPT ARGS` would run it.
Its amptui.Monitor writes the run's events. A script that ends before its Monitor wrote
anything (it raised while parsing its arguments or loading data, or it has no Monitor) would
leave the run without an `end` record, shown as `killed` with no reason; here it gets one:
`failed` with the script's error (also printed to output.log as usual), `stopped` on Ctrl-C,
`completed` on a clean exit.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from dataclasses import asdict
from pathlib import Path

from amptui.core.events import EventReader, EventWriter, primary_events_file
from amptui.core.records import End, ErrorInfo


def _exit_error(exc: BaseException) -> ErrorInfo | None:
    """The run's error for an exception the script ended with (None: it ended cleanly)."""
    if isinstance(exc, SystemExit):
        if exc.code in (None, 0):
            return None
        message = exc.code if isinstance(exc.code, str) else f"exit code {exc.code}"
        return ErrorInfo("SystemExit", str(message), 0)
    return ErrorInfo.of(exc, 0)


def end_if_silent(run_dir: Path, offset: int, started: float, exc: BaseException | None) -> None:
    """Write the run's `end` record unless the script's Monitor wrote records this session (it
    ends its own run, also on an uncaught exception)."""
    path = primary_events_file(run_dir)
    if EventReader(path, offset=offset).read():
        return
    if isinstance(exc, KeyboardInterrupt):
        status, error = "stopped", None
    else:
        error = _exit_error(exc) if exc is not None else None
        status = "failed" if error else "completed"
    with EventWriter(path) as writer:
        writer.write(End(status=status, total_time_s=time.time() - started, steps=0,
                         error=asdict(error) if error else None))


def main(argv: list[str]) -> None:
    run_dir, script, args = Path(argv[0]), argv[1], argv[2:]
    events = primary_events_file(run_dir)
    offset = events.stat().st_size if events.exists() else 0
    started = time.time()
    # As `python SCRIPT`: its argv, its folder first on the import path.
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except BaseException as exc:  # noqa: BLE001 -- recorded, then re-raised for Python to report
        end_if_silent(run_dir, offset, started, exc)
        raise
    end_if_silent(run_dir, offset, started, None)


if __name__ == "__main__":
    main(sys.argv[1:])
