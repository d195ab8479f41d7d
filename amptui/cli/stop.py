"""`amptui stop RUN_ID`: stop a running run gracefully (checkpoint, then status stopped), or a whole A/B.

Standard library and amptui's core only at import time: main.py imports every command to build
the parser, so what a command needs loads in its handler (`amptui --help` answers at once).
"""

from __future__ import annotations

import argparse
import sys

from amptui.cli.parser import run_id_argument, runs_dir_option

STOP_GRACE_S = 30.0  # `amptui stop` waits this long for the run's next step record, then kills it


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser("stop", help="stop a running run gracefully (checkpoint, then status stopped), or a "
                                    "whole A/B by its group id or label (ab2): no further variant starts")
    run_id_argument(p, "the run to stop (or an A/B's group id or label)")
    p.add_argument("--grace", type=positive_seconds, default=STOP_GRACE_S, metavar="SECONDS",
                   help=f"how long to wait for the run to stop at its next step before its processes are "
                        f"killed (SIGTERM, then SIGKILL; default {STOP_GRACE_S:g})")
    p.add_argument("--force", action="store_true",
                   help="signal the run's recorded process even when it cannot be proved the run's writer "
                        "(an old or copied run folder without a start time, a run your own script records "
                        "with amptui.Monitor outside `amptui run`); its command line is shown first")
    runs_dir_option(p)


def handle(args) -> int:
    from amptui.core.run import runs
    from amptui.jobs import forcestop, groups, launch, signals

    root = runs.runs_root(args.runs_dir, writable=True)
    group = next((g for g in groups.groups(root) if args.run_id in (g.group_id, g.label)), None)
    if group is not None:  # a whole A/B: no further variant starts, the running one stops
        stopping = groups.cancel(root, group)
        _print(f"A/B {group.label} of {group.preset}: cancelled; no further variant starts"
              + (f"; {', '.join(stopping)} is stopping (checkpoint first)" if stopping else ""))
        return 0
    run_dir = runs.run_dir(root, args.run_id)
    grace = args.grace
    running = runs.load_run(run_dir).status == "running"
    leader = _writer(run_dir) if running else None  # proved now: the lock outlives a stopped leader
    if running:  # never a silent wait (a refusal says its own line)
        _print(f"run {run_dir.name}: stop requested; waiting up to {grace:g} s for it to stop "
              "(then its processes are killed)", file=sys.stderr, flush=True)
    info = launch.stop(run_dir, wait_s=grace)
    if info.status == "running":  # no answer: a deadlocked script, or one that ignores the stop
        return _kill(run_dir, info.run_id, grace, args.force)
    survivors = forcestop.leftovers(run_dir, leader.pid if isinstance(leader, signals.Handle) else None)
    if survivors:
        _print(f"run {info.run_id}: {info.status} at step {info.step}, but processes it started outlived it "
              f"and could not be ended: {_listed(survivors)}")
        return 1
    holders = forcestop.held_by(run_dir)  # outside the run's group: left alone, named
    if holders:
        _print(f"run {info.run_id}: {info.status} at step {info.step}, but {_listed(holders)} still "
              f"{'holds' if len(holders) == 1 else 'hold'} its lock (started by the run, it left the run's process "
              f"group, so amptui does not signal it); end it (kill {' '.join(str(p.pid) for p in holders)}), "
              "then the run can be deleted or resumed")
        return 1
    _print(f"run {info.run_id}: {info.status} at step {info.step}")
    return 0 if info.status == "stopped" else 1


def _writer(run_dir):
    from amptui.jobs import forcestop, signals

    try:
        return forcestop.writer(run_dir)
    except signals.NotOurs as exc:
        return exc


def _kill(run_dir, run_id: str, grace: float, force: bool) -> int:
    from amptui.jobs import forcestop, signals

    found = _writer(run_dir)
    if isinstance(found, signals.NotOurs):
        pid = forcestop.recorded_pid(run_dir)
        if not force or pid is None:
            _print(f"run {run_id}: no answer after {grace:g} s; its processes were not killed: {found}"
                  + (f"\n  to signal it anyway: amptui stop {run_id} --force" if pid is not None and not force else ""),
                  file=sys.stderr)
            return 1
        try:
            handle = signals.forced(pid)
        except signals.NotOurs as exc:
            _print(f"run {run_id}: {exc}", file=sys.stderr)
            return 1
        _print(f"run {run_id}: --force: signalling pid {pid}: {signals.command_of(handle.proc)}", file=sys.stderr)
        found = handle
    survivors = found.end_family(forcestop.TERM_WAIT_S)
    if survivors:
        _print(f"run {run_id}: killed after {grace:g} s without an answer, but these survived: {_listed(survivors)}")
        return 1
    _print(f"run {run_id}: stopped (killed after {grace:g} s without an answer)")
    return 0


def _listed(procs) -> str:
    from amptui.jobs import signals

    return "; ".join(f"pid {p.pid} ({signals.command_of(p)})" for p in procs)


def _print(text: str, **kwargs) -> None:
    """print, as shown: group presets and command lines come from files and /proc (core/fmt.shown)."""
    from amptui.core.fmt import shown

    print(shown(text, newlines=True), **kwargs)
