"""Following a just-started trainer on the terminal (a progress line, Ctrl-C to stop it at a
checkpoint) or leaving it in the background (`--detach`: one JSON line): `attach`, for `amptui run`,
`amptui resume` and each run of `amptui ab`.

Like every module here, only the standard library and amptui's core load at import time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from amptui.core.run.runfiles import RunFolder
from amptui.jobs.detached import announce


def stop_point(run_dir: Path) -> str:
    """Where a stopping run stops: amptui's trainer checkpoints first; a script's own loop is
    stopped at its next optimizer step (amptui writes no checkpoint for it)."""
    from amptui.core.config import values as cfgmod
    from amptui.core.errors import ConfigError

    try:
        run = cfgmod.read_toml(RunFolder(run_dir).config).get("run")
    except (ConfigError, OSError):
        run = None
    return "at the script's next optimizer step" if isinstance(run, dict) and run.get("script") else "checkpoint first"


def attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "", kind: str = "run") -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its JSON line.

    With a `label` (one run of an A/B) only one progress line and a summary are shown."""
    from amptui.cli.console import ProgressPrinter
    from amptui.core.run import runs

    if detach:
        announce(kind, f"started in the background; follow it with: amptui watch {run_dir.name}\n"
                       f"output: {RunFolder(run_dir).output_log}",
                 run_id=run_dir.name, run_dir=run_dir.resolve(), pid=proc.pid, log=RunFolder(run_dir).output_log.resolve())
        return 0
    printer = ProgressPrinter(label=label)
    followed = _follow(run_dir, proc, offset, printer)
    if followed is None:
        return 130  # left running in the background
    end, stopping = followed
    try:
        proc.wait(timeout=30)
    except Exception:
        pass
    info = runs.load_run(run_dir)
    printer.finish(info.duration_s)
    if label:
        if stopping:
            return 130
        return 0 if end is not None and end["status"] == "completed" else 1
    return _report_end(run_dir, proc, end, info, stopping)


def _follow(run_dir: Path, proc, offset: int, printer) -> tuple[dict | None, bool] | None:
    """Feed the run's records to `printer` until its end record, or until its process is gone
    without one: (the end record or None, whether Ctrl-C asked it to stop). A first Ctrl-C asks
    the run to stop (checkpoint first); a second leaves it running: None."""
    from amptui.core.events import EventReader, primary_events_file
    from amptui.jobs import launch

    reader = EventReader(RunFolder(run_dir).events, offset=offset)
    end = None
    stopping = False
    while end is None:
        try:
            if reader.offset == offset and primary_events_file(run_dir) != reader.path:
                reader = EventReader(primary_events_file(run_dir))  # this node holds no rank 0
            end = _feed(reader, printer)
            if end is None:
                if proc.poll() is not None:  # gone without an end record: one last look, then give up
                    end = _feed(reader, printer)
                    if end is None:
                        break
                time.sleep(0.1)
        except KeyboardInterrupt:
            printer.close()
            if stopping:  # a second Ctrl-C: leave it running in the background
                print(f"left running in the background: amptui watch {run_dir.name}", file=sys.stderr)
                return None
            stopping = True
            print(f"stopping ({stop_point(run_dir)}); Ctrl-C again to leave it running", file=sys.stderr)
            launch.request_stop(run_dir)
    return end, stopping


def _feed(reader, printer) -> dict | None:
    """Read the records written since the last call into the printer; the end record if among them."""
    batch = reader.read()
    printer.feed(batch)
    return next((r for r in batch if r.get("kind") == "end"), None)


def _report_end(run_dir: Path, proc, end: dict | None, info, stopping: bool) -> int:
    """The lines after a followed run ends, and the command's exit code."""
    from amptui.cli.prose import error, say
    from amptui.core.run import runops

    if end is None:
        error(f"the run's process exited (exit code {proc.returncode}) without an end record; "
              f"see {RunFolder(run_dir).output_log}")
        return 1
    print(f"run {run_dir.name}: {end['status']}")
    if end["status"] == "failed":
        error(f"{info.error or 'failed'} (details in {RunFolder(run_dir).output_log})")
        return 1
    if end["status"] == "stopped":
        refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS)
        say(f"resume with: amptui resume {run_dir.name}" if refusal is None else f"(no resume: {refusal})")
        return 130 if stopping else 0
    return 0
