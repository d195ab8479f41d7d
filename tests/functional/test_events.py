"""The event stream: whole records in, whole records out, even while the writer is mid-line."""

import json

from amptui.core.stream.events import EventReader, EventWriter, primary_events_file, read_events


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


def test_reader_reads_a_file_in_chunks_as_one_framer(tmp_path):
    from amptui.core.stream.events import CHUNK_BYTES

    path = tmp_path / "events.jsonl"
    line = json.dumps({"kind": "step", "step": 1, "pad": "p" * 300}) + "\n"
    count = 3 * CHUNK_BYTES // len(line) + 7  # lines cut across chunk boundaries
    path.write_text(line * count)
    reader = EventReader(path)
    got = []
    while batch := reader.read(CHUNK_BYTES // 2):
        got += batch
    assert len(got) == count and reader.bad_lines == 0


def test_reader_refuses_a_symlink_and_says_why(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text('{"kind":"start"}\n')
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").symlink_to(target)
    reader = EventReader(run / "events.jsonl")
    assert reader.read() == []
    assert "symbolic link" in reader.damaged


def test_ends_of_a_big_file_match_reading_it_whole(tmp_path):
    from amptui.core.stream.eventends import HEAD_BYTES, SessionIndex, read_ends

    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        for session in range(3):
            writer.emit("start", total_steps=9_000)
            for step in range(3_000):
                writer.emit("step", step=session * 3_000 + step, loss=1.0, pad="p" * 200)
            writer.emit("end", status="stopped", steps=(session + 1) * 3_000)
    assert path.stat().st_size > 3 * HEAD_BYTES
    every = [r for r in read_events(path) if r["kind"] in ("start", "end")]
    index = SessionIndex(max_files=2)
    ends = read_ends(path, index)
    assert [r for r in ends.records() if r["kind"] in ("start", "end")] == every
    assert ends.records()[-1]["kind"] == "end" and ends.tail and not ends.damaged
    assert read_ends(path, index).middle == ends.middle and len(index) == 1  # remembered, not rescanned
    for i in range(5):  # bounded: other files push the oldest out
        other = tmp_path / f"other{i}.jsonl"
        other.write_bytes(path.read_bytes())
        read_ends(other, index)
    assert len(index) == 2


def test_primary_events_file_skips_names_that_are_not_a_rank(tmp_path):
    """A stray events.rankx.jsonl in a run folder (data) is not a rank's file: no ValueError."""
    (tmp_path / "events.rankx.jsonl").write_text("")
    assert primary_events_file(tmp_path) == tmp_path / "events.jsonl"
    (tmp_path / "events.rank3.jsonl").write_text("")
    (tmp_path / "events.rank12.jsonl").write_text("")
    assert primary_events_file(tmp_path) == tmp_path / "events.rank3.jsonl"


def test_the_reader_yields_each_kind_as_its_record_class(tmp_path):
    """One typed read path (issue 52): what the writer wrote from a record class comes back as that
    class, its fields as attributes, `t` and `rank` from the line, a foreign kind as Foreign."""
    from amptui.core.stream.records import Epoch, Foreign, Step

    path = tmp_path / "events.jsonl"
    with EventWriter(path, rank=1) as writer:
        writer.write(Step(step=3, epoch=1, loss=0.5, lr=0.1, scale=None, skipped=0, skipped_total=0,
                          samples_per_s=10.0, step_time_ms=2.0, data_wait_ms=None, mem={}, grad_norm=1.5))
        writer.write(Epoch(epoch=1, val_loss=0.4, extra={"bleu": 31.0}))
        writer.emit("step", step=4)  # a writer that left most fields out
    with path.open("a") as fh:
        fh.write('{"v":1,"kind":"from_the_future","t":5.0,"rank":0,"x":1}\n')
    step, epoch, sparse, foreign = read_events(path)
    assert isinstance(step, Step) and (step.step, step.loss, step.grad_norm, step.rank) == (3, 0.5, 1.5, 1)
    assert step.t is not None and step.t > 0 and step.tflops is None  # an optional field left out reads None
    assert isinstance(epoch, Epoch) and epoch.val_loss == 0.4 and epoch.extra == {"bleu": 31.0}
    assert isinstance(sparse, Step) and sparse.step == 4 and sparse.loss is None
    assert isinstance(foreign, Foreign) and foreign.kind == "from_the_future" and foreign.get("x") == 1


def test_a_line_whose_keys_name_a_records_methods_stays_data(tmp_path):
    """The runs folder is data: a key that is no field ("get", "wire", "fields") never becomes an
    attribute that hides the record's own."""
    path = tmp_path / "events.jsonl"
    path.write_text('{"v":1,"kind":"step","t":1.0,"rank":0,"step":2,"get":1,"wire":2,"fields":3,"_wire":4}\n')
    (step,) = read_events(path)
    assert step.step == 2 and step.get("get") == 1 and step.wire["wire"] == 2 and step.fields()["step"] == 2
