"""When a run does not answer `amptui stop`: its processes ended by signal, SIGTERM then SIGKILL.

A script that deadlocked after os.fork(), or one that ignores the stop's KeyboardInterrupt, never
reaches its next step record; waiting for it would be waiting for ever. The writer is the process
that holds the run's lock (its record names it), else run.json's pid; either must be proved to be
the process amptui started (jobs/signals.py: pid, host, start time, user), so a reused pid or a
pid a copied run folder names is never signalled. A crafted folder can name any process of this
user with its real start time (anyone can read it in /proc), so the proof also asks the run itself:
the process must hold the run's lock now and be amptui's trainer, script runner or torchrun
supervisor for this very folder, and the folder's files must be this user's.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from amptui.core.run import runlock, runs
from amptui.core.run.runfiles import RUN_DIR_ENV, RunFolder
from amptui.jobs import signals

TERM_WAIT_S = 5.0   # after SIGTERM (amptui's trainer stops at its next record on it), before SIGKILL


def writer(run_dir: Path) -> signals.Handle:
    """A handle on the live process that writes the run, or signals.NotOurs saying why there is
    none that can be proved amptui's (the lock's record first: it names the process that holds it)."""
    try:
        record = runlock.holder(run_dir) or {}
    except OSError:
        record = {}
    _check_owned(run_dir)
    refusal = None
    if record:
        try:
            return _runs_it(run_dir, signals.prove(record, f"run {run_dir.name}'s lock record"))
        except signals.NotOurs as exc:
            refusal = exc
    launch = runs.read_launch_info(run_dir)
    try:
        return _runs_it(run_dir, signals.prove(launch, f"run {run_dir.name}'s run.json"))
    except signals.NotOurs as exc:
        raise refusal or exc from None


# The modules amptui runs a run folder's writer as: `python ... -m MODULE RUN_DIR ...`.
WRITER_MODULES = ("amptui.trainer", "amptui.trainer.scriptrun", "amptui.trainer.torchrun")


def _check_owned(run_dir: Path) -> None:
    """NotOurs when the run folder or its records belong to another user: they prove nothing."""
    folder = RunFolder(run_dir)
    for path in (Path(run_dir), folder.lock, Path(run_dir) / "run.json"):
        try:
            owner = os.lstat(path).st_uid
        except OSError:
            continue
        if owner != os.getuid():
            raise signals.NotOurs(f"run {Path(run_dir).name}: {path.name} belongs to another user (uid {owner}), "
                                  "so its records prove nothing; nothing was signalled")


def runs_folder(proc: psutil.Process, run_dir: Path) -> bool:
    """Is `proc` amptui's writer (trainer, script runner, torchrun supervisor) for `run_dir`? Its
    command line names the folder; a relative name is read against the folder the process is in now
    or, as it may have left the one it started in (a script under Hydra does), against the absolute
    folder amptui gave it in its environment (RUN_DIR_ENV, as it started: a script cannot change it)."""
    try:
        command, cwd = proc.cmdline(), proc.cwd()
    except psutil.Error:
        return False
    named = [command[i + 2] for i in range(len(command) - 2)
             if command[i] == "-m" and command[i + 1] in WRITER_MODULES]
    target = os.path.realpath(run_dir)
    if any(os.path.realpath(os.path.join(cwd, path)) == target for path in named):
        return True
    if not any(not os.path.isabs(path) for path in named):
        return False
    try:
        given = proc.environ().get(RUN_DIR_ENV)
    except psutil.Error:
        return False
    return given is not None and os.path.realpath(given) == target


def _runs_it(run_dir: Path, handle: signals.Handle) -> signals.Handle:
    """`handle` itself when its process holds the run's lock and is amptui's writer for this
    folder; NotOurs otherwise (a record can name any process of this user with its start time)."""
    what = f"run {run_dir.name}: pid {handle.pid}"
    command = signals.command_of(handle.proc)
    if handle.pid not in {p.pid for p in lock_holders(run_dir)}:
        raise signals.NotOurs(f"{what} does not hold the run's lock, so it is not the run's writer; nothing was "
                              f"signalled. pid {handle.pid} is: {command}", command)
    if not runs_folder(handle.proc, run_dir):
        raise signals.NotOurs(f"{what} is not amptui's trainer or script runner for this run folder; nothing was "
                              f"signalled. pid {handle.pid} is: {command}", command)
    return handle


def recorded_pid(run_dir: Path) -> int | None:
    """The pid the run's records name (the lock's, else run.json's), for `--force`."""
    try:
        record = runlock.holder(run_dir) or {}
    except OSError:
        record = {}
    for pid in (record.get("pid"), runs.read_launch_info(run_dir).get("pid")):
        if signals.valid_pid(pid):
            return pid
    return None


def leftovers(run_dir: Path, leader_pid: int | None, term_wait_s: float = TERM_WAIT_S) -> list[psutil.Process]:
    """After the run said it stopped: the processes of its group that still hold its lock (a child
    the script forked) ended; returns those that survive. `leader_pid`: the writer proved before."""
    try:
        still_held = runlock.holder(run_dir) is not None
    except OSError:
        still_held = False
    if not still_held or leader_pid is None:
        return []
    return signals.end_group_leftovers(leader_pid, term_wait_s)


def lock_holders(run_dir: Path) -> list[psutil.Process]:
    """The processes (this user's) that have the run's lock file open: who keeps a run in use after
    its writer exited, e.g. a child the script forked that left the run's process group (it inherited
    the lock's descriptor). Named to the user, never signalled: nothing proves it is amptui's."""
    path = os.path.realpath(RunFolder(run_dir).lock)
    me, here = os.getuid(), os.getpid()
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != here and proc.uids().real == me and any(f.path == path for f in proc.open_files()):
                found.append(proc)
        except psutil.Error:  # gone meanwhile, or not ours to look into
            continue
    return found


def held_by(run_dir: Path) -> list[psutil.Process]:
    """lock_holders, asked only while the run's lock is held (a free lock has none to look for)."""
    try:
        held = runlock.holder(run_dir) is not None
    except OSError:
        held = False
    return lock_holders(run_dir) if held else []
