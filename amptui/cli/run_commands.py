"""Following a just-started trainer on the terminal (a progress line, Ctrl-C to stop it at a
checkpoint; a script's own output passed on above it) or leaving it in the background (`--detach`:
one JSON line): `attach`, for `amptui run`, `amptui resume` and each run of `amptui ab`.

Like every module here, only the standard library and amptui's core load at import time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from amptui.core.run.runfiles import RunFolder
from amptui.jobs.detached import announce


def is_script_run(run_dir: Path) -> bool:
    """Does the run's config.toml name a script (`run --script` / `-m`)? False when unreadable."""
    from amptui.core.config import values as cfgmod
    from amptui.core.errors import ConfigError

    try:
        run = cfgmod.read_toml(RunFolder(run_dir).config).get("run")
    except (ConfigError, OSError):
        run = None
    return isinstance(run, dict) and bool(run.get("script"))


def stop_point(run_dir: Path) -> str:
    """Where a stopping run stops: amptui's trainer checkpoints first; a script's own loop is
    stopped at its next optimizer step (amptui writes no checkpoint for it)."""
    return "at the script's next optimizer step" if is_script_run(run_dir) else "checkpoint first"


def attach(run_dir: Path, proc, detach: bool, offset: int, label: str = "", kind: str = "run",
           output_from: int | None = None) -> int:
    """Follow a just-started trainer on the terminal, or leave it running and print its JSON line.

    With a `label` (one run of an A/B) only one progress line and a summary are shown. With
    `output_from` (a script's run) its output.log from that offset on is shown as it grows
    (cli/outputecho.py): above the progress line on a terminal; in a pipe on stdout, with
    amptui's own lines on stderr."""
    from amptui.cli.console import ProgressPrinter
    from amptui.cli.outputecho import OutputEcho
    from amptui.core.run import runs

    if detach:
        announce(kind, f"started in the background; follow it with: amptui watch {run_dir.name}\n"
                       f"output: {RunFolder(run_dir).output_log}",
                 run_id=run_dir.name, run_dir=run_dir.resolve(), pid=proc.pid, log=RunFolder(run_dir).output_log.resolve())
        return 0
    from amptui.jobs import scriptexit

    began = time.time()
    echo = None
    out = sys.stdout
    if output_from is not None and not _is_terminal(sys.stdout):
        out = sys.stderr  # stdout is the script's
    printer = ProgressPrinter(out=out, label=label)
    if output_from is not None:
        echo = OutputEcho(RunFolder(run_dir).output_log, output_from, printer.console if out is sys.stdout else None,
                          own=printer.say)
    try:
        followed = _follow(run_dir, proc, offset, printer, echo)
        if followed is None:
            return 130  # left running in the background
        end, stopping = followed
        try:
            proc.wait(timeout=30)
        except Exception:
            pass
        script = scriptexit.lone_script(run_dir)
        end = _settled_end(run_dir, proc, end, offset, began)
        if echo is not None:
            echo.poll(final=True)  # the script's last words (its traceback) before amptui's
    finally:
        if echo is not None:
            echo.close()
    if not run_dir.is_dir():  # removed while it ran (by the script itself, say): nothing left to report on
        printer.close()
        if echo is None:  # a script's own output (echoed) already holds its trainer's line saying so
            print(f"run {run_dir.name}: its run folder vanished while it ran; nothing of the run was kept",
                  file=sys.stderr)
        return scriptexit.shell_code(proc.returncode) if proc.returncode is not None else 1
    info = runs.load_run(run_dir)
    printer.finish(info.duration_s)
    if label:
        if stopping:
            return 130
        return 0 if end is not None and end["status"] == "completed" else 1
    code = _report_end(run_dir, proc, end, info, stopping, out)
    if script and code == 1 and proc.returncode:  # the script's own exit code (a signal: 128+N)
        return scriptexit.shell_code(proc.returncode)
    return code


def _settled_end(run_dir: Path, proc, end: dict | None, offset: int, began: float) -> dict | None:
    """The run's end record; written here for a process that ended without one when the launcher
    writes it (os._exit, a signal, a trainer that died before its first record: jobs/scriptexit.py)."""
    from amptui.jobs import scriptexit

    if end is None and proc.returncode is not None and scriptexit.launcher_writes_end(run_dir, offset, proc.returncode):
        end = scriptexit.record_exit(run_dir, offset, began, proc.returncode)
    return end


def attach_all(run_dirs: list[Path], procs: list, labels: list[str], tick) -> list[int]:
    """Follow several trainers at once (`ab --interleave`): a plain progress line per run (several
    live lines cannot share a terminal), `tick()` at each look; Ctrl-C asks them all to stop, a
    second leaves them running. One code per run: 0 completed, 130 stopped by Ctrl-C or left
    running, 1 otherwise."""
    from amptui.cli.console import ProgressPrinter
    from amptui.core.run import runs
    from amptui.core.stream.events import EventReader
    from amptui.jobs import launch

    began = time.time()
    printers = [ProgressPrinter(label=label, plain=True) for label in labels]
    readers = [EventReader(RunFolder(d).events) for d in run_dirs]
    ends: list[dict | None] = [None] * len(run_dirs)
    stopping = False
    while True:
        try:
            tick()
            for i, (reader, printer) in enumerate(zip(readers, printers, strict=True)):
                if ends[i] is None:
                    gone = procs[i].poll() is not None  # before the read: its last records are in it
                    ends[i] = _feed(reader, printer) or ({} if gone else None)
            if all(end is not None for end in ends):
                break
            time.sleep(0.1)
        except KeyboardInterrupt:
            if stopping:
                print(f"left running in the background: amptui watch {run_dirs[0].name}", file=sys.stderr)
                return [130] * len(run_dirs)
            stopping = True
            print("stopping every variant (checkpoint first); Ctrl-C again to leave them running", file=sys.stderr)
            for run_dir in run_dirs:
                launch.request_stop(run_dir)
    tick()
    codes = []
    for run_dir, proc, printer, end in zip(run_dirs, procs, printers, ends, strict=True):
        proc.wait()
        end = _settled_end(run_dir, proc, end or None, 0, began)
        printer.finish(runs.load_run(run_dir).duration_s)
        codes.append(130 if stopping else (0 if end is not None and end.get("status") == "completed" else 1))
    return codes


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _follow(run_dir: Path, proc, offset: int, printer, echo=None) -> tuple[dict | None, bool] | None:
    """Feed the run's records to `printer` until its end record, or until its process is gone
    without one: (the end record or None, whether Ctrl-C asked it to stop). A first Ctrl-C asks
    the run to stop (checkpoint first); a second leaves it running: None."""
    from amptui.core.stream.events import EventReader, primary_events_file
    from amptui.jobs import launch

    reader = EventReader(RunFolder(run_dir).events, offset=offset)
    end = None
    stopping = False
    while end is None:
        try:
            if reader.offset == offset and primary_events_file(run_dir) != reader.path:
                reader = EventReader(primary_events_file(run_dir))  # this node holds no rank 0
            if echo is not None:
                echo.poll()
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
    from amptui.core.stream.records import End

    batch = reader.read()
    printer.feed(batch)
    return next((r.wire for r in batch if isinstance(r, End)), None)


def _report_end(run_dir: Path, proc, end: dict | None, info, stopping: bool, out=None) -> int:
    """The lines after a followed run ends (on `out`, default stdout), and the command's exit code."""
    from amptui.cli.prose import error, say
    from amptui.core.run import runops

    if end is None:
        error(f"the run's process exited (exit code {proc.returncode}) without an end record; "
              f"see {RunFolder(run_dir).output_log}")
        return 1
    print(f"run {run_dir.name}: {end['status']}", file=out or sys.stdout)
    if end["status"] == "failed":
        error(f"{info.error or 'failed'} (details in {RunFolder(run_dir).output_log})")
        return 1
    if end["status"] == "stopped":
        refusal = runops.resume_refusal(run_dir, info, runops.CLI_HINTS)
        say(f"resume with: amptui resume {run_dir.name}" if refusal is None else f"(no resume: {refusal})", out)
        return 130 if stopping else 0
    return 0
