"""`amptui stop` proves the process it would kill is the run's writer (issue 50.4): it holds the
run's lock and is amptui's trainer, script runner or torchrun supervisor for that folder. The
proof must hold for every run amptui starts, so that a run that does not answer is still ended
without --force: here a trainer run and its resume, in a runs folder named relatively
(`--runs-dir runs`, the default's shape). A run stopped with SIGSTOP is one that never answers.
Real processes; the DDP supervisor's proof is in tests/process/test_distributed.py."""

from __future__ import annotations

import os
import signal

import pytest
from support.cli import amptui, started
from support.records import events_so_far, wait_for_step
from support.waits import wait_until

from amptui.core.run import runlock, runs
from amptui.jobs import forcestop

pytestmark = pytest.mark.slow


def _frozen_then_stopped(run_dir) -> None:
    """The run's writer frozen (SIGSTOP: it never answers); `amptui stop` must end it unforced."""
    pid = runlock.holder(run_dir)["pid"]
    assert forcestop.writer(run_dir).pid == pid  # proved: the lock's holder, amptui's trainer for it
    os.kill(pid, signal.SIGSTOP)
    try:
        stop = amptui("stop", run_dir.name, "--grace", "1", "--runs-dir", "runs")
        assert stop.returncode == 0, (stop.stdout, stop.stderr)
        assert stop.stdout.strip() == f"run {run_dir.name}: stopped (killed after 1 s without an answer)"
        wait_until(lambda: not runs.writer_alive(run_dir)[0], 30, "the frozen trainer gone")
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _resumed_and_stepping(run_dir) -> bool:
    recs = events_so_far(run_dir)
    starts = [i for i, r in enumerate(recs) if r["kind"] == "start"]
    return len(starts) == 2 and any(r["kind"] == "step" for r in recs[starts[1]:])


@pytest.mark.timeout(420)
def test_a_trainer_run_and_its_resume_that_do_not_answer_are_ended_by_stop_without_force(isolated, runs_dir):
    long = ["--set", "run.epochs=50", "--runs-dir", "runs"]
    run_id = started(amptui("run", "quickstart", "--detach", *long, check=True).stdout)["run_id"]
    run_dir = runs_dir / run_id
    wait_for_step(run_dir, timeout=120)
    assert "stopped" in amptui("stop", run_id, "--runs-dir", "runs", check=True).stdout  # a checkpoint to resume

    amptui("resume", run_id, "--detach", "--runs-dir", "runs", check=True)
    wait_until(lambda: _resumed_and_stepping(run_dir), 120, "the resume's first step")
    _frozen_then_stopped(run_dir)
    assert runs.load_run(run_dir).status == "killed"
