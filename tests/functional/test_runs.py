"""Run storage: ids, folders, and status from events plus the process table."""

import json
import os

import pytest

from amptui.core.errors import UserError
from amptui.core.run import runs
from amptui.core.stream import eventends
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


def test_status_comes_from_the_last_session(tmp_path):
    start = ("start", {"total_steps": 10})
    done = make_run(tmp_path, "done", [start, ("step", {"step": 10}), ("end", {"status": "completed", "steps": 10})])
    assert runs.load_run(done).status == "completed" and runs.load_run(done).progress == 1.0
    # stopped, then resumed: the new session has no end yet and its process is gone
    resumed = make_run(tmp_path, "resumed", [start, ("end", {"status": "stopped", "steps": 4}), start,
                                             ("step", {"step": 6})], pid=999_999_999)
    assert runs.load_run(resumed).status == "killed"


def test_a_reused_pid_is_not_mistaken_for_the_run(tmp_path):
    path = make_run(tmp_path, "old", [("start", {})], pid=os.getpid())
    info = json.loads((path / "run.json").read_text())
    info["create_time"] -= 3600  # the run's process started an hour before this one
    (path / "run.json").write_text(json.dumps(info))
    assert runs.load_run(path).status == "killed"


def test_run_ids_are_unique_even_in_the_same_second(tmp_path):
    made = {runs.new_run_dir(tmp_path, "quickstart").name for _ in range(50)}
    assert len(made) == 50


@pytest.mark.parametrize("bad", ["../x", "/etc", "a/b", "..", "", ".hidden"])
def test_run_ids_cannot_leave_the_runs_folder(tmp_path, bad):
    with pytest.raises(UserError):
        runs.run_dir(tmp_path, bad)


def test_list_is_newest_first_and_reads_only_head_and_tail_of_big_files(tmp_path, monkeypatch):
    make_run(tmp_path, "old", [("start", {"total_steps": 3}), ("end", {"status": "completed", "steps": 3})])
    new = tmp_path / "new"
    new.mkdir()
    (new / "config.toml").write_text("")
    with EventWriter(new / "events.jsonl") as w:
        w.emit("start", total_steps=200_000)
        for step in range(1, 20_001):
            w.emit("step", step=step, loss=1.0 / step)
        w.emit("end", status="stopped", steps=20_000)
    read: dict[str, eventends.Ends] = {}

    def reading(path, *args, **kwargs):  # the listing's own reads, recorded as they happen
        read[path.parent.name] = got = eventends.read_ends(path, *args, **kwargs)
        return got

    monkeypatch.setattr(runs, "read_ends", reading)
    listed = runs.list_runs(tmp_path)
    assert [r.run_id for r in listed] == ["new", "old"]
    # what the listing parsed, not how long it took (list speed is benchmarks/many_runs.py's): the
    # records at both ends, and of the middle only the session records (none here)
    ends = read["new"]
    assert ends.head[0]["kind"] == "start" and ends.tail[-1]["kind"] == "end" and ends.middle == []
    assert len(ends.head) + len(ends.tail) < 20_000 // 2
    assert (listed[0].status, listed[0].step, listed[0].total_steps) == ("stopped", 20_000, 200_000)


def test_duration_is_the_sessions_time_summed(tmp_path):
    # 10 s, a pause of an hour (stopped), then 5 s more: 15 s, in every view.
    records = [("start", {"total_steps": 20, "t": 100.0}), ("step", {"step": 10, "t": 108.0}),
               ("end", {"status": "stopped", "steps": 10, "total_time_s": 14.0, "t": 110.0}),
               ("start", {"total_steps": 20, "resumed_from": 10, "t": 3710.0}),
               ("end", {"status": "completed", "steps": 20, "total_time_s": 7.0, "t": 3715.0})]
    path = make_run(tmp_path, "two-sessions", records)
    from amptui.core.comparison import runsummary

    assert runs.load_run(path).duration_s == pytest.approx(15.0)
    assert runsummary.summarize(path).total_time_s == pytest.approx(15.0)
    # A session that was killed (no end record) counts to its last record.
    killed = make_run(tmp_path, "killed", [("start", {"t": 100.0}), ("step", {"step": 5, "t": 104.0})], pid=999_999_999)
    assert runs.load_run(killed).duration_s == pytest.approx(4.0)
    # Not started yet: no duration, rather than the time since the launch that later shrinks.
    assert runs.load_run(make_run(tmp_path, "starting", [], pid=os.getpid())).duration_s is None


def test_duration_counts_sessions_in_the_middle_of_a_big_event_file(tmp_path):
    path = tmp_path / "long"
    path.mkdir()
    (path / "config.toml").write_text("")
    with EventWriter(path / "events.jsonl") as w:
        t = 0.0
        for session in range(3):  # 3 sessions of 100 s each, an hour apart, ~1.5 MB in all
            w.emit("start", total_steps=30_000, t=t)
            for step in range(1, 5_001):
                w.emit("step", step=session * 5_000 + step, loss=1.0, t=t + step * 0.02)
            w.emit("end", status="stopped" if session < 2 else "completed", steps=(session + 1) * 5_000, t=t + 100)
            t += 3_700
    assert (path / "events.jsonl").stat().st_size > 3 * eventends.HEAD_BYTES
    assert runs.load_run(path).duration_s == pytest.approx(300.0)
    assert runs.load_run(path).duration_s == pytest.approx(300.0)  # again, from what was remembered


def test_the_runs_folder_is_checked(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="--runs-dir .*file: a file, not a folder"):
        runs.runs_root(str(tmp_path / "file"))
    with pytest.raises(UserError, match="cannot create runs"):
        runs.new_run_dir(tmp_path / "file" / "runs", "quickstart")
    assert runs.runs_root(str(tmp_path / "not-yet"), writable=True) == tmp_path / "not-yet"


def test_a_run_folder_names_its_files_and_reads_its_config(tmp_path):
    from amptui.core.config import values as cfgmod
    from amptui.core.errors import ConfigError

    folder = runs.create_folder(tmp_path / "runs", "my preset!")
    assert folder.path.parent == tmp_path / "runs" and folder.name.endswith(tuple("0123456789abcdef"))
    assert "-my-preset-" in folder.name and list(folder.path.iterdir()) == []  # nothing written yet
    assert folder.rank_events(0) == folder.events == folder.path / "events.jsonl"
    assert folder.rank_events(2) == folder.path / "events.rank2.jsonl"
    assert folder.checkpoint == folder.path / "checkpoints" / "last.pt" and not folder.is_run()
    cfg = cfgmod.build_config({"run": {"name": "quickstart", "epochs": 3}})
    runs.write_new(folder, cfg, "# a test run")
    assert folder.is_run() and folder.checkpoints.is_dir()
    assert folder.config.read_text().startswith("# a test run") and folder.load_config() == cfg
    folder.config.write_text("[run\n")
    with pytest.raises(ConfigError, match=str(folder.config)):
        folder.load_config()


def test_a_run_folder_that_cannot_be_filled_is_removed(tmp_path):
    from amptui.core.config import values as cfgmod

    folder = runs.create_folder(tmp_path, "quickstart")
    folder.checkpoints.write_text("in the way")  # mkdir fails as on a full disk: an OSError
    with pytest.raises(UserError, match=f"cannot create run {folder.name} in {tmp_path}"):
        runs.write_new(folder, cfgmod.build_config({}), "# header")
    assert not folder.path.exists()
