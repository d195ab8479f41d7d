"""Guarded by design (issue 40): every signal amptui sends goes through jobs/signals.py, and only to a
process proved to be the one amptui started; a crafted or stale record (a pid of -1, a live pid
without a start time, a reused pid) signals nothing. Real processes, real files, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import amptui
from support.dashboard import FAILED, FIXTURES

from amptui.core.run import runlock


@pytest.fixture
def victim():
    """A process of this user that amptui did not start: nothing amptui does may signal it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield proc
    proc.kill()
    proc.wait()


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


@pytest.mark.slow
def test_amptui_stop_leaves_a_process_named_by_a_crafted_run_folder_alive(runs_dir, victim):
    runs_dir.mkdir(parents=True)
    run_dir, lock = _crafted_running_run(runs_dir, victim.pid)
    with lock:
        proc = amptui("stop", run_dir.name, "--grace", "1", "--runs-dir", str(runs_dir))
    assert victim.poll() is None, "amptui stop signalled a process it did not start"
    assert proc.returncode == 1
    assert "records no start time" in proc.stderr and "--force" in proc.stderr and "were not killed" in proc.stderr


@pytest.mark.slow
def test_amptui_stop_force_signals_the_recorded_process_after_showing_its_command_line(runs_dir, victim):
    runs_dir.mkdir(parents=True)
    run_dir, lock = _crafted_running_run(runs_dir, victim.pid)
    with lock:
        proc = amptui("stop", run_dir.name, "--grace", "1", "--force", "--runs-dir", str(runs_dir))
    assert victim.wait(timeout=30) is not None
    assert f"--force: signalling pid {victim.pid}: " in proc.stderr and "time.sleep(300)" in proc.stderr
