"""Guarded by design (issue 40): every signal amptui sends goes through jobs/signals.py, and only to a
process proved to be the one amptui started; a crafted or stale record (a pid of -1, a live pid
without a start time, a reused pid) signals nothing. Real processes, real files, the real CLI."""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from support.dashboard import FAILED, FIXTURES, QUICK, Notes, app_for, async_test, home_ready, select_run, until
from support.paths import PACKAGE, modules, parsed
from support.waits import wait_until

from amptui.core.run import runlock
from amptui.core.run.runs import launch_identity
from amptui.jobs import signals

SIGNAL_MODULE = PACKAGE / "jobs" / "signals.py"
SIGNALLING = {"kill", "killpg", "terminate", "send_signal", "pthread_kill"}


def signal_calls(path: Path) -> list[str]:
    """`x.kill(...)`, `os.killpg(...)`, `proc.terminate()`, `send_signal`, and a bare `kill(...)`
    imported from os, found in one source file."""
    tree = parsed(path)
    bare = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module in ("os", "signal")
            for a in n.names if a.name in SIGNALLING}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in SIGNALLING or isinstance(f, ast.Name) and f.id in bare:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_no_module_but_jobs_signals_sends_a_signal():
    offenders = [hit for path in modules() if path != SIGNAL_MODULE for hit in signal_calls(path)]
    assert offenders == [], "signal a process only through amptui/jobs/signals.py: " + ", ".join(offenders)
    assert signal_calls(SIGNAL_MODULE)  # the scan does see a signal where there is one


@pytest.fixture
def victim():
    """A process of this user that amptui did not start: nothing amptui does may signal it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_record_proves_its_process_only_with_pid_host_start_time_and_user(victim):
    here = socket.gethostname()
    start = psutil.Process(victim.pid).create_time()
    for record, why in [({"pid": -1, "create_time": start, "host": here}, "names no process"),
                        ({"pid": 0, "create_time": start, "host": here}, "names no process"),
                        ({"pid": True, "create_time": start, "host": here}, "names no process"),
                        ({"pid": victim.pid, "host": here}, "records no start time"),
                        ({"pid": victim.pid, "create_time": start - 50, "host": here}, "pid was reused"),
                        ({"pid": victim.pid, "create_time": start, "host": "elsewhere"}, "not on this machine"),
                        ({"pid": victim.pid, "create_time": start}, "unrecorded host")]:
        with pytest.raises(signals.NotOurs, match=why):
            signals.prove(record, "the record")
    assert victim.poll() is None
    handle = signals.prove(launch_identity(victim.pid), "the record")
    assert handle.pid == victim.pid and handle.interrupt()
    assert victim.wait(timeout=30) != 0


def _crafted_running_run(root: Path, pid: int) -> tuple[Path, runlock.RunLock]:
    """A copied run folder whose lock is held (by this test: a live writer) and whose records
    name `pid` without a start time, as an old or copied folder would."""
    run_dir = Path(shutil.copytree(FIXTURES / "runs" / FAILED, root / FAILED))
    (run_dir / "events.jsonl").write_text("\n".join(
        line for line in (run_dir / "events.jsonl").read_text().splitlines() if '"kind":"end"' not in line) + "\n")
    (run_dir / "run.json").write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "command": ["x"]}))
    lock = runlock.acquire(run_dir)
    record = json.dumps({"pid": pid, "host": socket.gethostname(), "command": "x"}).encode()
    os.pwrite(lock.fd, record.ljust(1023) + b"\n", 0)
    return run_dir, lock


def _crafted_with_start_time(root: Path, pid: int) -> tuple[Path, runlock.RunLock]:
    """As above, but the records name `pid` with its real start time (anyone can read it in /proc)."""
    run_dir, lock = _crafted_running_run(root, pid)
    identity = launch_identity(pid)
    (run_dir / "run.json").write_text(json.dumps({**identity, "command": ["x"]}))
    os.pwrite(lock.fd, json.dumps({**identity, "command": "x"}).encode().ljust(1023) + b"\n", 0)
    return run_dir, lock


def test_amptui_stop_leaves_a_setsid_victim_named_with_its_start_time_alive(cli, runs_dir):
    """Issue 50.4: the lock record and run.json name a `setsid sleep` with its real start time while
    another process (this test) holds the lock: the victim is not the run's writer, so stop refuses."""
    runs_dir.mkdir(parents=True)
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        run_dir, lock = _crafted_with_start_time(runs_dir, victim.pid)
        with lock:  # a short grace: nothing here answers the stop, so it is always waited out in full
            proc = cli("stop", run_dir.name, "--grace", "0.1", "--runs-dir", str(runs_dir))
        assert victim.poll() is None, "amptui stop signalled a process that does not hold the run's lock"
        assert proc.returncode == 1
        assert "does not hold the run's lock" in proc.stderr and "were not killed" in proc.stderr
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_amptui_stop_refuses_a_run_folder_whose_records_belong_to_another_user(cli, runs_dir, victim):
    runs_dir.mkdir(parents=True)
    run_dir, lock = _crafted_with_start_time(runs_dir, victim.pid)
    os.chown(run_dir / "run.json", 65534, 65534)  # nobody's
    with lock:  # a short grace: nothing here answers the stop, so it is always waited out in full
        proc = cli("stop", run_dir.name, "--grace", "0.1", "--runs-dir", str(runs_dir))
    assert victim.poll() is None
    assert proc.returncode == 1 and "run.json belongs to another user (uid 65534)" in proc.stderr


def test_a_lock_holder_that_is_not_amptuis_writer_for_this_folder_is_not_proof(tmp_path):
    """Holding the lock is not enough either: the process must be amptui's trainer (or script runner)
    for this very run folder, and the folder this user's."""
    from amptui.jobs import forcestop

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'a'); time.sleep(300)",
                               str(run_dir / "lock"), "-m", "amptui.trainer", str(tmp_path / "other")])
    try:
        wait_until(lambda: any(p.pid == holder.pid for p in forcestop.lock_holders(run_dir)), 60,
                   "the holder opened the lock")
        with pytest.raises(signals.NotOurs, match="not amptui's trainer or script runner for this run folder"):
            forcestop._runs_it(run_dir, signals.prove(launch_identity(holder.pid), "the record"))
        assert forcestop.runs_folder(psutil.Process(holder.pid), tmp_path / "other")  # ... but for that one
    finally:
        holder.kill()
        holder.wait()


def test_a_run_json_naming_pid_minus_one_is_listed_as_damaged_not_a_traceback(cli, runs_dir):
    shutil.copytree(FIXTURES / "runs" / QUICK, runs_dir / QUICK)
    (runs_dir / QUICK / "run.json").write_text(json.dumps({"pid": -1, "host": socket.gethostname()}))
    listed = cli("runs", "--runs-dir", str(runs_dir))
    assert listed.returncode == 0, listed.stderr
    assert QUICK in listed.stdout and "damaged" in listed.stdout
    gone = cli("runs", "delete", QUICK, "--yes", "--runs-dir", str(runs_dir))
    assert gone.returncode == 0, gone.stderr
    assert not (runs_dir / QUICK).exists()


def test_an_ab_group_file_naming_pid_minus_one_is_not_active(tmp_path):
    from amptui.jobs import groups

    root = tmp_path / "runs"
    group = groups.create(root, "quickstart", "quickstart", {}, None, lambda g: {"pid": -1, "host": socket.gethostname()})
    group.update(state="running")
    (found,) = groups.groups(root)
    assert not found.active


@pytest.mark.parametrize("named", ["minus_one", "no_start_time"])
@async_test
async def test_shift_s_on_a_tune_whose_file_names_a_foreign_process_signals_nothing(root, victim, named):
    from support.trials import trial_copy

    trial = trial_copy(root, "20261121-231611-quickstart-tune-8a42-2-bbbb", "quickstart-tune-8a42-2")
    pid = -1 if named == "minus_one" else victim.pid
    (root / "20261121-231600-quickstart-tune-8a42.tune.json").write_text(json.dumps({
        "tune_id": "20261121-231600-quickstart-tune-8a42", "status": "running", "pid": pid,
        "host": socket.gethostname(), "trials": [{"candidate": "bf16", "run_id": trial.name, "status": "running"}]}))
    app = app_for(root)
    async with app.run_test(size=(120, 40)) as pilot:
        notes = Notes().install(app)
        await home_ready(pilot, 4)
        await select_run(pilot, trial.name)
        await pilot.press("S")
        await until(pilot, lambda: any("nothing was signalled" in m for m, _ in notes))
    assert victim.poll() is None
