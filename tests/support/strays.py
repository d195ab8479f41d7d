"""What a test started and left running: a detached trainer (its own session, so a failed or timed-out
test's `subprocess` timeout never reached it), a script run, a server. Each test's processes inherit
its mark (MARK in their environment, set by conftest's `stops_what_it_started`) or run in its temporary
folder; at teardown those still alive are ended: SIGTERM to their process group, SIGKILL after
GRACE_S. Read from /proc (a few milliseconds), so conftest does it only after a failed test or a slow
one (process tests), never slowing a passing fast test."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARK = "AMPTUI_TEST_MARK"
GRACE_S = 3.0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")  # a zombie has ended; its parent reaps it


def _reap(pid: int) -> None:
    try:  # our own child (an in-process `--detach`): collect it, or it stays a zombie
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def started_by(mark: str, folder: Path) -> list[int]:
    """Live processes of this user (not this one, not its ancestors) carrying `mark` in their
    environment or working in `folder`."""
    ours = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        ours.add(pid)
    needle, where = f"{MARK}={mark}".encode(), str(Path(folder).resolve())
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in ours:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                marked = needle in fh.read().split(b"\0")
            cwd = "" if marked else os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue  # gone, or another user's
        if (marked or cwd == where or cwd.startswith(where + os.sep)) and _alive(int(name)):
            found.append(int(name))
    return found


def stop_started(mark: str, folder: Path, grace_s: float = GRACE_S) -> list[int]:
    """End what `started_by` finds (its process groups: a trainer's workers too); returns the pids."""
    pids = started_by(mark, folder)
    own_group = os.getpgrp()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                group = os.getpgid(pid)
                os.killpg(group, sig) if group != own_group else os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while True:
            for pid in pids:
                _reap(pid)
            if not any(_alive(pid) for pid in pids) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        pids_left = [pid for pid in pids if _alive(pid)]
        if not pids_left:
            break
    return pids
