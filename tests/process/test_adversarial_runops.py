"""A runs folder is data, the process-level half (issue 24, findings 2, 4, 5, 6, 10): code named by a
copied run folder is not run unasked, delete never removes a live run, `stop` of a long run is not
called killed, a stop sent while a resume checks is not lost, and every view tells one duration and
liveness from the lock. Real processes and files; tiny CPU-pinned runs; each test under a timeout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.adversarial_runops import FACTORY, answer_on_terminal, tree
from support.cli import amptui, one_clear_line, started
from support.records import events_so_far, wait_for_step
from support.waits import wait_until

from amptui.core.errors import UserError
from amptui.core.run import runlock, runops, runs, trust
from amptui.jobs import launch

TINY = ["--set", "run.device=cpu", "--set", "data.batch_size=8", "--set", "data.img_size=8",
        "--set", "model.width=4", "--set", "data.train_samples=400", "--set", "data.val_samples=16",
        "--set", "log.every=1", "--set", "log.checkpoint_every_steps=2", "--set", "run.epochs=100000",
        "--set", "run.max_steps=100000"]


@pytest.fixture(autouse=True)
def one_thread_per_trainer(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def no_trainer_left(isolated):
    """A test that fails midway leaves no trainer of its runs folder running."""
    yield
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        if any(str(isolated) in part for part in proc.info["cmdline"] or []):
            try:
                proc.kill()
            except psutil.Error:
                pass


# --- helpers -------------------------------------------------------------------------------------



def start_detached(runs_dir: Path, *extra: str) -> Path:
    proc = amptui("run", "quickstart", *TINY, *extra, "--detach", "--runs-dir", str(runs_dir), check=True)
    return runs_dir / started(proc.stdout)["run_id"]


def stopped_with_checkpoint(runs_dir: Path, *extra: str) -> Path:
    """A run stopped (by `amptui stop`) after its first checkpoint: what `resume` is for."""
    run_dir = start_detached(runs_dir, *extra)
    wait_until(lambda: any(r["kind"] == "checkpoint" for r in events_so_far(run_dir)), 120, "first checkpoint")
    proc = amptui("stop", run_dir.name, "--runs-dir", str(runs_dir))
    assert proc.returncode == 0 and "stopped" in proc.stdout, (proc.stdout, proc.stderr)
    wait_until(lambda: runlock.holder(run_dir) is None, 30, "the trainer let go of the lock")
    return run_dir


def status_of(runs_dir: Path, run_id: str) -> dict:
    proc = amptui("runs", "--format", "json", "--runs-dir", str(runs_dir), check=True)
    return next(r for r in json.loads(proc.stdout) if r["run_id"] == run_id)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_preset_naming_os_system_runs_no_shell_command(isolated, runs_dir):
    witness = isolated / "F"
    (isolated / "evil.toml").write_text(f'[model]\nfactory = "os:system"\ncommand = "id > {witness}"\n')
    line = one_clear_line(amptui("run", str(isolated / "evil.toml"), "--runs-dir", str(runs_dir)))
    assert "os:system" in line and "not your code" in line
    line = one_clear_line(amptui("run", "quickstart", "--set", 'model.factory="os:system"', "--runs-dir", str(runs_dir)))
    assert "os:system" in line
    assert not witness.exists() and not runs_dir.exists()


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_resume_of_a_copied_run_folder_naming_code_asks_first(isolated, runs_dir):
    (isolated / "tiny_model.py").write_text(FACTORY)
    marks = isolated / "imports.log"
    original = stopped_with_checkpoint(runs_dir, "--set", 'model.factory="tiny_model:build"')
    copy = runs_dir / (original.name[:-4] + "cafe")
    shutil.copytree(original, copy)
    imported, before = marks.read_text(), tree(copy)

    # No terminal, no --trust-code: one line, exit 2, nothing changed, no code imported.
    line = one_clear_line(amptui("resume", copy.name, "--detach", "--runs-dir", str(runs_dir)))
    assert "not given on this machine" in line and "tiny_model:build" in line and "--trust-code" in line
    assert tree(copy) == before and marks.read_text() == imported

    # On a terminal it asks; "n" resumes nothing.
    code, drawn = answer_on_terminal(["resume", copy.name, "--runs-dir", str(runs_dir)], "n")
    assert code == 2 and "not given on this machine" in drawn and "tiny_model:build" in drawn, drawn
    assert "Traceback" not in drawn and tree(copy) == before and marks.read_text() == imported

    # The lists mark both; only the copy as foreign.
    listed = {r["run_id"]: r for r in json.loads(amptui("runs", "--format", "json", "--runs-dir",
                                                        str(runs_dir), check=True).stdout)}
    assert listed[copy.name]["code"] == ["model.factory = 'tiny_model:build'"]
    assert listed[copy.name]["code_given_here"] is False and listed[original.name]["code_given_here"] is True
    table = amptui("runs", "--runs-dir", str(runs_dir), check=True, env={"COLUMNS": "200"}).stdout
    assert "[foreign code]" in next(line for line in table.splitlines() if copy.name in line)
    assert "[code]" in next(line for line in table.splitlines() if original.name in line)

    # The folder it was given for resumes without a question; the copy with --trust-code.
    resumed = amptui("resume", original.name, "--detach", "--runs-dir", str(runs_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert amptui("stop", original.name, "--runs-dir", str(runs_dir)).returncode == 0
    resumed = amptui("resume", copy.name, "--detach", "--trust-code", "--runs-dir", str(runs_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert amptui("stop", copy.name, "--runs-dir", str(runs_dir)).returncode == 0
    assert trust.foreign_code(copy) == []  # a yes is remembered for this folder


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_running_run_with_damaged_run_json_is_never_deleted(runs_dir):
    run_dir = start_detached(runs_dir)
    step = wait_for_step(run_dir, 2)
    (run_dir / "run.json").write_text("\x00 not json")
    with pytest.raises(UserError, match="stop it before deleting"):
        runops.delete_run(run_dir)
    wait_for_step(run_dir, step + 2)  # the trainer goes on writing its own folder
    assert status_of(runs_dir, run_dir.name)["status"] == "running"
    assert amptui("stop", run_dir.name, "--runs-dir", str(runs_dir)).returncode == 0
    wait_until(lambda: runlock.holder(run_dir) is None, 30, "the trainer let go of the lock")
    runops.delete_run(run_dir)
    assert not run_dir.exists()


# --- finding 5: stop and runs probe the lock before they read events ---------------------------------------

def pad_events(run_dir: Path, size: int = 1_000_000) -> None:
    """Make the run's history ~1 MB: its first session's records again, as if resumed many times."""
    session = (run_dir / "events.jsonl").read_bytes()
    with open(run_dir / "events.jsonl", "ab") as fh:
        while (run_dir / "events.jsonl").stat().st_size < size:
            fh.write(session)
            fh.flush()


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_stop_of_a_run_with_a_megabyte_of_events_says_stopped_and_runs_never_says_killed(runs_dir):
    run_dir = stopped_with_checkpoint(runs_dir)
    pad_events(run_dir)
    assert (run_dir / "events.jsonl").stat().st_size >= 1_000_000
    seen: list[str] = []
    for _ in range(2):
        assert amptui("resume", run_dir.name, "--detach", "--runs-dir", str(runs_dir)).returncode == 0
        offset_steps = len([r for r in events_so_far(run_dir) if r["kind"] == "step"])
        wait_until(lambda: len([r for r in events_so_far(run_dir) if r["kind"] == "step"]) > offset_steps + 1,
                   120, "the resumed session's steps")
        done = threading.Event()

        def watch() -> None:  # `amptui runs`' reading, over and over while the stop happens
            while not done.is_set():
                seen.append(runs.load_run(run_dir).status)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            proc = amptui("stop", run_dir.name, "--runs-dir", str(runs_dir))
        finally:
            done.set()
            watcher.join(30)
        assert proc.returncode == 0 and "stopped at step" in proc.stdout, (proc.stdout, proc.stderr)
        assert runs.load_run(run_dir).status == "stopped"
    assert "killed" not in seen and "running" in seen and "stopped" in seen, sorted(set(seen))


# --- finding 6: a stop sent while a resume still checks -----------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_stop_sent_while_the_resume_checks_is_honoured(runs_dir):
    run_dir = stopped_with_checkpoint(runs_dir)
    # Without last.json the resume reads last.pt with torch to check it: a check of seconds.
    (run_dir / "checkpoints" / "last.json").unlink()
    steps_before = max(r["step"] for r in events_so_far(run_dir) if r["kind"] == "step")
    resume = subprocess.Popen([sys.executable, "-m", "amptui", "resume", run_dir.name, "--detach", "--runs-dir",
                               str(runs_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (runlock.holder(run_dir) or {}).get("pid") == resume.pid, 60,
                   "the resume holds the lock, checking", step=0.01)
        assert not any(r["kind"] == "start" and r.get("resumed_from") for r in events_so_far(run_dir))
        info = launch.stop(run_dir, wait_s=150)  # what `amptui stop` does
        out, err = resume.communicate(timeout=60)
    finally:
        if resume.poll() is None:
            resume.kill()
    assert resume.returncode == 0, err
    assert info.status == "stopped", info
    records = events_so_far(run_dir)
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "stopped"
    # it stopped at the first step record of the new session, not trained on
    assert records[-1]["steps"] <= steps_before + 3, (steps_before, records[-1])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_script_run_here_is_marked_code_not_foreign(isolated, runs_dir):
    """`python train.py` with a Monitor names its script (run.script); the user ran it here."""
    (isolated / "train.py").write_text("import amptui\nwith amptui.Monitor('mine') as mon:\n"
                                       "    for i in range(3):\n        mon.step(1.0 / (i + 1), batch_size=4)\n")
    proc = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = runs_dir.iterdir()
    info = runs.load_run(run_dir)
    assert info.code and info.code[0].startswith("run.script") and info.code_given_here, info
    assert trust.mark(info.code, info.code_given_here) == "[code]"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_running_run_without_its_lock_file_and_with_damaged_run_json_is_never_deleted(runs_dir):
    run_dir = start_detached(runs_dir)
    step = wait_for_step(run_dir, 2)
    (run_dir / "run.json").write_text("\x00 not json")
    (run_dir / "lock").unlink()
    with pytest.raises(UserError, match="stop it before deleting"):
        runops.delete_run(run_dir)
    wait_for_step(run_dir, step + 2)  # the trainer goes on writing its own folder
    assert (run_dir / "config.toml").is_file()
