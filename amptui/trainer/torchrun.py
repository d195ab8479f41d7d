"""`python -m amptui.trainer.torchrun RUN_DIR [--resume] [-- SCRIPT_ARGS]`: a DDP run.

Runs torchrun (PyTorch's own launcher, in this process) on the trainer or the user's script.
When a rank fails, torchrun stops the others and raises ChildFailedError; the failing rank's
exception comes from torchelastic's error file (written by `@record` in that rank), and this
supervisor turns it into the run's `end` record: status `failed`, naming the rank.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from amptui.core.errors import UserError
from amptui.core.run import runlock
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runstate import fold
from amptui.core.stream.events import EventReader, EventWriter, primary_events_file
from amptui.core.stream.records import START, End, ErrorInfo
from amptui.jobs import launch
from amptui.jobs.stderrtail import StderrTail


def first_failure(exc) -> tuple[int, dict]:
    """The root cause among the failed ranks: a rank killed by a signal (SIGKILL: the OOM killer,
    a user) first, else the earliest recorded exception.

    Ranks that fail *because* another rank died (a collective whose peer vanished: gloo's
    "Connection reset by peer", or the SIGTERM torchrun sends to the survivors) come later, or
    carry no error file. A killed rank writes no error file; its exit code says the signal.
    """
    killed = sorted((failure.timestamp, rank, failure.exitcode) for rank, failure in exc.failures.items()
                    if _killed_by(failure) and _recorded(failure) is None)
    if killed:
        _, rank, _ = killed[0]
        name = _killed_by(exc.failures[rank])
        return rank, asdict(ErrorInfo("Killed", f"rank {rank} was killed ({name})", rank))
    failures = []
    for rank, failure in exc.failures.items():
        data = _recorded(failure)
        recorded = isinstance(data, dict)
        if isinstance(data, dict):
            message, extra = data.get("message", ""), data.get("extraInfo", {})
            exact = float(extra.get("amptui_time", failure.timestamp))
        else:
            message, extra, exact = str(failure.message), {}, float("inf")
        failures.append((not recorded, exact, rank, message, extra.get("py_callstack", ""), failure.exitcode))
    failures.sort()
    _, _, rank, message, callstack, exitcode = failures[0]
    kind, _, text = message.partition(": ")
    if not text:
        kind, text = "WorkerFailed", message or f"exit code {exitcode}"
    return rank, asdict(ErrorInfo(kind, text, rank, callstack))


def _recorded(failure) -> dict | None:
    """What the rank's error file says (written by `@record` in that rank), or None."""
    data = failure.error_file_data.get("message") if isinstance(failure.error_file_data, dict) else None
    return data if isinstance(data, dict) else None


def _killed_by(failure) -> str:
    """The signal that ended a rank ("SIGKILL"), or "" (an exit, or torchrun's own SIGTERM)."""
    exitcode = failure.exitcode
    if not isinstance(exitcode, int) or exitcode >= 0 or -exitcode == signal.SIGTERM:
        return ""
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def main() -> int:
    argv = sys.argv[1:]
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m amptui.trainer.torchrun")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    run_dir = args.run_dir.resolve()
    try:  # the run's one writer (its ranks never lock): the descriptor stays open until we exit
        runlock.hold_for_this_process(run_dir)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    cfg = RunFolder(run_dir).load_config()

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    before = {p: p.stat().st_size for p in run_dir.glob("events*.jsonl")}
    stderr = StderrTail(sys.stderr)
    try:
        os.environ.update(launch.torchrun_env(cfg, run_dir))
        with contextlib.redirect_stderr(stderr):
            torchrun(launch.torchrun_args(cfg, run_dir, args.resume, script_args))
        return 0
    except ChildFailedError as exc:
        rank, error = first_failure(exc)
        print(f"[amptui] rank {rank} failed: {error['type']}: {error['message']}", file=sys.stderr, flush=True)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - torchrun gave up before (or between) ranks
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            return 0
        if isinstance(exc, SignalException):  # the supervisor was signalled: as before, no verdict here
            raise
        error = launch_failure(exc, stderr.text())
        print(f"[amptui] torchrun failed: {error['type']}: {error['message']}", file=sys.stderr, flush=True)
    path = primary_events_file(run_dir)
    _write_end(path, before.get(path, 0), error)
    return 1


def launch_failure(exc: BaseException, stderr: str) -> dict:
    """The end record's error (an ErrorInfo as a dict) for a torchrun that failed itself, in
    torchrun's own words."""
    if isinstance(exc, SystemExit):
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        said = next((line for line in reversed(lines) if "error:" in line), lines[-1] if lines else "")
        message = said.split("error:", 1)[-1].strip() if "error:" in said else said
        return asdict(ErrorInfo("TorchrunError", message or f"torchrun exited with code {exc.code}", None, stderr))
    error = ErrorInfo.of(exc, None, frames=None)
    error.message = error.message.strip().splitlines()[0][:500] if error.message.strip() else ""
    return asdict(error)


def _write_end(path: Path, offset: int, error: dict) -> None:
    """The run's `end` record, unless this session's records already end with one."""
    session = fold(EventReader(path, offset=offset).read())
    if session.ended:
        return
    started = session.session_t
    with EventWriter(path, rank=session.start.get(START.rank, 0) if session.start else 0) as writer:
        writer.write(End(status="failed", total_time_s=(time.time() - started) if started else None,
                         steps=max(session.step, session.session_step), final_loss=session.loss, error=error))


if __name__ == "__main__":
    sys.exit(main())
