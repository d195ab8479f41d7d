"""A runs folder is data, the process-level half (issue 24, findings 2, 4, 5, 6, 10): code named by a
copied run folder is not run unasked, delete never removes a live run, `stop` of a long run is not
called killed, a stop sent while a resume checks is not lost, and every view tells one duration and
liveness from the lock. Real processes and files; tiny CPU-pinned runs; each test under a timeout."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.cli import amptui, one_clear_line, started
from support.dashboard import Notes, async_test, settled, until
from support.records import events_so_far, wait_for_step
from support.terminal import amptui_on_pty
from support.waits import wait_until

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.core.run import runlock, runops, runs, trust
from amptui.jobs import launch

TINY = ["--set", "run.device=cpu", "--set", "data.batch_size=8", "--set", "data.img_size=8",
        "--set", "model.width=4", "--set", "data.train_samples=400", "--set", "data.val_samples=16",
        "--set", "log.every=1", "--set", "log.checkpoint_every_steps=2", "--set", "run.epochs=100000",
        "--set", "run.max_steps=100000"]

# A user's model factory that leaves a mark each time it is imported: the proof that code ran.
FACTORY = """import os
import torch.nn as nn
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imports.log"), "a") as fh:
    fh.write(f"{os.getpid()}\\n")

def build(num_classes=10):
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, num_classes))
"""


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


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under `path`: (size, mtime_ns), to show that nothing changed."""
    return {str(p.relative_to(path)): (p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if not p.is_dir()}


def answer_on_terminal(args: list[str], answer: str, timeout: float = 120) -> tuple[int, str]:
    """Run `amptui ARGS` on a pseudo-terminal; when it asks ([y/N]), type `answer`. (exit code, output)"""
    return amptui_on_pty(args, answer=answer, timeout=timeout)


def status_of(runs_dir: Path, run_id: str) -> dict:
    proc = amptui("runs", "--format", "json", "--runs-dir", str(runs_dir), check=True)
    return next(r for r in json.loads(proc.stdout) if r["run_id"] == run_id)


@contextlib.contextmanager
def lock_held_elsewhere(run_dir: Path):
    """Another process holds the run's lock (as a live trainer would) for the `with` block."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from amptui.core.run import runlock; "
                               "runlock.acquire(sys.argv[1]); print('held', flush=True); time.sleep(60)",
                               str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait(10)


# --- finding 2: presets and run folders that name code ------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("ref", ["os:system", "subprocess:getoutput", "json:loads", "amptui.trainer.models:build_model"])
def test_a_factory_cannot_take_a_builtin_name(ref):
    with pytest.raises(UserError) as info:
        cfgmod.build_config({"model": {"factory": ref, "command": "id"}})
    text = str(info.value)
    assert "\n" not in text and ref in text and "not your code" in text, text
    with pytest.raises(UserError):
        cfgmod.build_config({"data": {"factory": ref}})


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


def test_a_run_created_here_is_trusted_and_its_copy_or_an_edited_config_is_not(isolated, runs_dir):
    (isolated / "tiny_model.py").write_text(FACTORY)
    from amptui.core.config import presets

    run_dir, cfg = launch.create_run(presets.find_preset("quickstart"),
                                     {"model.factory": "tiny_model:build", "run.device": "cpu", "data.img_size": 8},
                                     runs_dir)
    refs = trust.code_refs(cfg)
    assert refs == ["model.factory = 'tiny_model:build'"]
    assert trust.foreign_code(run_dir) == [] and runs.load_run(run_dir).code_given_here
    copy = runs_dir / (run_dir.name + "-copy")
    shutil.copytree(run_dir, copy)
    assert trust.foreign_code(copy) == refs
    info = runs.load_run(copy)
    assert info.code == refs and not info.code_given_here
    # the folder itself, its config edited to name other code: not what was given here
    text = (run_dir / "config.toml").read_text().replace("tiny_model:build", "other_model:build")
    (run_dir / "config.toml").write_text(text)
    assert trust.foreign_code(run_dir) == ["model.factory = 'other_model:build'"]
    # a run naming no code is never marked
    plain, _ = launch.create_run(presets.find_preset("quickstart"), {"run.device": "cpu"}, runs_dir)
    assert runs.load_run(plain).code == [] and trust.mark([], True) == ""


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


def foreign_stopped_run(runs_dir: Path) -> Path:
    """A stopped run with a checkpoint file, copied in from elsewhere, whose config names a factory."""
    from support.dashboard import FIXTURES, QUICK

    run_dir = runs_dir / QUICK
    shutil.copytree(FIXTURES / "runs" / QUICK, run_dir)
    config = (run_dir / "config.toml").read_text().replace('[model]\n', '[model]\nfactory = "tiny_model:build"\n', 1)
    (run_dir / "config.toml").write_text(config)
    end = json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])
    end["status"] = "stopped"
    lines = (run_dir / "events.jsonl").read_text().splitlines()[:-1] + [json.dumps(end)]
    (run_dir / "events.jsonl").write_text("\n".join(lines) + "\n")
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    (run_dir / "checkpoints" / "last.pt").write_bytes(b"not a checkpoint")
    return run_dir


@async_test
async def test_the_dashboard_asks_before_resuming_a_run_with_foreign_code(isolated, runs_dir):
    """R on a copied run naming code opens a question; no says nothing ran, nothing changed."""
    from support.dashboard import QUICK, select_run

    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.home.screen import HomeScreen
    from amptui.dashboard.screens.modals import ConfirmModal
    from amptui.dashboard.widgets.runtable import RunTable

    run_dir = foreign_stopped_run(runs_dir)
    before = tree(run_dir)
    app = make_app(runs_dir)
    async with app.run_test(size=(140, 34)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.query_one(RunTable).row_count)
        table = app.screen.query_one(RunTable)
        assert "[foreign code]" in str(table.get_row(QUICK)[4])
        notes = Notes().install(app)
        await select_run(pilot, QUICK)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        assert "not given on this machine" in str(app.screen.question) and "tiny_model:build" in app.screen.question
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await settled(pilot)  # the answer's callback has run: it said nothing
        assert not notes
    assert tree(run_dir) == before


# --- finding 4: delete takes the run lock --------------------------------------------------------------

@pytest.mark.timeout(60)
def test_delete_is_refused_while_anyone_holds_the_lock_and_leaves_nothing_behind(runs_dir):
    from amptui.core.config import presets

    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), {"run.device": "cpu"}, runs_dir)
    (run_dir / "run.json").write_text("{ damaged")
    with lock_held_elsewhere(run_dir):
        with pytest.raises(UserError, match="running; stop it before deleting it"):
            runops.delete_run(run_dir)
        assert (run_dir / "config.toml").is_file()
    runops.delete_run(run_dir)
    assert not run_dir.exists() and list(runs_dir.iterdir()) == []


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


@async_test
async def test_the_dashboards_delete_refuses_a_run_that_started_after_the_question(runs_dir):
    """The list said stopped when x asked; by the yes a writer holds the lock: nothing is removed."""
    from support.dashboard import FAILED, FIXTURES, home_ready, select_run

    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.modals import ConfirmModal

    run_dir = runs_dir / FAILED
    shutil.copytree(FIXTURES / "runs" / FAILED, run_dir)
    app = make_app(runs_dir)
    async with app.run_test(size=(140, 34)) as pilot:
        await home_ready(pilot, 1)
        notes = Notes().install(app)
        await select_run(pilot, FAILED)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        with lock_held_elsewhere(run_dir):
            await pilot.press("y")
            await until(pilot, lambda: notes)
            assert "stop it before deleting" in notes.text() and (run_dir / "config.toml").is_file()


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


@pytest.mark.timeout(30)
def test_a_resume_clears_only_stop_requests_older_than_itself(runs_dir):
    run_dir = runs_dir / "r"
    run_dir.mkdir(parents=True)
    launch.request_stop(run_dir)
    began = time.time()
    launch.clear_old_stop(run_dir, began)
    assert not (run_dir / "stop-requested").exists()
    launch.request_stop(run_dir)
    launch.clear_old_stop(run_dir, began)
    assert (run_dir / "stop-requested").exists()
    os.mkfifo(run_dir / "fifo")
    (run_dir / "stop-requested").unlink()
    os.symlink(run_dir / "fifo", run_dir / "stop-requested")  # never opened through, never waited on
    launch.clear_old_stop(run_dir, time.time())
    assert not os.path.lexists(run_dir / "stop-requested")


# --- finding 10: one duration, liveness from the lock ----------------------------------------------------

def write_records(run_dir: Path, records: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.toml").write_text('[run]\nname = "quickstart"\ndevice = "cpu"\n')
    (run_dir / "events.jsonl").write_text("".join(json.dumps({"v": 1, "rank": 0, **r}) + "\n" for r in records))


def session(t0: float, t1: float, status: str, steps: int, resumed_from: int = 0) -> list[dict]:
    return [{"kind": "start", "t": t0, "run_id": "r", "preset": "quickstart", "precision": "fp32",
             "total_steps": 100, "resumed_from": resumed_from},
            {"kind": "step", "t": (t0 + t1) / 2, "step": steps, "epoch": 1, "loss": 1.0},
            {"kind": "end", "t": t1, "status": status, "steps": steps}]


@pytest.mark.timeout(60)
def test_every_view_tells_one_duration_after_resumes_and_a_failed_resume_adds_no_downtime(runs_dir):
    from amptui.core.comparison import runsummary
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.runtail import RunTail

    run_dir = runs_dir / "20261121-000000-quickstart-aaaa"
    t = 1_795_000_000.0
    # 10 s, stopped, an hour's wait, a resume that failed before its start record, 20 s, completed
    write_records(run_dir, session(t, t + 10, "stopped", 5)
                  + [{"kind": "end", "t": t + 3600, "status": "failed", "steps": 0,
                      "error": {"type": "UserError", "message": "no data"}}]
                  + session(t + 7200, t + 7220, "completed", 9, resumed_from=5))
    model = RunModel(run_dir.name)
    tail = RunTail(run_dir, model)
    while tail.poll():
        pass
    listed = runs.load_run(run_dir).duration_s
    compared = runsummary.summarize(run_dir).total_time_s
    assert listed == pytest.approx(30.0) and compared == pytest.approx(30.0)
    assert model.elapsed(t + 99_999) == pytest.approx(30.0)


@pytest.mark.timeout(60)
def test_the_run_screen_tells_liveness_from_the_lock_not_run_json(runs_dir):
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.runtail import RunTail

    t = time.time()
    run_dir = runs_dir / "20261121-000000-quickstart-bbbb"
    write_records(run_dir, session(t - 5, t, "x", 3)[:2])  # started, no end
    # run.json names this very (live) process, but nobody holds the lock: the writer is gone
    (run_dir / "run.json").write_text(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
    (run_dir / "lock").write_text("")
    model = RunModel(run_dir.name)
    RunTail(run_dir, model).poll()
    assert model.status == "killed" and runs.load_run(run_dir).status == "killed"
    # run.json names a dead pid (or is damaged), but a live process holds the lock
    (run_dir / "run.json").write_text("{ damaged")
    with lock_held_elsewhere(run_dir):
        model = RunModel(run_dir.name)
        RunTail(run_dir, model).poll()
        assert model.status == "running" and runs.load_run(run_dir).status == "running"


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


@async_test
async def test_the_run_screen_asks_before_resuming_a_run_with_foreign_code(isolated, runs_dir):
    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.modals import ConfirmModal
    from amptui.dashboard.screens.run.screen import RunScreen

    run_dir = foreign_stopped_run(runs_dir)
    before = tree(run_dir)
    app = make_app(runs_dir, watch=run_dir)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.status == "stopped"
                    and not app.screen.model.loading)
        notes = Notes().install(app)
        await until(pilot, lambda: app.screen.refusal("resume") is None)
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal))
        assert "not given on this machine" in app.screen.question
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RunScreen))
        await settled(pilot)  # the answer's callback has run: it said nothing
        assert not notes
    assert tree(run_dir) == before


# --- issue 32 finding 7: delete judges liveness by the lock and by the recorded pids ---------------------

def _session_by(run_dir: Path, pid: int, t: float) -> None:
    """The run's events: one session begun at `t` by process `pid`, no end record (still running)."""
    start = {"kind": "start", "t": t, "rank": 0, "run_id": run_dir.name, "preset": "quickstart", "config": {},
             "precision": "fp32", "world_size": 1, "device": {}, "torch": "", "host": os.uname().nodename,
             "pid": pid, "total_steps": 10}
    write_records(run_dir, [start, {"kind": "step", "t": t + 1, "rank": 0, "step": 1, "loss": 1.0}])


@pytest.mark.timeout(60)
def test_delete_refuses_a_live_writer_whose_lock_file_and_run_json_are_gone(runs_dir):
    from amptui.core.config import presets

    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), {"run.device": "cpu"}, runs_dir)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _session_by(run_dir, writer.pid, time.time() + 1)  # the writer began before its start record
        (run_dir / "run.json").write_text("{ damaged")
        (run_dir / "lock").unlink(missing_ok=True)
        before = tree(run_dir)
        with pytest.raises(UserError, match="stop it before deleting it"):
            runops.delete_run(run_dir)
        assert tree(run_dir) == before  # nothing removed, no lock file left behind
    finally:
        writer.kill()
        writer.wait(10)
    runops.delete_run(run_dir)  # the writer is gone: the run was killed, and deletes
    assert not run_dir.exists()


@pytest.mark.timeout(60)
def test_a_pid_reused_after_the_start_record_does_not_keep_a_run(runs_dir):
    from amptui.core.config import presets

    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), {"run.device": "cpu"}, runs_dir)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _session_by(run_dir, other.pid, time.time() - 3600)  # a record an hour older than that process
        (run_dir / "run.json").write_text("{ damaged")
        runops.delete_run(run_dir)
        assert not run_dir.exists()
    finally:
        other.kill()
        other.wait(10)


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
