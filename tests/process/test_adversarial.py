"""A careless and an unlucky user, for real: commands racing for one run, SIGKILLs at random
moments, damaged run files, hostile run ids and preset names, a read-only runs folder, and a
runs folder with hundreds of runs. Real processes and real files; tiny CPU-pinned runs."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from support.cli import amptui, one_clear_line, started
from support.dashboard import async_test, until
from support.paths import FIXTURES
from support.records import events_so_far
from support.waits import wait_until

from amptui.cli import main as cli
from amptui.core.run import runs
from amptui.core.run.runlock import RunLocked
from amptui.core.stream.events import EventReader, parse_line
from amptui.trainer import checkpoint

# A quickstart small enough for a loaded 2-core CI box: ~50 steps per epoch, a checkpoint every 2.
TINY = ["--set", "run.device=cpu", "--set", "data.batch_size=8", "--set", "data.img_size=8",
        "--set", "model.width=4", "--set", "data.train_samples=400", "--set", "data.val_samples=16",
        "--set", "log.every=1", "--set", "log.checkpoint_every_steps=2"]


@pytest.fixture(autouse=True)
def one_thread_per_trainer(monkeypatch):
    """These tiny models run 30x slower on a loaded 2-core box when torch's two OpenMP threads
    wait on each other; one thread each keeps the trainers this module starts quick."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


# --- helpers -------------------------------------------------------------------------------------

def start_detached(runs_dir: Path, max_steps: int) -> Path:
    # max_steps ends the run, not the epochs: a tiny model finishes quickstart's epochs in seconds
    proc = amptui("run", "quickstart", *TINY, "--set", f"run.max_steps={max_steps}", "--set", "run.epochs=100000",
                  "--detach",
                  "--runs-dir", str(runs_dir), check=True)
    return runs_dir / started(proc.stdout)["run_id"]


def trainer_pid(run_dir: Path) -> int:
    return json.loads((run_dir / "run.json").read_text())["pid"]


def trainers_of(run_dir: Path) -> list[psutil.Process]:
    """Live trainer processes whose command line names this run folder."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "amptui.trainer" in cmd and run_dir.name in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def kill_trainers(run_dir: Path) -> None:
    """SIGKILL the run's trainers and wait until each is gone or a zombie: matching command lines
    is not enough, an exiting process loses its command line before it closes its files."""
    procs = trainers_of(run_dir)
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    wait_until(lambda: all(_exited(p) for p in procs), 30, "trainers gone")


def _exited(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def lock_openers(run_dir: Path) -> list[str]:
    """Processes with the run's lock file open (for a failure message)."""
    target, found = str(run_dir / "lock"), []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(f.path == target for f in proc.open_files()):
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:150]}")
        except psutil.Error:
            pass
    return found




def records_after(run_dir: Path, offset: int) -> list[dict]:
    return [r for r in EventReader(run_dir / "events.jsonl", offset=offset).read()]


def strict_records(run_dir: Path) -> list[dict]:
    """Every line of events.jsonl must be a whole, valid record: SIGKILL never tears a line."""
    lines = (run_dir / "events.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"", "events.jsonl ends inside a line"
    records = [parse_line(line) for line in lines[:-1]]
    assert None not in records, [line[:200] for line, r in zip(lines, records) if r is None]
    return records


def assert_steps_rise_within_sessions(records: list[dict]) -> int:
    """Step numbers only rise within a session (it begins at a `start` record), and a resumed
    session starts after the step it resumed from. Returns the number of sessions."""
    sessions: list[tuple[int, list[int]]] = []
    for rec in records:
        if rec["kind"] == "start":
            sessions.append((rec.get("resumed_from") or 0, []))
        elif rec["kind"] == "step":
            assert sessions, "a step record before any start record"
            sessions[-1][1].append(rec["step"])
    for resumed_from, steps in sessions:
        assert all(b > a for a, b in zip(steps, steps[1:])), steps
        assert not steps or steps[0] > resumed_from, (resumed_from, steps)
    return len(sessions)


def cli_in_process(argv: list[str], capsys) -> str:
    """The CLI's entry point in this process: the only way to hand it a NUL byte (argv cannot
    carry one), and quick for a long list; a few of each go through a real process below."""
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("amptui: error: ") and "\n" not in err, (argv, code, err)
    return err


def killed_with_checkpoint(runs_dir: Path) -> Path:
    """A run SIGKILLed after its first checkpoint: what `resume` is for."""
    run_dir = start_detached(runs_dir, max_steps=100000)
    wait_until(lambda: any(r["kind"] == "checkpoint" for r in events_so_far(run_dir)), 120, "first checkpoint")
    kill_trainers(run_dir)
    wait_until(lambda: runs.load_run(run_dir).status == "killed", 30, "status killed")
    return run_dir


# --- one writer per run ------------------------------------------------------------------------

@pytest.mark.slow
def test_two_resumes_started_together_give_one_trainer_and_a_live_run_refuses_more(runs_dir):
    run_dir = killed_with_checkpoint(runs_dir)
    offset = (run_dir / "events.jsonl").stat().st_size
    command = [sys.executable, "-m", "amptui", "resume", run_dir.name, "--detach", "--runs-dir", str(runs_dir)]
    try:
        procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=180) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, 2], outs
        winner = next(p for p in procs if p.returncode == 0)
        loser_err = next(err for p, (_, err) in zip(procs, outs) if p.returncode == 2)
        line = loser_err.strip()
        assert "\n" not in line and "Traceback" not in line, loser_err
        # it names the process holding the run: the winning command, or the trainer it handed the lock to
        assert f"is in use by pid {winner.pid}" in line or f"is in use by pid {trainer_pid(run_dir)}" in line, line

        wait_until(lambda: any(r["kind"] == "step" for r in records_after(run_dir, offset)), 120, "resumed steps")
        assert len(trainers_of(run_dir)) == 1
        assert runs.load_run(run_dir).status == "running"

        # the run is live: another resume refuses, naming the trainer
        pid = trainer_pid(run_dir)
        again = amptui("resume", run_dir.name, "--runs-dir", str(runs_dir))
        assert f"in use by pid {pid}" in one_clear_line(again)
        # ... and so does a script's Monitor pointed at the same folder
        from amptui import Monitor

        with pytest.raises(RunLocked, match=f"pid {pid}"):
            Monitor("intruder", run_dir=run_dir)
        wait_until(lambda: len([r for r in records_after(run_dir, offset) if r["kind"] == "step"]) >= 4, 120,
                   "a few more steps")
        assert len(trainers_of(run_dir)) == 1
    finally:
        kill_trainers(run_dir)
    records = strict_records(run_dir)
    assert assert_steps_rise_within_sessions(records) == 2  # the first run and exactly one resume
    assert runs.load_run(run_dir).status == "killed", lock_openers(run_dir)


@pytest.mark.slow
def test_sigkill_at_random_moments_while_checkpointing_then_the_run_completes(runs_dir):
    seed = int(os.environ.get("AMPTUI_ADVERSARIAL_SEED") or time.time())
    rng = random.Random(seed)
    print(f"seed {seed} (AMPTUI_ADVERSARIAL_SEED reproduces it)")
    max_steps = 1500  # long enough that no session finishes the run before its kill, on a fast machine too
    run_dir = start_detached(runs_dir, max_steps=max_steps)
    try:
        for round_ in range(8):
            offset = 0
            if round_:
                offset = (run_dir / "events.jsonl").stat().st_size
                amptui("resume", run_dir.name, "--detach", "--runs-dir", str(runs_dir), check=True)
            # Round 1 waits for a checkpoint (before it there is nothing to resume). Then each
            # session is killed at a random moment up to a few steps after its first one (scaled
            # by this machine's step time): before, during or after a checkpoint write.
            wanted = "checkpoint" if round_ == 0 else "step"
            wait_until(lambda: any(r["kind"] == wanted for r in records_after(run_dir, offset)), 120,
                       f"round {round_}: a {wanted} record")
            step_s = max(r.get("step_time_ms") or 0 for r in records_after(run_dir, offset)) / 1000 or 0.2
            time.sleep(rng.uniform(0.0, 2.5) * step_s)
            os.kill(trainer_pid(run_dir), signal.SIGKILL)  # the trainer, whatever it is doing
            wait_until(lambda: runs.load_run(run_dir).status == "killed", 30, f"round {round_}: status killed")
            state = checkpoint.load(run_dir / "checkpoints")  # the last checkpoint always loads
            assert 0 < state["progress"]["step"] < max_steps, state["progress"]
        done = amptui("resume", run_dir.name, "--runs-dir", str(runs_dir), timeout=300)
        assert done.returncode == 0, done.stderr
    finally:
        kill_trainers(run_dir)
    records = strict_records(run_dir)
    assert assert_steps_rise_within_sessions(records) == 9
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "completed"
    assert records[-1]["steps"] == max_steps
    assert runs.load_run(run_dir).status == "completed"
    assert not list((run_dir / "checkpoints").glob(".*.tmp"))  # a killed write's temp file is cleaned up


# --- damaged files -------------------------------------------------------------------------------

def _cut_end_record(run_dir: Path) -> None:
    """Turn a completed run into a killed one (no end record, nobody alive): resumable."""
    lines = (run_dir / "events.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "events.jsonl").write_text("".join(lines[:-1]))


def _rewrite_checkpoint(run_dir: Path, change) -> None:
    path = run_dir / "checkpoints" / checkpoint.FILENAME
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def _insert_before_end(run_dir: Path, writer) -> None:
    path = run_dir / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "wb") as fh:
        fh.writelines(lines[:-1])
        writer(fh)
        fh.write(lines[-1])


def _wrong_types(fh) -> None:
    for line in ('{"v":1,"kind":"step","t":1,"rank":0,"step":"abc","loss":1.0}',
                 '{"v":1,"kind":5,"t":1,"rank":0}',
                 '{"v":1,"kind":"step","t":"yesterday","rank":0,"step":3,"mem":"lots"}',
                 '{"v":1,"kind":"epoch","t":1,"rank":0,"epoch":[1],"val_acc":"high"}',
                 '{"v":1,"kind":"end","t":1,"rank":0,"status":7,"error":"boom"}',
                 '[1, 2, 3]', '42', '"step"', '{"kind": null}', '{"v":1,"kind":"step","step":1e999}'):
        fh.write(line.encode() + b"\n")
    fh.write(b"\xff\xfe not utf-8 \x00\n")


def _huge_line(fh) -> None:
    chunk = b'{"v":1,"kind":"warning","t":1,"rank":0,"message":"' + b"x" * (1 << 20)
    fh.write(chunk)
    for _ in range(49):
        fh.write(b"x" * (1 << 20))
    fh.write(b'"}\n')


# name -> (resumable base?, damage, what `resume` must say)
DAMAGES = {
    "checkpoint-empty": (True, lambda d: (d / "checkpoints/last.pt").write_bytes(b""), "not a readable checkpoint"),
    "checkpoint-truncated": (True, lambda d: (d / "checkpoints/last.pt").write_bytes(
        (d / "checkpoints/last.pt").read_bytes()[:3000]), "not a readable checkpoint"),
    "checkpoint-garbage": (True, lambda d: (d / "checkpoints/last.pt").write_bytes(os.urandom(5000)),
                           "not a readable checkpoint"),
    "checkpoint-not-amptuis": (True, lambda d: torch.save({"weights": torch.zeros(3)}, d / "checkpoints/last.pt"),
                               "not an amptui checkpoint"),
    "checkpoint-other-preset": (True, lambda d: _rewrite_checkpoint(
        d, lambda s: s["config"]["model"].update(name="mlp", width=64)), "changed since its checkpoint"),
    "checkpoint-other-shapes": (True, lambda d: _rewrite_checkpoint(
        d, lambda s: s["model"].update({k: torch.zeros(7, 3) for k in list(s["model"])[:1]})), "has shape (7, 3)"),
    "events-wrong-types": (False, lambda d: _insert_before_end(d, _wrong_types), "has completed"),
    "events-50mb-line": (False, lambda d: _insert_before_end(d, _huge_line), "has completed"),
    "runjson-garbage": (False, lambda d: (d / "run.json").write_bytes(b"\x00{{{ not json"), "has completed"),
    "runjson-missing": (False, lambda d: (d / "run.json").unlink(), "has completed"),
    "runjson-wrong-types": (False, lambda d: (d / "run.json").write_text('{"pid": "abc", "host": 5, "launched": '
                                                                       '"x", "create_time": []}'), "has completed"),
    "runjson-a-list": (False, lambda d: (d / "run.json").write_text("[1, 2]"), "has completed"),
    "config-invalid-toml": (True, lambda d: (d / "config.toml").write_text("[run\nname = 'x"), "invalid TOML"),
    "config-binary": (True, lambda d: (d / "config.toml").write_bytes(os.urandom(300) + b"\xff"), "config.toml"),
    "config-wrong-type": (True, lambda d: (d / "config.toml").write_text('[run]\nepochs = "many"\n'), "run.epochs"),
}


@pytest.fixture(scope="module")
def damaged_root(tmp_path_factory) -> Path:
    """One real completed run, copied once per damage into a runs folder of its own."""
    base_root = tmp_path_factory.mktemp("base")
    proc = subprocess.run([sys.executable, "-m", "amptui", "run", "quickstart", *TINY, "--set", "run.max_steps=4",
                           "--runs-dir", str(base_root / "runs")], capture_output=True, text=True, timeout=300,
                          cwd=base_root, env={**os.environ, "XDG_CONFIG_HOME": str(base_root / "xdg"),
                                              "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    (base,) = (base_root / "runs").iterdir()
    root = tmp_path_factory.mktemp("damaged") / "runs"
    for name, (resumable, damage, _) in DAMAGES.items():
        target = root / f"20990101-000000-{name}"
        shutil.copytree(base, target)
        (target / "lock").unlink(missing_ok=True)
        if resumable:
            _cut_end_record(target)
        damage(target)
    return root


@pytest.mark.slow  # the damaged runs come from one real run
@pytest.mark.parametrize("name", DAMAGES)
def test_damaged_files_resume_and_compare_say_one_line(damaged_root, name, capsys):
    """In this process (the CLI's entry point; each real `amptui` costs a torch import on CI):
    resume refuses in one line, compare gives its table or one line. Real processes below."""
    run_id = f"20990101-000000-{name}"
    err = cli_in_process(["resume", run_id, "--runs-dir", str(damaged_root)], capsys)
    assert DAMAGES[name][2] in err
    assert not trainers_of(damaged_root / run_id)
    code = cli.main(["compare", run_id, "--format", "json", "--runs-dir", str(damaged_root)])
    out, err = capsys.readouterr()
    if code:
        assert code == 2 and err.startswith("amptui: error: ") and "\n" not in err.strip(), err
    else:
        summary = json.loads(out)[0]
        assert summary["run_id"] == run_id
        if name.startswith("events"):
            assert summary["steps"] == 4, summary  # read past the damage to the end


@pytest.mark.slow
def test_damaged_files_real_commands(damaged_root):
    """The issue's case for real: `amptui resume` of a run whose last.pt is zero bytes."""
    line = one_clear_line(amptui("resume", "20990101-000000-checkpoint-empty", "--runs-dir", str(damaged_root)))
    assert "last.pt: not a readable checkpoint" in line
    for name in ("events-50mb-line", "events-wrong-types", "runjson-garbage"):
        proc = amptui("compare", f"20990101-000000-{name}", "--runs-dir", str(damaged_root))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow  # the damaged runs come from one real run
def test_damaged_files_runs_lists_every_run(damaged_root):
    proc = amptui("runs", "--format", "json", "--runs-dir", str(damaged_root))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    listed = {r["run_id"]: r for r in json.loads(proc.stdout)}
    assert set(listed) == {f"20990101-000000-{name}" for name in DAMAGES}
    assert listed["20990101-000000-events-wrong-types"]["status"] == "completed"
    assert listed["20990101-000000-events-50mb-line"]["status"] == "completed"
    assert "invalid TOML" in listed["20990101-000000-config-invalid-toml"]["error"]
    assert amptui("runs", "--runs-dir", str(damaged_root)).returncode == 0  # the table too


@pytest.mark.slow  # the damaged runs come from one real run
@pytest.mark.parametrize("name", DAMAGES)
def test_damaged_files_watch_loads(damaged_root, name):
    """The run screen's loading code (what `amptui watch` feeds it) reads every damaged run."""
    from amptui.dashboard.runmodel import RunModel
    from amptui.dashboard.runtail import RunTail

    model = RunModel(f"20990101-000000-{name}")
    tail = RunTail(damaged_root / f"20990101-000000-{name}", model)
    tail.prefill()
    for _ in range(500):
        if not tail.poll():
            break
    assert model.run.step == 4


@pytest.mark.slow  # the damaged runs come from one real run
@async_test
async def test_damaged_files_home_screen_lists_them(damaged_root):
    from amptui.dashboard.app import make_app
    from amptui.dashboard.screens.home.screen import HomeScreen
    from amptui.dashboard.widgets.runtable import RunTable

    app = make_app(damaged_root)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, HomeScreen)
                    and app.screen.query_one(RunTable).row_count == len(DAMAGES), timeout=30)


@pytest.mark.slow
def test_hostile_names_through_real_processes(runs_dir, isolated):
    runs_dir.mkdir()
    for run_id in ("../x", "/etc", "x" * 300, "a\nb"):
        one_clear_line(amptui("resume", run_id, "--runs-dir", str(runs_dir)))
    for name in ("../evil", "x" * 300 + ".toml", "a\nb.toml"):
        one_clear_line(amptui("run", name, "--set", "run.device=cpu"))
        one_clear_line(amptui("presets", "save", name, "--from", "quickstart"))
    assert list(runs_dir.iterdir()) == []
    saved = isolated / "xdg" / "amptui" / "presets"
    assert not saved.exists() or list(saved.iterdir()) == []


# --- a read-only runs folder -------------------------------------------------------------------------

def _read_only_runner():
    """Run commands where file modes apply: as root, without the capabilities that bypass them."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: chmod cannot make a folder read-only for root")
    caps = "-dac_override,-dac_read_search,-fowner"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]


@pytest.mark.slow
def test_read_only_runs_folder(runs_dir, isolated):
    prefix = _read_only_runner()
    run_dir = killed_with_checkpoint(runs_dir)
    (run_dir / "lock").unlink()  # as if the folder was copied from elsewhere
    for path in [runs_dir, *runs_dir.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        def cli_ro(*args):
            return subprocess.run([*prefix, sys.executable, "-m", "amptui", *args, "--runs-dir", str(runs_dir)],
                                  capture_output=True, text=True, timeout=240, env=os.environ)

        listed = cli_ro("runs", "--format", "json")
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)[0]["status"] == "killed"
        assert cli_ro("compare", run_dir.name).returncode == 0
        assert "cannot create runs in" in one_clear_line(cli_ro("run", "quickstart", "--set", "run.device=cpu"))
        refused = one_clear_line(cli_ro("resume", run_dir.name))  # the folder check or the lock file's
        assert "cannot create runs in" in refused or "lock file" in refused, refused
    finally:
        for path in [runs_dir, *runs_dir.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints", "config.toml", "events.jsonl",
                                                          "output.log", "run.json"]


# --- many runs ---------------------------------------------------------------------------------------

def _many_runs(root: Path, count: int = 300) -> None:
    fixture = FIXTURES / "runs" / "20261121-231544-quickstart-8ab8"
    for i in range(count):
        target = root / f"20990101-{i:06d}-quickstart-many"
        shutil.copytree(fixture, target)


@pytest.mark.slow  # its point is the size: 300 run folders read twice (~15 s on a loaded 2-core box)
def test_300_runs_are_listed_by_runs_and_the_home_screen(runs_dir, cli):
    """All 300 listed, correctly. How fast is a benchmark's business (benchmarks/many_runs.py),
    not a timed assertion on a shared CI box; the time is printed for the log."""
    _many_runs(runs_dir)
    t0 = time.perf_counter()
    proc = cli("runs", "--format", "json", "--runs-dir", str(runs_dir))
    print(f"amptui runs, 300 runs: {time.perf_counter() - t0:.2f} s (in process)")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 300

    async def home():
        from amptui.dashboard.app import make_app
        from amptui.dashboard.screens.home.screen import HomeScreen
        from amptui.dashboard.widgets.runtable import RunTable

        app = make_app(runs_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            t0 = time.perf_counter()
            await until(pilot, lambda: isinstance(app.screen, HomeScreen)
                        and app.screen.query_one(RunTable).row_count == 300, timeout=60)
            print(f"home screen, 300 runs: {time.perf_counter() - t0:.2f} s")

    import asyncio

    asyncio.run(home())
