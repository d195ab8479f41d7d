"""The one place amptui signals a process: `os.kill`, `os.killpg` and psutil's terminate/kill live
here and nowhere else (tests/test_signals.py fails on any other).

A process is signalled only through a `Handle`, and a handle is only made from proof that the
process is the one amptui started (`prove`): a recorded identity {pid, create_time, host} whose
pid is above 0, alive (not a zombie), on this host, created when the record says (a reused pid is
a different process) and owned by this user. A record without a start time (an old or copied run
folder, a hand-written file) is not proof: `NotOurs` says so, with the process's command line,
and only an explicit `--force` (`forced`) signals it then. A child this process started and has not
reaped yet (a `Popen`) is proof by itself: its pid cannot be reused before we wait for it.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psutil

from amptui.core.errors import UserError

SAME_START_S = 1.0  # psutil's create_time is read from /proc at a tick's precision


class NotOurs(UserError):
    """The record does not prove the process is amptui's: nothing was signalled. `command`: what
    the live process is, for a person to decide on `--force` ('' when there is no such process)."""

    def __init__(self, message: str, command: str = ""):
        super().__init__(message)
        self.command = command


def valid_pid(value: Any) -> bool:
    """A process id as a record may name one: an int above 0 (never a bool, -1 or 0: those mean
    every process or the caller's group to kill(2))."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def command_of(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()) or proc.name()
    except psutil.Error:
        return "?"


@dataclass(frozen=True)
class Handle:
    """A live process proved to be amptui's (make one with `prove`, `forced` or `child`)."""

    proc: psutil.Process

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, signum: int) -> bool:
        """Signal the process; False when it has gone meanwhile."""
        try:
            self.proc.send_signal(signum)  # psutil checks the pid still names the same process
        except psutil.Error:
            return False
        return True

    def interrupt(self) -> bool:
        """SIGINT: what Ctrl-C does (`amptui tune` and an A/B stop at their next record on it)."""
        return self.send(signal.SIGINT)

    def end_family(self, term_wait_s: float) -> list[psutil.Process]:
        """SIGTERM the process's group (when it leads one: amptui starts every run in a session of
        its own, so a forked child is in it) and every descendant; SIGKILL what is left after
        `term_wait_s`. Returns the processes that outlived both (usually none)."""
        try:
            family = [self.proc, *self.proc.children(recursive=True)]
            group = self.pid if os.getpgid(self.pid) == self.pid else None
        except (psutil.Error, ProcessLookupError):
            return []
        family += [p for p in group_members(group) if p not in family] if group is not None else []
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if group is not None:
                try:
                    os.killpg(group, signum)
                except OSError:
                    pass  # the group is empty already
            family = _send_and_wait(family, signum, term_wait_s)
            if not family:
                return []
        return family


def group_members(pgid: int) -> list[psutil.Process]:
    """This user's live processes in process group `pgid` (a run's leftovers after its leader died:
    a group id is never handed out as a new pid while the group has members)."""
    found = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["uids"].real == os.getuid():
                found.append(proc)
        except (OSError, psutil.Error, AttributeError):
            continue
    return found


def end_group_leftovers(pgid: int, term_wait_s: float) -> list[psutil.Process]:
    """SIGTERM then SIGKILL what is left of a run's process group whose leader has exited (its
    id is the leader's recorded pid, proved earlier); returns the survivors."""
    if not valid_pid(pgid):
        return []
    members = group_members(pgid)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        members = _send_and_wait(members, signum, term_wait_s)
        if not members:
            return []
    return members


def prove(record: Mapping[str, Any], what: str) -> Handle:
    """A handle on the process `record` ({pid, create_time, host}) names, or NotOurs saying why
    it is not provably the one amptui started. `what`: the record, for the message ("run.json")."""
    pid = record.get("pid")
    if not valid_pid(pid):
        raise NotOurs(f"{what} names no process (pid {pid!r}): nothing was signalled")
    host = record.get("host")
    if host != socket.gethostname():
        raise NotOurs(f"{what}: its process ran on {host or 'an unrecorded host'}, not on this machine; "
                      "nothing was signalled")
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            raise psutil.NoSuchProcess(pid)
        created = proc.create_time()
        owner = proc.uids().real
    except psutil.Error:
        raise NotOurs(f"{what}: process {pid} is not running; nothing was signalled") from None
    recorded = record.get("create_time")
    if not isinstance(recorded, (int, float)) or isinstance(recorded, bool):
        raise NotOurs(f"{what} records no start time for pid {pid}, so it cannot prove that process is the "
                      f"one amptui started; nothing was signalled. pid {pid} is now: {command_of(proc)}",
                      command_of(proc))
    if abs(created - recorded) >= SAME_START_S:
        raise NotOurs(f"{what}: pid {pid} is a different process now (started at another time: the pid was "
                      f"reused); nothing was signalled. pid {pid} is now: {command_of(proc)}", command_of(proc))
    if owner != os.getuid():
        raise NotOurs(f"{what}: pid {pid} belongs to another user; nothing was signalled", command_of(proc))
    return Handle(proc)


def forced(pid: int) -> Handle:
    """A handle a person asked for by `--force` after seeing the command line NotOurs gave: only
    the pid's validity, life and owner are checked."""
    if not valid_pid(pid):
        raise NotOurs(f"pid {pid!r} names no process")
    try:
        proc = psutil.Process(pid)
        if proc.uids().real != os.getuid():
            raise NotOurs(f"pid {pid} belongs to another user; nothing was signalled")
    except psutil.Error:
        raise NotOurs(f"process {pid} is not running; nothing was signalled") from None
    return Handle(proc)


def kill_child_session(popen) -> None:
    """SIGKILL the session of a child this process started (subprocess.Popen, start_new_session).
    Until it is waited for its pid cannot name anything else; once reaped, its group id still names
    only its leftovers while any is alive (a group id is never handed out as a new pid)."""
    if not valid_pid(popen.pid):
        return
    if popen.poll() is None:
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    for proc in group_members(popen.pid):
        try:
            proc.kill()
        except psutil.Error:
            pass


def signal_tab(process, signum: int) -> None:
    """Signal a child this process started and holds unreaped (a tab of `amptui serve`: an asyncio
    subprocess): the process only, never its group, which is serve's own (runs a tab started live
    in sessions of their own and go on). asyncio's send_signal polls the child first, so a pid
    already reaped, which could name another process, is never signalled."""
    if process.returncode is not None or not valid_pid(process.pid):
        return
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass


def _send_and_wait(procs: list[psutil.Process], signum: int, term_wait_s: float) -> list[psutil.Process]:
    """Send `signum` to each process (gone ones skipped) and wait for them: SIGTERM `term_wait_s`,
    SIGKILL 10 s; returns those still alive."""
    for proc in procs:
        try:
            proc.send_signal(signum)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=term_wait_s if signum == signal.SIGTERM else 10.0)
    return alive
