"""Issue 40 item 8: a script that forks a child which keeps the run's lock (the child inherits the
descriptor amptui hands the trainer). `amptui stop` used to say "stopped", then `runs delete` said
"running, stop it first" and `stop` "not running": stuck until the child was killed by hand.
Now stop ends what is left of the run's process group and lists what it could not end; delete then
works, or names exactly the process that still holds the run. Real processes; each under a timeout."""

from __future__ import annotations

import os
import signal

import pytest
from support.cli import amptui, one_clear_line, started
from support.records import events
from support.waits import gone, wait_until

from amptui.core.run import runs

# Forks first (before torch starts threads); the child keeps every inherited descriptor, the run's
# lock among them, and waits; `escape`: it leaves the run's process group (os.setsid) first.
FORKER = """import os, sys, time
escape = sys.argv[2] == "escape"
child = os.fork()
if child == 0:
    if escape:
        os.setsid()
    time.sleep(600)
    os._exit(0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(child))
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
while True:  # until `amptui stop`: its KeyboardInterrupt comes at an optimizer step
    model(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    time.sleep(0.05)
"""


def _started_forker(isolated, runs_dir, how: str):
    script, pid_file = isolated / "forker.py", isolated / "child.pid"
    script.write_text(FORKER)
    proc = amptui("run", "--detach", "--script", str(script), "--set", "log.every=1", "--runs-dir", str(runs_dir),
                  "--", str(pid_file), how, check=True)
    run_dir = runs_dir / started(proc.stdout)["run_id"]
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 90, "the script forked")
    wait_until(lambda: any(r["kind"] == "step" for r in events(run_dir)), 120, "the run's first step")
    return run_dir, int(pid_file.read_text())


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_stop_ends_a_forked_child_that_keeps_the_lock_and_delete_then_works(isolated, runs_dir):
    run_dir, child = _started_forker(isolated, runs_dir, "stay")
    try:
        stop = amptui("stop", run_dir.name, "--grace", "60", "--runs-dir", str(runs_dir))
        assert stop.returncode == 0, (stop.stdout, stop.stderr)
        assert stop.stdout.startswith(f"run {run_dir.name}: stopped at step"), stop.stdout
        wait_until(lambda: gone(child), 30, "the forked child ended with its group")
        assert not runs.writer_alive(run_dir)[0]
        delete = amptui("runs", "delete", run_dir.name, "--yes", "--runs-dir", str(runs_dir))
        assert delete.returncode == 0 and not run_dir.exists(), (delete.stdout, delete.stderr)
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_child_that_left_the_group_is_named_by_stop_and_delete_until_it_ends(isolated, runs_dir):
    run_dir, child = _started_forker(isolated, runs_dir, "escape")
    try:
        stop = amptui("stop", run_dir.name, "--grace", "60", "--runs-dir", str(runs_dir))
        assert stop.returncode == 1, (stop.stdout, stop.stderr)
        said = " ".join((stop.stdout + stop.stderr).split())
        assert f"pid {child}" in said and "still hold" in said, said
        assert not gone(child)  # not provably the run's own process: listed, never signalled
        line = one_clear_line(amptui("runs", "delete", run_dir.name, "--yes", "--runs-dir", str(runs_dir)))
        assert f"pid {child}" in line and "holds" in line, line
        assert run_dir.exists()
        os.kill(child, signal.SIGKILL)  # what the user is told to do
        wait_until(lambda: gone(child), 30, "the child ended")
        wait_until(lambda: not runs.writer_alive(run_dir)[0], 30, "the lock let go")
        delete = amptui("runs", "delete", run_dir.name, "--yes", "--runs-dir", str(runs_dir))
        assert delete.returncode == 0 and not run_dir.exists(), (delete.stdout, delete.stderr)
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)
