"""The event stream: whole records in, whole records out, even while the writer is mid-line."""

import json

from amptui.core.events import EventReader, EventWriter, read_events


def test_every_record_has_the_envelope_and_is_flushed(tmp_path):
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path, rank=0)
    writer.emit("step", step=1, loss=0.5)
    # Flushed at each record: a reader sees it before the writer closes.
    (record,) = read_events(path)
    assert record["v"] == 1 and record["kind"] == "step" and record["rank"] == 0 and record["t"] > 0
    assert record["step"] == 1 and record["loss"] == 0.5
    writer.close()


def test_non_finite_numbers_become_null(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        writer.emit("step", loss=float("nan"), scale=float("inf"), mem={"x": float("-inf")})
    line = path.read_text()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line)["loss"] is None


def test_reader_tails_and_leaves_a_torn_last_line_for_later(tmp_path):
    path = tmp_path / "events.jsonl"
    reader = EventReader(path)
    assert reader.read() == []  # no file yet
    with open(path, "w") as fh:
        fh.write(json.dumps({"kind": "start", "n": 1}) + "\n")
        fh.write('{"kind": "step", "n"')  # the writer is mid-record
    assert [r["n"] for r in reader.read()] == [1]
    with open(path, "a") as fh:
        fh.write(': 2}\n' + json.dumps({"kind": "step", "n": 3}) + "\n")
    assert [r["n"] for r in reader.read()] == [2, 3]
    assert reader.read() == []
    assert reader.bad_lines == 0


def test_garbage_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"kind": "start"}\nnot json at all\n[1, 2]\n\n{"kind": "end"}\n')
    reader = EventReader(path)
    assert [r["kind"] for r in reader.read()] == ["start", "end"]
    assert reader.bad_lines == 2


def test_reattach_from_an_offset_reads_only_what_is_new(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        writer.emit("start")
        offset = path.stat().st_size
        writer.emit("end", status="completed")
    assert [r["kind"] for r in EventReader(path, offset=offset).read()] == ["end"]
