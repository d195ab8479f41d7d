"""Run storage: ids, folders, and status from events plus the process table."""

import subprocess
import sys
import time

import pytest

from amptui.core.run import runs
from amptui.core.stream.events import EventWriter


def make_run(root, name="r1", records=(), pid=None):
    path = root / name
    path.mkdir(parents=True)
    (path / "config.toml").write_text('[run]\nname = "quickstart"\n')
    with EventWriter(path / "events.jsonl") as w:
        for kind, fields in records:
            w.emit(kind, **fields)
    if pid is not None:
        runs.write_launch_info(path, pid, ["test"])
    return path


@pytest.mark.slow
def test_running_while_the_process_lives_then_killed(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = make_run(tmp_path, "live", [("start", {"total_steps": 5})], pid=proc.pid)
        assert runs.load_run(path).status == "running"
    finally:
        proc.kill()
        proc.wait()
    assert runs.load_run(path).status == "killed"


@pytest.mark.slow
def test_a_running_runs_duration_only_grows(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        t0 = time.time()
        path = make_run(tmp_path, "live", [("start", {"total_steps": 5, "t": t0 - 30}),
                                           ("step", {"step": 1, "t": t0 - 20})], pid=proc.pid)
        first = runs.load_run(path).duration_s
        time.sleep(1.1)
        second = runs.load_run(path).duration_s
        assert 30 <= first < second, (first, second)
    finally:
        proc.kill()
        proc.wait()
