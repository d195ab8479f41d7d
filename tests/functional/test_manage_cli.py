"""Housekeeping from the command line: `amptui presets delete`, `amptui runs delete` and `amptui
export`. A mistake is one line, exit 2, nothing changed; saved presets and run folders are data
(no link followed out of them); a running run is never deleted."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
from support.canned import canned_run
from support.cli import one_clear_line
from support.records import record, write_records

from amptui.core.config import presets
from amptui.core.run import runlock
from amptui.core.stream.records import End, Epoch, Start, Step

pytestmark = pytest.mark.timeout(60)


def tree(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- presets delete ----------------------------------------------------------------------------------

def test_a_saved_preset_is_deleted_and_listed_no_more(cli):
    cli("presets", "save", "mine", "--from", "quickstart", "--set", "run.max_steps=5", check=True)
    path = presets.saved_dir() / "mine.toml"
    assert path.is_file() and "mine" in cli("presets", "list", check=True).stdout
    proc = cli("presets", "delete", "mine", check=True)
    assert "deleted preset 'mine'" in proc.stdout
    assert not path.exists() and "mine" not in cli("presets", "list", check=True).stdout
    line = one_clear_line(cli("presets", "delete", "mine"))
    assert "no saved preset named 'mine'" in line


@pytest.mark.parametrize("name", ["quickstart", "scaler-lab"])
def test_a_builtin_preset_is_refused(cli, name):
    line = one_clear_line(cli("presets", "delete", name))
    assert "built in" in line
    assert name in cli("presets", "list", check=True).stdout


@pytest.mark.parametrize("name", ["../mine", "a/b", ".hidden", ""])
def test_a_name_that_is_no_preset_name_is_refused(cli, name):
    one_clear_line(cli("presets", "delete", name))


def test_a_linked_preset_is_unlinked_and_its_target_left_alone(cli, isolated):
    target = isolated / "shared.toml"
    target.write_text('[run]\nmax_steps = 3\n')
    presets.saved_dir().mkdir(parents=True)
    (presets.saved_dir() / "shared.toml").symlink_to(target)
    cli("presets", "delete", "shared", check=True)
    assert not os.path.lexists(presets.saved_dir() / "shared.toml")
    assert target.read_text() == '[run]\nmax_steps = 3\n'


def test_a_folder_where_a_preset_file_should_be_is_refused_and_kept(cli):
    folder = presets.saved_dir() / "odd.toml"
    folder.mkdir(parents=True)
    (folder / "inside").write_text("x")
    line = one_clear_line(cli("presets", "delete", "odd"))
    assert "not a preset file" in line and (folder / "inside").read_text() == "x"


# --- runs delete -------------------------------------------------------------------------------------

@pytest.fixture
def three_runs(runs_dir):
    return [canned_run(runs_dir, f"20261124-0600{i}0-canned-000{i}", ms_per_step=10.0, batch=8, peak=2**20, acc=0.5)
            for i in range(3)]


def test_runs_are_deleted_and_gone_from_the_list(cli, three_runs):
    a, b, c = three_runs
    proc = cli("runs", "delete", a.name, c.name, check=True)
    assert proc.stdout.splitlines() == [f"deleted run {a.name}", f"deleted run {c.name}"]
    assert not a.exists() and not c.exists() and b.is_dir()
    listed = json.loads(cli("runs", "--format", "json", check=True).stdout)
    assert [r["run_id"] for r in listed] == [b.name]
    assert cli("runs", "list", check=True).stdout.count("-canned-") == 1


def test_one_bad_id_deletes_nothing(cli, three_runs, runs_dir):
    before = tree(runs_dir)
    line = one_clear_line(cli("runs", "delete", three_runs[0].name, "20991231-000000-nope-0000"))
    assert "nope" in line
    one_clear_line(cli("runs", "delete", three_runs[1].name, "../outside"))
    assert tree(runs_dir) == before


@pytest.mark.parametrize("ended", [False, True])
def test_a_running_run_is_refused_by_name_and_nothing_is_deleted(cli, three_runs, runs_dir, ended):
    """Running: no end record and its lock held (what a live trainer holds for its whole life);
    `ended`: a finished run whose lock someone has just taken (a resume starting)."""
    a, b, _ = three_runs
    if not ended:
        lines = (b / "events.jsonl").read_text().splitlines(keepends=True)
        (b / "events.jsonl").write_text("".join(line for line in lines if '"kind":"end"' not in line))
    runlock.acquire(b).release()  # the lock file exists before the picture of the folder is taken
    before = tree(runs_dir)
    with runlock.acquire(b):
        line = one_clear_line(cli("runs", "delete", a.name, b.name))
        assert f"{b.name} is running" in line and a.name not in line
        assert "Traceback" not in line
    assert tree(runs_dir) == before
    cli("runs", "delete", b.name, check=True)  # its writer gone: it goes
    assert not b.exists()


def test_a_shortened_id_is_refused_in_a_pipe_and_deleted_with_yes(cli, three_runs, runs_dir):
    """A prefix, the short tail or `last` may name another run than the one meant: without a
    terminal, one line naming the run and the way out, nothing deleted; --yes deletes it."""
    a, b, c = three_runs
    before = tree(runs_dir)
    for typed, named in (("20261124-06001", b), ("0001", b), ("last", c)):
        line = one_clear_line(cli("runs", "delete", a.name, typed))
        assert f"{typed!r} is not a full run id (it names {named.name})" in line
        assert "pass the full id, or --yes" in line
    assert tree(runs_dir) == before
    proc = cli("runs", "delete", "--yes", "0001", "last", check=True)
    assert proc.stdout.splitlines() == [f"deleted run {b.name}", f"deleted run {c.name}"]
    assert a.is_dir() and not b.exists() and not c.exists()


# --- export ------------------------------------------------------------------------------------------

def resumed_run(runs_dir):
    """Two sessions: the first reaches step 30 and fails; the second resumes from the checkpoint at
    step 20, so its steps 30 and 40 replace the first's 30. An epoch ends at step 20 and at 40."""
    run = runs_dir / "20261124-061500-canned-res1"
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "canned"\n')

    def start(t, resumed=None):
        return record(Start(run_id=run.name, preset="canned", config={}, precision="fp32", world_size=1,
                            device={"type": "cpu", "name": "test", "count": 1}, torch="2.x", host="h", pid=1,
                            total_steps=40, epochs=2, resumed_from=resumed), t)

    def step(n, t, loss, mem=True):
        return record(Step(step=n, epoch=1 + (n - 1) // 20, loss=loss, lr=0.1, scale=None, skipped=0,
                           skipped_total=0, samples_per_s=100.0, step_time_ms=10.0, data_wait_ms=None,
                           mem={"rss": 1000 + n, "peak_rss": 2000} if mem else {}), t)

    recs = [start(100.0), step(10, 101.0, 1.0), step(20, 102.0, 0.8),
            record(Epoch(epoch=1, train_loss=0.9, val_loss=0.85, val_acc=0.5, extra={"top5": 0.9, "note": "x"}), 102.5),
            step(30, 103.0, 99.0),
            record(End(status="failed", total_time_s=3.0, steps=30, final_loss=99.0, val_acc=None, peak_mem=2000), 104.0),
            start(200.0, resumed=20), step(30, 201.0, 0.6), step(40, 202.0, 0.4, mem=False),
            record(Epoch(epoch=2, train_loss=0.5, val_loss=0.45, val_acc=0.75, extra={"top5": 0.95}), 202.5),
            record(End(status="completed", total_time_s=6.0, steps=40, final_loss=0.4, val_acc=0.75, peak_mem=2000), 203.0)]
    write_records(run / "events.jsonl", recs)
    with open(run / "events.jsonl", "a") as fh:
        fh.write('{"v":1,"kind":"step","step":"x","loss":"bad"}\nnot json\n')
    return run


def test_export_csv_is_the_step_series_with_evaluation_on_each_epochs_last_step(cli, runs_dir):
    run = resumed_run(runs_dir)
    proc = cli("export", run.name, check=True)
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["step"] for r in rows] == ["10", "20", "30", "40"]
    assert [r["loss"] for r in rows] == ["1.0", "0.8", "0.6", "0.4"], "the resumed session's step 30 wins"
    assert [r["elapsed_s"] for r in rows] == ["1.0", "2.0", "101.0", "102.0"]
    assert [r["val_acc"] for r in rows] == ["", "0.5", "", "0.75"]
    assert [r["top5"] for r in rows] == ["", "0.9", "", "0.95"]
    assert rows[0]["mem_rss"] == "1010" and rows[3]["mem_rss"] == ""
    assert "note" not in rows[0] and "scale" not in rows[0], "no strings from the file, no empty columns"
    assert {"lr", "samples_per_s", "step_time_ms", "train_loss", "val_loss", "t", "epoch"} <= set(rows[0])


def test_export_reads_an_autopilot_rewind_as_a_resume_from_its_checkpoint(cli, runs_dir):
    """An autopilot rewind (widen_overflow without a GradScaler) trains the steps since its last checkpoint again
    in the same session: each step is one row, the redone one (the bad step 30's NaN is not a row)."""
    run = resumed_run(runs_dir)
    recs = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()[:6]]  # start .. step 30
    recs.insert(3, {"v": 1, "kind": "checkpoint", "step": 20, "epoch": 1, "path": "checkpoints/last.pt", "t": 102.1})
    recs[-1]["loss"] = None
    redone = [{**recs[2], "step": n, "loss": loss, "t": 103.0 + n} for n, loss in ((30, 0.6), (40, 0.4))]
    (run / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*recs, *redone]))
    rows = json.loads(cli("export", run.name, "--format", "json", check=True).stdout)
    assert [(r["step"], r["loss"]) for r in rows] == [(10, 1.0), (20, 0.8), (30, 0.6), (40, 0.4)]


def test_export_json_and_to_a_file(cli, runs_dir, isolated):
    run = resumed_run(runs_dir)
    steps = json.loads(cli("export", run.name, "--format", "json", check=True).stdout)
    assert [s["step"] for s in steps] == [10, 20, 30, 40]
    assert steps[1]["val_loss"] == 0.85 and steps[0]["val_loss"] is None and steps[3]["mem_rss"] is None
    out = isolated / "series.json"
    proc = cli("export", run.name, "--format", "json", "-o", str(out), check=True)
    assert proc.stdout == "" and json.loads(out.read_text()) == steps
    assert "wrote 4 steps" in proc.stderr


def test_export_of_a_run_without_steps_is_an_empty_series(cli, runs_dir):
    run = runs_dir / "20261124-062000-canned-none"
    run.mkdir(parents=True)
    (run / "config.toml").write_text('[run]\nname = "canned"\n')
    assert cli("export", run.name, "--format", "json", check=True).stdout == "[]\n"
    assert cli("export", run.name, check=True).stdout.startswith("step,epoch,t,elapsed_s,loss")


def test_export_mistakes_are_one_line_and_write_nothing(cli, runs_dir, isolated):
    run = canned_run(runs_dir, "20261124-062500-canned-aaaa", ms_per_step=10.0, batch=8, peak=2**20, acc=0.5)
    before = tree(isolated)
    assert "no run" in one_clear_line(cli("export", "20991231-000000-nope-0000"))
    assert "existing folder" in one_clear_line(cli("export", run.name, "-o", str(isolated / "missing" / "x.csv")))
    assert "existing folder" in one_clear_line(cli("export", run.name, "-o", str(isolated)))
    bad_format = cli("export", run.name, "--format", "xlsx")  # argparse's refusal, as for every command
    assert bad_format.returncode == 2 and "invalid choice: 'xlsx'" in bad_format.stderr
    assert tree(isolated) == before


def test_export_never_replaces_the_runs_own_files_and_says_when_they_cannot_be_read(cli, runs_dir, isolated):
    run = canned_run(runs_dir, "20261124-062600-canned-bbbb", ms_per_step=10.0, batch=8, peak=2**20, acc=0.5)
    events = (run / "events.jsonl").read_bytes()
    assert "inside the run folder" in one_clear_line(cli("export", run.name, "-o", str(run / "events.jsonl")))
    assert (run / "events.jsonl").read_bytes() == events
    (run / "events.jsonl").unlink()
    (run / "events.jsonl").symlink_to(isolated / "elsewhere.jsonl")  # a copied run folder: data, never a door
    assert "cannot export" in one_clear_line(cli("export", run.name))
