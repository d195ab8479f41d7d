"""Issue 40, "Done when": a read-only dashboard on a real terminal (tmux), as `amptui serve
--read-only` starts it (AMPTUI_READ_ONLY=1), whose `S` leaves a running A/B running. Judged by the
A/B's own files and processes, not the notice (its text comes split by escape codes); the same keys
without read-only cancel it, so the test can see a cancel when one happens."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.dashboard import QUICK, copy_runs
from support.tmux import Tmux
from support.waits import wait_until

from amptui.core.run.runs import launch_identity
from amptui.dashboard.screens.keys import READ_ONLY_ENV
from amptui.jobs import groups

pytestmark = pytest.mark.slow
AMPTUI = Path(sys.executable).parent / "amptui"


def terminal_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell: this venv's amptui, a 256-colour terminal, no runs folder from the caller."""
    env = dict(os.environ, TERM="xterm-256color", XDG_CONFIG_HOME=str(tmp_path / "config"), COLORTERM="")
    for name in ("AMPTUI_RUNS_DIR", "TMUX", READ_ONLY_ENV):
        env.pop(name, None)
    return env


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.timeout(180)
@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "control"])
def test_s_in_a_read_only_dashboard_on_a_terminal_leaves_a_running_ab_running(tmp_path, read_only):
    root = copy_runs(tmp_path / "runs")
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # stands in for `amptui ab`
    group = groups.create(root, "quickstart", "quickstart", {}, None, lambda g: launch_identity(driver.pid))
    group.update(state="running", runs=[QUICK], variants=["fp32", "bf16"])
    env = terminal_env(tmp_path)
    if read_only:
        env[READ_ONLY_ENV] = "1"
    tmux = Tmux(tmp_path, env)
    try:
        tmux.type_line(f"{AMPTUI} watch {QUICK} --runs-dir runs")
        tmux.wait_for(lambda s: QUICK in s and "Detach" in s, 60, "the run screen")
        tmux.send("S")
        tmux.send("?")  # keys are handled in order: once the help shows, S has been handled
        tmux.wait_for(lambda s: "Keys of the run screen" in s, 30, "the help after S")
        if read_only:
            assert not group.cancel_file.exists()
            assert driver.poll() is None
            assert groups.find(root, group.group_id).state == "running"
        else:
            wait_until(group.cancel_file.exists, 30, "the A/B's cancel file")
    finally:
        tmux.kill()
        driver.kill()
        driver.wait()
