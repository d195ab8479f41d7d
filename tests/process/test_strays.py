"""A test that fails or times out must not leave what it started running (a detached trainer in its own
session, which a `subprocess` timeout never reaches, loaded the machine for every later test): conftest's
`stops_what_it_started` ends, after a failed or slow test, each live process carrying the test's mark or
working in its folder (tests/support/strays.py): SIGTERM to its group, SIGKILL after a grace."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import strays
from support.cli import TINY_QUICKSTART, started
from support.waits import wait_until

from amptui.jobs.spawn import spawn

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"


@pytest.mark.slow
def test_what_a_test_started_detached_is_ended_and_nothing_else(cli, runs_dir, tmp_path):
    mark = os.environ[strays.MARK]
    assert mark, "conftest marks each test's processes"
    trainer = started(cli("run", "quickstart", *TINY_QUICKSTART, "--set", "run.max_steps=0",
                          "--set", "run.epochs=100000", "--detach", check=True).stdout)
    stubborn = spawn([sys.executable, "-c", STUBBORN], tmp_path / "stubborn.log")  # ignores SIGTERM
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], cwd="/",
                                env={k: v for k, v in os.environ.items() if k != strays.MARK},
                                start_new_session=True)
    try:
        wait_until(lambda: "up" in (tmp_path / "stubborn.log").read_text(), 60, "the stubborn child to start")
        found = set(strays.started_by(mark, tmp_path))
        assert {trainer["pid"], stubborn.pid} <= found and outsider.pid not in found, found
        assert {trainer["pid"], stubborn.pid} <= set(strays.stop_started(mark, tmp_path, grace_s=0.5))
        assert not strays._alive(stubborn.pid)  # it ignored SIGTERM: killed after the grace
        wait_until(lambda: not strays._alive(trainer["pid"]), 30, "the detached trainer to end")
        assert outsider.poll() is None  # not this test's: left alone
        assert strays.started_by(mark, tmp_path) == []
    finally:
        outsider.kill()
        outsider.wait()
