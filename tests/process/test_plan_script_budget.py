"""Issue 50.11: `plan --script` on a script that never reaches an optimizer step waited silently for
ever, and killed, left the script (in a process session of its own) running. Now its first step has
a budget (`--budget`), past which the script is ended and the plan says why in one line; and the
script's session ends with the plan, however the plan is ended. Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from support.cli import amptui
from support.waits import gone, wait_until

# Writes its pid, then never steps (a data loader that hangs, a script waiting for a server).
NEVER_STEPS = """import os, sys, time
with open(sys.argv[1], "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(600)
"""


def running(script: str) -> list[int]:
    """The live processes whose command line names `script`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if script in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def never_steps(tmp_path):
    script, pid_file = tmp_path / "never.py", tmp_path / "script.pid"
    script.write_text(NEVER_STEPS)
    return str(script), pid_file


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_script_that_never_steps_is_ended_at_its_budget_with_one_clear_line(isolated, runs_dir):
    script, pid_file = never_steps(isolated)
    done = amptui("plan", "--script", script, "--for", "H100", "--budget", "5", "--runs-dir", str(runs_dir),
                  "--", str(pid_file))
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "made no optimizer step in 5 s (--budget)" in done.stderr, done.stderr
    wait_until(lambda: not running(script), 30, "the script ended")  # (it may have been ended before its first line)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl_c_twice"])
def test_the_scripts_session_ends_when_the_plan_is_stopped(isolated, runs_dir, signum):
    script, pid_file = never_steps(isolated)
    plan = subprocess.Popen([sys.executable, "-m", "amptui", "plan", "--script", script, "--for", "H100",
                             "--runs-dir", str(runs_dir), "--", str(pid_file)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 120, "the script started")
        pid = int(pid_file.read_text())
        assert os.getsid(pid) != os.getsid(plan.pid)  # a session of its own: the plan's end used to leave it
        plan.send_signal(signum)
        if signum == signal.SIGINT:  # the first asks the script to stop at its next step (never comes);
            time.sleep(1)             # the second leaves it: the plan ends, and the script with it
            plan.send_signal(signum)
        plan.wait(timeout=60)
        wait_until(lambda: gone(pid), 30, "the script ended with the plan")
    finally:
        if plan.poll() is None:
            plan.kill()
        if pid_file.exists() and pid_file.read_text().strip() and not gone(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
