"""One writer per run folder: an exclusive `flock` on `<run_dir>/lock`, held for the writer's life.

The kernel drops the lock when the holding process dies (a SIGKILL included), so it can never
go stale; the file itself stays and only says who held it last (pid, host, command, since).

Who holds it: the trainer (one process), the DDP supervisor (amptui.trainer.torchrun; its ranks
never lock), and a `--script` run's Monitor. The command that starts one of them takes the lock
*before* it checks anything or writes anything, and hands it to the child as an inherited file
descriptor (`AMPTUI_LOCK_FD`): a flock belongs to the open file description, which parent and
child then share, so there is no moment between "checked" and "the trainer runs" where a second
`amptui resume` could get in. The parent closes its copy once the child is started; from then on
the lock lives exactly as long as the child (and whatever the child forked, e.g. DataLoader
workers, which exit with it).

Readers (`amptui runs`, the dashboard) probe with a shared non-blocking lock: it succeeds only
when no writer is alive. A probe holds it for microseconds, so a writer that finds the lock
taken retries for a moment before it concludes someone else runs the run.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from amptui.core import safefile
from amptui.core.errors import UserError
from amptui.core.run.runfiles import RunFolder

FD_ENV = "AMPTUI_LOCK_FD"      # an inherited, already locked descriptor of <run_dir>/lock
_RECORD_BYTES = 1024           # the holder's record is written as one padded block
_RETRY_S = 0.5                 # rides over a reader's probe, never over a real writer


class RunLocked(UserError):
    """The run folder is in use by another live process (named in the message)."""


class RunLock:
    """An acquired lock on one run folder; `release()` (or process exit) gives it back."""

    def __init__(self, run_dir: Path, fd: int):
        self.run_dir = Path(run_dir)
        self.fd = fd

    def describe(self, pid: int | None = None, command: list[str] | None = None) -> None:
        """Write who holds the lock into the lock file (for the message another command prints)."""
        pid = pid or os.getpid()
        record = {"pid": pid, "create_time": _create_time(pid), "host": socket.gethostname(),
                  "command": _short_command(command if command is not None else _own_command()),
                  "since": time.time()}
        data = json.dumps(record).encode()[:_RECORD_BYTES - 1]
        try:  # one write of a fixed-size block at offset 0: a reader never sees a half-empty file
            os.pwrite(self.fd, data.ljust(_RECORD_BYTES - 1) + b"\n", 0)
        except OSError:
            pass  # a read-only or full disk: the lock itself still works

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the child (if any) keeps its copy of the open file description
            self.fd = -1

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _create_time(pid: int) -> float | None:
    """The process's start time: what proves a later pid in the record is still this process."""
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def _short_command(command: list[str]) -> str:
    text = " ".join(str(c) for c in command)
    return text if len(text) <= 200 else text[:197] + "..."


def acquire(run_dir: Path, retry_s: float | None = None) -> RunLock:
    """Take the run folder's lock or raise RunLocked naming the process that holds it (after
    trying for `retry_s`, default _RETRY_S, read at the call)."""
    run_dir = Path(run_dir)
    path = RunFolder(run_dir).lock
    try:  # never through a symlink, never a FIFO: `describe` writes into this file
        fd = safefile.open_fd(path, os.O_RDWR | os.O_CREAT)
    except safefile.UnsafeFile as exc:
        raise UserError(f"run {run_dir.name}: {exc}; a lock must be a plain file (remove it to use the run)") from None
    except OSError as exc:
        raise UserError(f"run {run_dir.name}: cannot open its lock file {path} ({exc.strerror or exc})") from None
    deadline = time.monotonic() + (_RETRY_S if retry_s is None else retry_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                os.close(fd)
                raise UserError(f"run {run_dir.name}: cannot lock {path} ({exc.strerror})") from None
            if time.monotonic() >= deadline:
                os.close(fd)
                raise RunLocked(in_use_message(run_dir)) from None
            time.sleep(0.02)
    lock = RunLock(run_dir, fd)
    lock.describe()  # into a regular file of this folder (open_fd refused a link): who holds it, for others
    return lock


def hold_for_this_process(run_dir: Path) -> RunLock | None:
    """What a writer process calls first: adopt the lock its launcher handed down, else take it.

    Under torchrun (a DDP rank) nothing: the supervisor holds the run's lock for every rank.
    """
    if "TORCHELASTIC_RUN_ID" in os.environ:
        os.environ.pop(FD_ENV, None)
        return None
    key = str(Path(run_dir).resolve())
    held = _HELD.get(key)
    if held is not None and held.fd >= 0:
        return held  # e.g. a script that opens a second Monitor on its run
    lock = _inherited(run_dir)
    if lock is not None:
        lock.describe()
    else:
        lock = acquire(run_dir)
    _HELD[key] = lock
    return lock


_HELD: dict[str, RunLock] = {}  # the locks this process holds for its lifetime, by run folder


def _inherited(run_dir: Path) -> RunLock | None:
    """The lock descriptor from AMPTUI_LOCK_FD, if it really is <run_dir>/lock (checked by inode:
    a stale variable must never make a process believe it holds a lock it does not)."""
    value = os.environ.pop(FD_ENV, None)  # popped: our own children must not adopt it again
    if not value or not value.isdigit():
        return None
    fd = int(value)
    try:
        held, ours = os.fstat(fd), os.lstat(RunFolder(run_dir).lock)
    except OSError:
        return None
    if (held.st_dev, held.st_ino) != (ours.st_dev, ours.st_ino):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # already ours (shared description): a no-op
    except OSError:
        return None
    os.set_inheritable(fd, False)
    return RunLock(run_dir, fd)


def holder(run_dir: Path) -> dict[str, Any] | None:
    """Who holds the run folder's lock now: their record ({} if unreadable), or None when nobody
    does. Raises FileNotFoundError for a folder without a lock file (runs from before the lock),
    safefile.UnsafeFile (an OSError) for a lock that is a symlink, a FIFO or a device."""
    path = RunFolder(run_dir).lock
    fd = safefile.open_fd(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None  # a filesystem without flock: say nothing rather than guess
            return _read_record(fd)
        return None  # we got it: nobody holds it (closing the descriptor lets go again)
    finally:
        os.close(fd)


def _read_record(fd: int) -> dict[str, Any]:
    try:
        record = safefile.loads_json(os.pread(fd, _RECORD_BYTES, 0).decode("utf-8", "replace").strip() or "{}")
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def in_use_message(run_dir: Path, fallback: dict[str, Any] | None = None) -> str:
    """`fallback`: what else is known of the writer (run.json's pid) for a folder without a lock."""
    try:
        record = holder(run_dir) or fallback or {}
    except OSError:
        record = fallback or {}
    who = describe_holder(record)
    return f"run {Path(run_dir).name} is in use by {who}; stop it first (amptui stop {Path(run_dir).name}) or wait"


def describe_holder(record: dict[str, Any]) -> str:
    pid = record.get("pid")
    if not isinstance(pid, int):
        return "another amptui process"
    host = record.get("host")
    where = f" on {host}" if isinstance(host, str) and host != socket.gethostname() else ""
    command = record.get("command")
    what = f" ({command})" if isinstance(command, str) and command else ""
    return f"pid {pid}{where}{what}"


def _own_command() -> list[str]:
    return list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])  # orig_argv: "-m amptui..."
