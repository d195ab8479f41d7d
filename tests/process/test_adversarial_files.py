"""A runs folder (and a preset) is data: issue 24's file-level findings, rerun as a hostile or an
unlucky user would, with real processes and real files. Each says one line and exits 2 (or does the
right thing), changes nothing outside the runs folder, and never hangs (every test has a timeout).

Findings here: 1 (links as lock, events.jsonl, output.log), 3 (deep nesting), 7 (FIFOs and
devices as run files), 8 (full disk, absurd or mistyped record fields, a folder where a file
belongs), 10 (umask modes, a huge description, folder names that are no run ids) and the output
hygiene (escape sequences and markup from files, unknown statuses)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import amptui, one_clear_line
from support.dashboard import QUICK
from support.paths import FIXTURES

TINY = ["--set", "run.device=cpu", "--set", "data.batch_size=8", "--set", "data.img_size=8",
        "--set", "model.width=4", "--set", "data.train_samples=400", "--set", "data.val_samples=16",
        "--set", "log.every=1", "--set", "log.checkpoint_every_steps=2"]
DEEP = "[" * 5000 + "]" * 5000
COPY = "20261124-000000-quickstart-c0de"  # where a test puts its copy of a run


@pytest.fixture(autouse=True)
def one_thread_per_trainer(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def made_run(tmp_path_factory) -> Path:
    """One real tiny run with a checkpoint (4 steps), made once for the module; tests copy it."""
    root = tmp_path_factory.mktemp("made") / "runs"
    amptui("run", "quickstart", *TINY, "--set", "run.max_steps=4", "--set", "run.epochs=100000",
           "--runs-dir", str(root), check=True, timeout=280,
           env={"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "XDG_CONFIG_HOME": str(root.parent / "xdg")})
    return next(root.iterdir())


def resumable(made_run: Path, runs_dir: Path, name: str = COPY) -> Path:
    """A copy of the made run without its end record: `killed`, with a checkpoint, so a resume
    would be accepted and start a trainer unless something in the folder stops it first."""
    dest = runs_dir / name
    shutil.copytree(made_run, dest)
    events = dest / "events.jsonl"
    events.write_text("".join(line for line in events.read_text().splitlines(keepends=True)
                              if '"kind":"end"' not in line))
    return dest


def canned(runs_dir: Path, name: str = COPY, source: str = QUICK) -> Path:
    """A copy of a finished fixture run (no trainer needed) under `name`."""
    dest = runs_dir / name
    shutil.copytree(FIXTURES / "runs" / source, dest)
    return dest


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file outside the runs folder that nothing may change."""
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text("precious data\n" * 100)
    return path


def listed(runs_dir: Path) -> dict[str, dict]:
    """`amptui runs --format json`, by run id (and the table must work too)."""
    table = amptui("runs", "--runs-dir", str(runs_dir), timeout=60)
    assert table.returncode == 0 and "Traceback" not in table.stderr, table.stderr
    proc = amptui("runs", "--format", "json", "--runs-dir", str(runs_dir), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return {r["run_id"]: r for r in json.loads(proc.stdout)}


def starts(run_dir: Path) -> int:
    return (run_dir / "events.jsonl").read_text().count('"kind":"start"')


# --- 1: links out of the run folder ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_lock_that_is_a_symlink_is_refused_and_its_target_untouched(made_run, runs_dir, victim):
    run_dir = resumable(made_run, runs_dir)
    (run_dir / "lock").unlink()
    (run_dir / "lock").symlink_to(victim)
    before = victim.read_bytes()
    line = one_clear_line(amptui("resume", run_dir.name, "--runs-dir", str(runs_dir)))
    assert "lock" in line and "symbolic link" in line
    assert victim.read_bytes() == before and starts(run_dir) == 1
    assert listed(runs_dir)[run_dir.name]["status"] == "killed"  # a listing is not fooled either


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["events.jsonl", "output.log", "run.json", "checkpoints"])
def test_a_run_file_that_links_outside_stops_a_resume_before_it_starts(made_run, runs_dir, victim, name):
    run_dir = resumable(made_run, runs_dir)
    target = victim if name != "checkpoints" else victim.parent
    if name == "checkpoints":
        shutil.copytree(run_dir / name, victim.parent, dirs_exist_ok=True)
        shutil.rmtree(run_dir / name)
    else:
        shutil.move(run_dir / name, victim.parent / f"moved-{name}")
    (run_dir / name).symlink_to(target)
    outside = {p.name: p.read_bytes() for p in victim.parent.iterdir()}
    line = one_clear_line(amptui("resume", run_dir.name, "--runs-dir", str(runs_dir)))
    assert name in line
    assert {p.name: p.read_bytes() for p in victim.parent.iterdir()} == outside


# --- 7: FIFOs and devices ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fifos_and_devices_as_run_files_never_hang_the_listing(made_run, runs_dir):
    fifo_lock = resumable(made_run, runs_dir, "20261124-000001-quickstart-fifo")  # a resume would reach the lock
    (fifo_lock / "lock").unlink()
    os.mkfifo(fifo_lock / "lock")
    fifo_info = canned(runs_dir, "20261124-000002-quickstart-fifo")
    os.mkfifo(fifo_info / "run.json")
    zero = canned(runs_dir, "20261124-000003-quickstart-zero")
    (zero / "run.json").symlink_to("/dev/zero")
    found = listed(runs_dir)  # under the timeout: it returns, and in bounded memory
    assert {fifo_lock.name, fifo_info.name, zero.name} <= set(found)
    assert found[fifo_lock.name]["status"] == "killed"
    assert found[fifo_info.name]["status"] == found[zero.name]["status"] == "completed"
    line = one_clear_line(amptui("resume", fifo_lock.name, "--runs-dir", str(runs_dir), timeout=60))
    assert "lock" in line and "not a regular file" in line


# --- 3: deep nesting -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_deeply_nested_preset_file_is_one_line(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text(f"[run]\ndescription = {DEEP}\n")
    assert "nested deeper" in one_clear_line(amptui("run", str(deep)))
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_deeply_nested_saved_preset_is_listed_as_damaged_and_breaks_nothing_else(isolated, runs_dir):
    saved = isolated / "xdg" / "amptui" / "presets"
    saved.mkdir(parents=True)
    (saved / "deep.toml").write_text(f"[run]\ndescription = {DEEP}\n")
    proc = amptui("presets", "list", timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("deep "))
    assert "invalid" in row and "nested deeper" in row and len(row) < 300
    assert "nested deeper" in one_clear_line(amptui("presets", "show", "deep", timeout=60))
    run = amptui("run", "quickstart", *TINY, "--set", "run.max_steps=1", "--set", "run.epochs=100000", timeout=280)
    assert run.returncode == 0, run.stderr


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_run_with_a_deep_config_or_last_json_is_damaged_not_fatal(made_run, runs_dir):
    good = canned(runs_dir, "20261124-000001-quickstart-good")
    bad_config = canned(runs_dir, "20261124-000002-quickstart-deep")
    (bad_config / "config.toml").write_text(f"[run]\ndescription = {DEEP}\n")
    bad_info = resumable(made_run, runs_dir, "20261124-000003-quickstart-deep")
    (bad_info / "checkpoints" / "last.json").write_text(DEEP)
    found = listed(runs_dir)
    assert found[bad_config.name]["status"] == "damaged" and "nested deeper" in found[bad_config.name]["error"]
    assert found[good.name]["status"] == "completed" and bad_info.name in found
    proc = amptui("compare", good.name, bad_config.name, bad_info.name, "--runs-dir", str(runs_dir), timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "nested deeper" in one_clear_line(amptui("resume", bad_config.name, "--runs-dir", str(runs_dir)))


# --- 8: full disk, absurd and mistyped fields, a folder where a file belongs ----------------------

@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_full_disk_before_a_run_is_one_line_and_leaves_no_run_folder(tmp_path):
    disk = tmp_path / "tiny"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a tiny tmpfs")
    try:
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # full
        finally:
            os.close(fd)
        runs = disk / "runs"
        line = one_clear_line(amptui("run", "quickstart", *TINY, "--runs-dir", str(runs)))
        assert "No space left" in line
        assert not runs.exists() or list(runs.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_absurd_and_mistyped_record_fields_leave_runs_and_compare_working(runs_dir):
    far = canned(runs_dir, "20261124-000001-quickstart-far")
    text = (far / "events.jsonl").read_text()
    start = json.loads(text.splitlines()[0])
    start["t"] = 1e20
    (far / "events.jsonl").write_text(json.dumps(start) + "\n" + text.split("\n", 1)[1])
    typed = canned(runs_dir, "20261124-000002-quickstart-type")
    lines = []
    for line in (typed / "events.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if isinstance(rec.get("mem"), dict):
            rec["mem"] = {"rss": [1], "peak_rss": [1]}
        lines.append(json.dumps(rec))
    (typed / "events.jsonl").write_text("\n".join(lines) + "\n")
    found = listed(runs_dir)
    assert found[far.name]["status"] == "completed" and found[typed.name]["status"] == "completed"
    proc = amptui("compare", far.name, typed.name, "--runs-dir", str(runs_dir), timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["output.log", "run.json"])
def test_a_folder_where_a_run_file_belongs_stops_a_resume_before_the_trainer(made_run, runs_dir, name):
    run_dir = resumable(made_run, runs_dir)
    (run_dir / name).unlink()
    (run_dir / name).mkdir()
    line = one_clear_line(amptui("resume", run_dir.name, "--runs-dir", str(runs_dir)))
    assert name in line and "folder" in line
    assert starts(run_dir) == 1  # no trainer started a session


# --- 10: modes, a huge description, folder names ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_run_files_get_the_umask_mode_and_a_huge_description_stays_in_config_toml(tmp_path, runs_dir):
    description = "long " * 2_000_000  # 10 MB
    preset = tmp_path / "wordy.toml"
    preset.write_text(f'[run]\nname = "wordy"\ndescription = "{description}"\n')
    proc = subprocess.run([sys.executable, "-m", "amptui", "run", str(preset), *TINY, "--set", "run.max_steps=2",
                           "--set", "run.epochs=100000", "--runs-dir", str(runs_dir)],
                          capture_output=True, text=True, timeout=280, preexec_fn=lambda: os.umask(0o027))
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = runs_dir.iterdir()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"lock", "config.toml", "run.json", "events.jsonl", "output.log",
                                       "last.pt", "last.json"}
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: "0o640" for p in files}
    first = (run_dir / "events.jsonl").read_text().splitlines()[0]
    assert len(first) < 256 * 1024 and "characters cut" in first
    assert description in (run_dir / "config.toml").read_text()
    assert listed(runs_dir)[run_dir.name]["status"] == "completed"


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_folders_that_are_not_run_ids_are_not_listed_and_names_from_files_are_escaped(runs_dir):
    good = canned(runs_dir)
    for odd in ("has space", ".hidden", "\x1b]0;pwned\x07title", "[red]x"):
        canned(runs_dir, odd)
    evil = canned(runs_dir, "20261124-000001-quickstart-evil")
    config = (evil / "config.toml").read_text().replace('name = "quickstart"', 'name = "[/]\\u001b[2Jevil"', 1)
    (evil / "config.toml").write_text(config)
    odd_status = canned(runs_dir, "20261124-000002-quickstart-odd")
    events = (odd_status / "events.jsonl").read_text().replace('"status":"completed"', '"status":"pwned\\u001b[2J"')
    (odd_status / "events.jsonl").write_text(events)
    table = amptui("runs", "--runs-dir", str(runs_dir), timeout=60)
    assert table.returncode == 0 and "\x1b" not in table.stdout + table.stderr, table.stderr
    found = listed(runs_dir)
    assert set(found) == {good.name, evil.name, odd_status.name}
    assert found[odd_status.name]["status"] == "damaged"
    assert "\\x1b[2Jevil" in table.stdout
    proc = amptui("compare", good.name, evil.name, "--runs-dir", str(runs_dir), timeout=60)
    assert proc.returncode == 0 and "\x1b" not in proc.stdout + proc.stderr, proc.stderr
    assert "not a run id" in one_clear_line(amptui("watch", "has space", "--runs-dir", str(runs_dir), timeout=60))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_refused_resume_writes_nothing_in_the_run_folder(runs_dir):
    run_dir = canned(runs_dir)  # completed, and from before the lock file
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert "has completed" in one_clear_line(amptui("resume", run_dir.name, "--runs-dir", str(runs_dir)))
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
