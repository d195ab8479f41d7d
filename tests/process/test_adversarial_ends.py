"""How runs end when they do not end politely (issue 32, findings 4-10): a stop nobody answers, a
full disk, a config.toml that is not a file, a live run whose lock and run.json are gone, a script's
exit code, a huge keymap binding. Real processes and files; each test under a timeout."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support.cli import amptui, one_clear_line, started
from support.waits import gone, wait_until

from amptui.core.run import runs

# A script that deadlocks after os.fork(): the child waits for a lock whose holder thread does
# not exist in it; the parent waits for the child. It never reaches an optimizer step.
DEADLOCK = """import os, sys, threading, time
lock = threading.Lock()
def hold():
    with lock:
        time.sleep(3600)
threading.Thread(target=hold, daemon=True).start()
time.sleep(0.2)
child = os.fork()
if child == 0:
    lock.acquire()
    os._exit(0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{os.getpid()} {child}")
os.waitpid(child, 0)
"""




# --- finding 4: a stop nobody answers ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(180)
def test_stop_of_a_script_that_deadlocked_after_fork_kills_it_and_says_so(isolated, runs_dir):
    script, pids = isolated / "deadlock.py", isolated / "pids"
    script.write_text(DEADLOCK)
    proc = amptui("run", "--detach", "--script", str(script), "--runs-dir", str(runs_dir), "--", str(pids), check=True)
    run_dir = runs_dir / started(proc.stdout)["run_id"]
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, 90, "the script forked")
    parent, child = (int(p) for p in pids.read_text().split())
    try:
        stop = amptui("stop", run_dir.name, "--grace", "2", "--runs-dir", str(runs_dir))
        assert stop.returncode == 0, (stop.stdout, stop.stderr)
        assert stop.stdout.strip() == f"run {run_dir.name}: stopped (killed after 2 s without an answer)"
        assert "waiting up to 2 s" in stop.stderr  # it said what it waits for before it waited
        wait_until(lambda: gone(parent) and gone(child), 30, "both processes gone")
        assert runs.load_run(run_dir).status == "killed"
    finally:
        for pid in (parent, child):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_stop_kills_a_deadlocked_script_that_left_its_folder_in_a_relative_runs_folder(isolated, runs_dir):
    """The writer's proof reads RUN_DIR from its command line: `--runs-dir runs` puts a relative one
    there, and a script that changes folder (Hydra does) must still be proved the run's writer."""
    script, pids = isolated / "deadlock.py", isolated / "pids"
    script.write_text("import os\nos.chdir('/')\n" + DEADLOCK)
    proc = amptui("run", "--detach", "--script", str(script), "--runs-dir", "runs", "--", str(pids), check=True)
    run_dir = runs_dir / started(proc.stdout)["run_id"]
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, 90, "the script forked")
    parent, child = (int(p) for p in pids.read_text().split())
    try:
        stop = amptui("stop", run_dir.name, "--grace", "2", "--runs-dir", "runs")
        assert stop.returncode == 0, (stop.stdout, stop.stderr)
        assert stop.stdout.strip() == f"run {run_dir.name}: stopped (killed after 2 s without an answer)"
        wait_until(lambda: gone(parent) and gone(child), 30, "both processes gone")
    finally:
        for pid in (parent, child):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


# --- finding 8: a script's exit code is amptui's ---------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("body,code,words", [
    ("import sys\nsys.exit(3)\n", 3, "exit code 3"),
    ("import os\nos._exit(5)\n", 5, "exit code 5"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", 137, "killed by SIGKILL"),
])
def test_a_scripts_exit_code_and_signal_are_passed_on_and_the_run_failed_says_it(isolated, runs_dir, body,
                                                                                  code, words):
    script = isolated / "ends.py"
    script.write_text(body)
    proc = amptui("run", "--script", str(script), "--runs-dir", str(runs_dir))
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr
    (info,) = runs.list_runs(runs_dir)
    assert info.status == "failed" and words in info.error


# --- finding 5: a full disk before `ab` or `tune` -----------------------------------------------------------

def small_disk(place, size_k: int, free_k: int):
    """A runs folder on a tmpfs of `size_k` KiB with about `free_k` KiB left free (skipped where
    mount is not permitted)."""
    place.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k", "tmpfs", str(place)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        (place / "runs").mkdir()
        fd = os.open(place / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            left = (size_k - free_k) * 1024
            while left > 0 and (written := os.write(fd, b"x" * min(4096, left))):
                left -= written
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)
        yield place / "runs"
    finally:
        subprocess.run(["umount", "-l", str(place)], capture_output=True)


@pytest.fixture
def full_disk(tmp_path):
    """A runs folder on a 64 KiB tmpfs filled to the last block."""
    yield from small_disk(tmp_path / "full", 64, 0)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", [["ab", "quickstart"], ["ab", "quickstart", "--detach"], ["tune", "quickstart"]])
def test_a_full_disk_before_ab_or_tune_is_one_line_and_leaves_nothing(full_disk, command):
    line = one_clear_line(amptui(*command, "--runs-dir", str(full_disk)))
    assert "No space left on device" in line
    assert list(full_disk.iterdir()) == []  # no .ab folder, no lock, no result file


@pytest.fixture
def nearly_full_disk(tmp_path):
    """A runs folder on a 1 MiB tmpfs with room for a few hundred step records."""
    yield from small_disk(tmp_path / "small", 1024, 300)


# --- finding 10 (a): the disk filling mid-run -------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_disk_that_fills_mid_run_ends_the_run_failed_with_no_space_left(nearly_full_disk):
    runs_dir = nearly_full_disk
    proc = amptui("run", "quickstart", "--set", "run.device=cpu", "--set", "data.batch_size=8",
                  "--set", "data.img_size=8", "--set", "model.width=4", "--set", "data.train_samples=100000",
                  "--set", "data.val_samples=16", "--set", "log.every=1", "--set", "run.max_steps=100000",
                  "--set", "log.checkpoint_every_steps=1000000", "--runs-dir", str(runs_dir),
                  env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 1 and "No space left on device" in proc.stderr, (proc.stdout, proc.stderr[-500:])
    (info,) = runs.list_runs(runs_dir)
    assert info.status == "failed" and "No space left on device" in info.error
    run_dir = runs_dir / info.run_id
    lines = (run_dir / "events.jsonl").read_text().split("\n")
    assert lines[-1] == "" and json.loads(lines[-2])["kind"] == "end"  # whole lines, the last the end
    assert all(json.loads(line) for line in lines[:-1])
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".")) == []  # the reserve is gone
