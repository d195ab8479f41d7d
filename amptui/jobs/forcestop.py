"""When a run does not answer `amptui stop`: its processes ended by signal, SIGTERM then SIGKILL.

A script that deadlocked after os.fork(), or one that ignores the stop's KeyboardInterrupt, never
reaches its next step record; waiting for it would be waiting for ever. The writer is the process
that holds the run's lock (its record names it), else run.json's pid; either is checked against
the process's start time, so a reused pid is never signalled. Its process group is signalled when
it leads one (amptui starts every run in a session of its own: a forked child is in it), and every
descendant too (a torchrun supervisor's ranks live in sessions of their own).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from amptui.core.run import runlock, runs

TERM_WAIT_S = 5.0   # after SIGTERM (amptui's trainer stops at its next record on it), before SIGKILL


def writer_process(run_dir: Path) -> psutil.Process | None:
    """The live process that writes the run, or None when none can be found (or it is elsewhere)."""
    try:
        record = runlock.holder(run_dir) or {}
    except OSError:
        record = {}
    pid, since = record.get("pid"), record.get("since")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
        try:
            proc = psutil.Process(pid)
            if not isinstance(since, (int, float)) or proc.create_time() <= since + 1.0:
                return proc  # created before it took the lock: the holder, not a reused pid
        except psutil.Error:
            pass
    launch = runs.read_launch_info(run_dir)
    if launch.get("pid") and launch.get("host") in (None, os.uname().nodename) and runs.process_alive(launch):
        try:
            return psutil.Process(launch["pid"])
        except psutil.Error:
            return None
    return None


def end_processes(leader: psutil.Process, term_wait_s: float = TERM_WAIT_S) -> None:
    """SIGTERM the leader's group (or the leader) and its descendants; SIGKILL what is left after
    `term_wait_s`; return once they are gone (or a last short wait has passed)."""
    try:
        family = [leader, *leader.children(recursive=True)]
        group = leader.pid if os.getpgid(leader.pid) == leader.pid else None
    except (psutil.Error, ProcessLookupError):
        return
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if group is not None:
            try:
                os.killpg(group, signum)
            except OSError:
                pass  # the group is empty already
        for proc in family:
            try:
                proc.send_signal(signum)
            except psutil.Error:
                pass
        _, family = psutil.wait_procs(family, timeout=term_wait_s if signum == signal.SIGTERM else 10.0)
        if not family and group is None:
            return
