"""`python -m amptui.trainer.scriptrun RUN_DIR SCRIPT [ARGS...]`: how `amptui run --script` runs a
user's script (one process, or one per rank under torchrun), its hooks (telemetry/scripthooks)
installed before the script's first line.

The script runs in this process as `__main__`, exactly as `python SCRIPT ARGS` would run it,
with amptui's hooks installed first (telemetry/scripthooks): an unmodified script's steps, loss,
GradScaler, precision, epochs and mistakes become the run's events. A script that makes its own
amptui.Monitor is recorded by it instead (the hooks stand down). Either way the run ends with an
`end` record: `failed` with the script's error (also printed to output.log as usual), `stopped`
on Ctrl-C or `amptui stop`, `completed` on a clean exit. AMPTUI_SCRIPT_HOOKS=0 leaves the hooks out.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from amptui.core.run import runlock
from amptui.core.run.runfiles import RunFolder
from amptui.core.stream.events import EventReader, EventWriter, events_file
from amptui.core.stream.records import End, ErrorInfo
from amptui.jobs.scriptexit import python_exit_code
from amptui.jobs.stderrtail import StderrTail

SAID_CHARS = 300  # of the script's last stderr line, in the run's error
AMPTUI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _runner_frame(filename: str) -> bool:
    """A frame of this runner (amptui's files, runpy's), not of the script."""
    return filename.startswith(AMPTUI_DIR + os.sep) or filename == "<frozen runpy>" or \
        os.path.basename(filename) == "runpy.py"


def from_script(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the script's first frame on, as `python SCRIPT` would print it: the
    runner's and runpy's frames before it left out (an error of amptui's own keeps them all)."""
    first = tb
    while first is not None and _runner_frame(first.tb_frame.f_code.co_filename):
        first = first.tb_next
    return first if first is not None else tb


def _script_excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    # a script that does not compile: its file and line only, as python prints it
    tb = None if isinstance(exc, SyntaxError) and from_script(tb) is tb else from_script(tb)
    if isinstance(exc, BaseException):
        exc.__traceback__ = tb  # what Python's printer reads (not its `tb` argument)
    sys.__excepthook__(kind, exc, tb)


def _exit_error(exc: BaseException, said: str = "") -> ErrorInfo | None:
    """The run's error for an exception the script ended with (None: it ended cleanly). A
    SystemExit with a code says, after it, the last line the script wrote to stderr (`said`:
    argparse's "train.py: error: unrecognized arguments: --bogus"), so the reason is in the record."""
    if isinstance(exc, SystemExit):
        code = python_exit_code(exc.code)  # as Python exits: SystemExit(256) is 0, SystemExit(True) 1
        if code == 0:
            return None
        if not isinstance(exc.code, int):  # a message: Python prints it and exits 1
            return ErrorInfo("SystemExit", f"exit code 1: {exc.code}", 0)
        message = f"exit code {code}" + (f": {said[:SAID_CHARS]}" if said else "")
        return ErrorInfo("SystemExit", message, 0)
    return ErrorInfo.of(exc, 0)


def _status(exc: BaseException | None, said: str = "") -> tuple[str, ErrorInfo | None]:
    if isinstance(exc, KeyboardInterrupt):
        return "stopped", None
    error = _exit_error(exc, said) if exc is not None else None
    return ("failed" if error else "completed"), error


def folder_vanished(run_dir: Path) -> bool:
    """The run folder is gone (the script removed it, or someone did): one line says so, and
    nothing more is recorded; the script still ends with its own exit code."""
    if run_dir.is_dir():
        return False
    print(f"[amptui] the run folder {run_dir} vanished while the script ran: nothing of the run was kept",
          file=sys.stderr, flush=True)
    return True


def end_if_silent(run_dir: Path, offset: int, started: float, exc: BaseException | None, rank: int = 0,
                  said: str = "") -> None:
    """Write the run's `end` record unless the script's Monitor (or the hooks) wrote records this
    session (they end their own run, also on an uncaught exception)."""
    path = events_file(run_dir, rank)
    if EventReader(path, offset=offset).read():
        return
    status, error = _status(exc, said)
    with EventWriter(path, rank) as writer:
        writer.write(End(status=status, total_time_s=time.time() - started, steps=0,
                         error=asdict(error) if error else None))


def _end_hooks(session, exc: BaseException | None, said: str = "") -> None:
    if session is None:
        return
    status, _ = _status(exc)
    if session.stop_sent and status != "failed":
        status = "stopped"  # the script caught amptui's KeyboardInterrupt and ended on its own
    error: BaseException | ErrorInfo | None = None
    if status == "failed" and exc is not None:
        error = _exit_error(exc, said) if isinstance(exc, SystemExit) else exc  # SystemExit(2): "exit code 2: ..."
    try:
        session.end(status, error)
    except Exception as failure:  # noqa: BLE001 -- amptui's bookkeeping never replaces the script's own ending
        print(f"[amptui] recording stopped: {type(failure).__name__}: {failure}", file=sys.stderr, flush=True)


def make_run_folder(run_dir: Path, script: str) -> None:
    """A RUN_DIR amptui did not make (`torchrun ... -m amptui.trainer.scriptrun RUN_DIR train.py`,
    the script's own torchrun launch): made here, with the config.toml that makes it a run (the
    script, and torchrun's world as [dist]) and run.json, so `amptui runs` and `watch` see it."""
    folder = RunFolder(run_dir)
    if folder.config.is_file():
        return
    from amptui.core.config import values as cfgmod
    from amptui.core.run import runs

    module = script[3:].strip() if script.startswith("-m ") else None
    told: dict[str, Any] = {"run.script": script if module else os.path.abspath(script),
                            "run.name": module.rpartition(".")[2] if module else Path(script).stem}
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        told.update({"dist.mode": "ddp", "dist.nproc_per_node": per_node, "dist.nnodes": max(1, world // per_node)})
    run_dir.mkdir(parents=True, exist_ok=True)
    runs.write_new(folder, cfgmod.build_config({}, told), f"# amptui run {run_dir.name}: a script, started by its own launcher")
    runs.write_launch_info(run_dir, os.getpid(), list(sys.argv))


def main(argv: list[str], install_hooks: Callable[[Path], Any] | None = None) -> None:
    """Run the script `argv` names; `install_hooks(run_dir)` first (the session it returns is
    ended with the script's outcome), unless AMPTUI_SCRIPT_HOOKS=0."""
    run_dir, script, args = Path(argv[0]).resolve(), argv[1], argv[2:]
    starter = os.getpid()  # only this process ends the run: a child the script forked never does
    rank = int(os.environ.get("RANK", 0))
    events = events_file(run_dir, rank)
    offset = events.stat().st_size if events.exists() else 0
    started = time.time()
    if rank == 0:
        make_run_folder(run_dir, script)
        runlock.hold_for_this_process(run_dir)  # the lock amptui handed down (not under torchrun)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
    hooks_on = install_hooks is not None and os.environ.get("AMPTUI_SCRIPT_HOOKS", "1") != "0"
    session = install_hooks(run_dir) if hooks_on and install_hooks is not None else None
    module = script[3:].strip() if script.startswith("-m ") else None  # launch.MODULE_PREFIX
    # As `python SCRIPT` (its folder first on the import path) or `python -m MODULE` (the
    # current folder first): its argv, its __main__.
    sys.argv = [script if module is None else module, *args]
    first = os.path.dirname(os.path.abspath(script)) if module is None else os.getcwd()
    if getattr(sys.flags, "safe_path", False) or sys.flags.isolated:  # jobs.spawn.SAFE_PATH: nothing was put first
        sys.path.insert(0, first)
    else:
        sys.path[0] = first
    stderr = sys.stderr
    sys.stderr = tail = StderrTail(stderr)  # the script's last words, should it exit with a code
    try:
        if module is None:
            runpy.run_path(script, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except BaseException as exc:  # noqa: BLE001 -- recorded, then re-raised for Python to report
        if sys.stderr is tail:
            sys.stderr = stderr
        said = " ".join(tail.last_lines(1))
        if os.getpid() != starter:
            raise  # a forked child's exit: its own, not the run's
        if not folder_vanished(run_dir):
            _end_hooks(session, exc, said)
            end_if_silent(run_dir, offset, started, exc, rank, said)
        if isinstance(exc, KeyboardInterrupt) and session is not None and session.stop_sent:
            sys.exit(0)  # `amptui stop` asked for it: a clean stop, not a crash
        raise
    finally:
        if sys.stderr is tail:
            sys.stderr = stderr
    if os.getpid() == starter and not folder_vanished(run_dir):
        _end_hooks(session, None)
        end_if_silent(run_dir, offset, started, None, rank)


if __name__ == "__main__":
    from amptui.jobs.spawn import hear_interrupts
    from amptui.telemetry import scripthooks

    hear_interrupts()  # Ctrl-C is a KeyboardInterrupt in the script, as in a `python SCRIPT` started in a terminal

    sys.excepthook = _script_excepthook  # a crash prints the script's frames only (a script may set its own)
    main(sys.argv[1:], install_hooks=scripthooks.install)
