"""Started any way, it still stops (issue 55). A shell without job control (`amptui run ... &` in a
script, `ssh box 'amptui ab ... &'`) starts its background commands with SIGINT ignored, and Python
then installs no handler: amptui's drivers would train through the SIGINT that is their "stop
gracefully". Each test starts amptui exactly that way (`trap '' INT; exec ...`, which is what `&`
does to the signal) and stops it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import TINY_QUICKSTART
from support.records import events_so_far, wait_for_step
from support.waits import wait_until

AS_A_SCRIPTS_AMPERSAND = "trap '' INT; exec \"$@\""  # a background job of a non-interactive shell


def _start_in_background(*args: str, log: Path) -> subprocess.Popen:
    """`amptui ARGS &` from a script: SIGINT ignored on the way in, no terminal, output to `log`."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "-c", AS_A_SCRIPTS_AMPERSAND, "bash", sys.executable, "-m", "amptui", *args],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc


def _runs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []


def _end_of(run_dir: Path) -> dict | None:
    return next((r for r in events_so_far(run_dir) if r["kind"] == "end"), None)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_a_run_started_with_sigint_ignored_stops_with_a_checkpoint_on_sigint(tmp_path):
    root, log = tmp_path / "runs", tmp_path / "run.log"
    proc = _start_in_background("run", "quickstart", "--runs-dir", str(root), "--set", "run.max_steps=100000",
                                "--set", "amp.autocast=false", log=log)
    try:
        run_dir = wait_until(lambda: next(iter(_runs(root)), None), 120, lambda: log.read_text())
        wait_for_step(run_dir, 1, timeout=180)
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C, or `kill -INT`, sends the driver
        proc.wait(timeout=120)
        end = _end_of(run_dir)
        assert end is not None and end["status"] == "stopped", log.read_text()
        assert (run_dir / "checkpoints" / "last.pt").is_file()
        assert proc.returncode == 130 and "stopping (checkpoint first)" in log.read_text()
    finally:
        _stop(proc)


@pytest.mark.slow
def test_an_ab_started_with_sigint_ignored_stops_on_sigint_and_one_is_cancelled_by_the_dashboards_S(tmp_path):
    from amptui.dashboard.screens.ab.cancel import cancel_ab_of
    from amptui.jobs import groups

    for how in ("SIGINT", "S"):
        root, log = tmp_path / how / "runs", tmp_path / f"{how}.log"
        root.parent.mkdir()
        proc = _start_in_background("ab", "quickstart", "--variants", "fp32,fp16+scaler", "--runs-dir", str(root),
                                    *TINY_QUICKSTART, "--set", "run.epochs=100000", log=log)
        try:
            first = wait_until(lambda: next(iter(_runs(root)), None), 120, lambda: log.read_text())
            wait_for_step(first, 1, timeout=180)
            if how == "SIGINT":
                os.kill(proc.pid, signal.SIGINT)
            else:
                notice = cancel_ab_of(root, first.name)
                assert "cancelled" in str(notice.message), notice
            proc.wait(timeout=180)
            assert [r.name for r in _runs(root)] == [first.name], "no further variant starts"
            end = _end_of(first)
            assert end is not None and end["status"] == "stopped", log.read_text()
            (group,) = groups.groups(root)
            assert group.state in ("stopped", "failed") and not group.active, (group.state, group.error)
            assert proc.returncode == 130, log.read_text()
        finally:
            _stop(proc)


@pytest.mark.slow
def test_a_tune_started_with_sigint_ignored_stops_on_sigint(tmp_path):
    root, log = tmp_path / "runs", tmp_path / "tune.log"
    proc = _start_in_background("tune", "quickstart", "--runs-dir", str(root), "--budget", "20", "--no-save",
                                "--set", "run.max_steps=100000", log=log)
    try:
        trial = wait_until(lambda: next(iter(_runs(root)), None), 180, lambda: log.read_text())
        wait_for_step(trial, 1, timeout=180)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=180)
        assert "stopping" in log.read_text()
        end = _end_of(trial)
        assert end is not None and end["status"] == "stopped", log.read_text()
        (result,) = root.glob("*.tune.json")
        assert json.loads(result.read_text())["status"] != "running"
        assert len(_runs(root)) == 1, "no further trial starts"
    finally:
        _stop(proc)
