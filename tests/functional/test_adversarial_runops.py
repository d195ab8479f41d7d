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
import time
from pathlib import Path

import pytest
from support.adversarial_runops import FACTORY, session, tree
from support.dashboard import Notes, async_test, settled, until

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.core.run import runlock, runops, runs, trust
from amptui.jobs import launch


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
def test_delete_is_refused_while_anyone_holds_the_lock_and_leaves_nothing_behind(runs_dir, monkeypatch):
    from amptui.core.config import presets

    # the lock's retry (0.5 s: rides over a reader's probe) short here: the holder never lets go
    monkeypatch.setattr(runlock, "_RETRY_S", 0.05)

    run_dir, _ = launch.create_run(presets.find_preset("quickstart"), {"run.device": "cpu"}, runs_dir)
    (run_dir / "run.json").write_text("{ damaged")
    with lock_held_elsewhere(run_dir):
        with pytest.raises(UserError, match="running; stop it before deleting it"):
            runops.delete_run(run_dir)
        assert (run_dir / "config.toml").is_file()
    runops.delete_run(run_dir)
    assert not run_dir.exists() and list(runs_dir.iterdir()) == []


@async_test
async def test_the_dashboards_delete_refuses_a_run_that_started_after_the_question(runs_dir, monkeypatch):
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
        monkeypatch.setattr(runlock, "_RETRY_S", 0.05)  # as above: the holder never lets go
        with lock_held_elsewhere(run_dir):
            await pilot.press("y")
            await until(pilot, lambda: notes)
            assert "stop it before deleting" in notes.text() and (run_dir / "config.toml").is_file()


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
