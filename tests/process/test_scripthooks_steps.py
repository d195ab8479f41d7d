"""What the script hooks count in a step (docs/your-own-code.md, "Steps, loss and epochs"): no-grad
work inside the step's rhythm is the step's, evaluation apart; an accumulation step's loss is the
sum of its micro-batches' (divided) losses; a loop with no torch.optim optimizer is told why it
records nothing; a non-finite loss and a backoff name the right step and parameters; no epoch
without a training DataLoader. Scripts under tests/scripts/ that never import amptui, run through
the bootstrap in this process (as test_scripthooks does); also on the oldest torch (.ci/run)."""

from __future__ import annotations

import pytest
from support.cli import amptui as amptui_cli
from support.paths import SCRIPTS
from support.records import events, only_run
from support.scripthooks import by_kind, record_script_process

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow
def test_amptui_run_script_with_a_hand_written_update_says_so_on_the_terminal(runs_dir):
    proc = amptui_cli("run", "--script", str(SCRIPTS / "manual_sgd.py"))
    run_dir = only_run(runs_dir)
    out = proc.stdout + proc.stderr
    assert "no torch.optim optimizer stepped" in out and "amptui.Monitor" in out, out
    assert f"run {run_dir.name}: completed" in proc.stderr  # in a pipe: stdout is the script's
    assert by_kind(events(run_dir), "end")[-1]["steps"] == 0


@pytest.mark.slow
def test_two_threads_stepping_one_optimizer_count_each_optimizer_step_once(runs_dir):
    """Issue 32 finding 10: 2 threads x 20 optimizer steps recorded 22 steps (or stopped recording on
    a race); each optimizer step is one training step, counted under one lock. The script runs in a
    process of its own: a crash there is the script's, reported with its signal, never the runner's."""
    for _ in range(3):  # a race shows on some tries, not all
        _, recs, proc = record_script_process(runs_dir, "threads_step.py", "20", log_every=1)
        assert proc.returncode == 0 and recs[-1]["status"] == "completed" and recs[-1]["steps"] == 40, \
            (recs[-1], proc.stderr[-2000:])
        assert [s["step"] for s in by_kind(recs, "step")] == list(range(1, 41))
        assert "recording stopped" not in proc.stderr


@pytest.mark.slow
def test_threads_stepping_optimizers_of_their_own_are_told_their_counts_are_unreliable(runs_dir):
    """Issue 40 item 12: 4 threads x 25 steps of their own optimizers recorded a handful of steps and
    compare printed a "0.04x" speed-up without a word. A step is every optimizer in use stepped once:
    threads stepping on their own clocks break that, so the run is warned as multi-threaded, live
    and under compare's table."""
    dirs = []
    for _ in range(2):
        run_dir, recs, proc = record_script_process(runs_dir, "threads_own_optimizers.py", "25", log_every=1)
        assert proc.returncode == 0 and recs[-1]["status"] == "completed", proc.stderr[-2000:]
        said = [r for r in by_kind(recs, "warning") if r.get("code") == "threaded_steps"]
        assert len(said) == 1 and "from several threads" in said[0]["message"] and "unreliable" in said[0]["message"], said
        assert "threads" in proc.stderr and "unreliable" in proc.stderr  # said live, on the run's terminal
        dirs.append(run_dir)
    out = " ".join(amptui_cli("compare", *(d.name for d in dirs), check=True).stdout.split())
    assert f"{dirs[1].name} stepped its optimizers from several threads" in out and "speed-up" in out, out


@pytest.mark.slow
def test_two_threads_stepping_one_optimizer_are_not_warned(runs_dir):
    """One optimizer, whatever thread steps it: each step is one training step, counted exactly."""
    _, recs, _ = record_script_process(runs_dir, "threads_step.py", "10", log_every=1)
    assert recs[-1]["steps"] == 20 and "threaded_steps" not in {r.get("code") for r in by_kind(recs, "warning")}
