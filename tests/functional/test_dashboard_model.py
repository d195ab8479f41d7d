"""The dashboard's data side without a screen: bounded series, the run model, the tail, compare."""

from __future__ import annotations

import json
import math
import time

import pytest
from support.dashboard import FAILED, QUICK, SCALER, copy_runs
from support.records import record

from amptui.core.comparison import compare as cmp
from amptui.core.comparison import runsummary
from amptui.core.stream.records import Mem, Scaler, Start, Step
from amptui.dashboard.panels import plots
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.runtail import RunTail

STEP_RECORD = record(Step(step=0, epoch=1, loss=None, lr=1e-3, scale=None, skipped=0, skipped_total=0,
                          samples_per_s=1000.0, step_time_ms=10.0, data_wait_ms=None,
                          mem={"allocated": 1e9, "reserved": 2e9, "peak_allocated": 1.5e9}), t=1000.0)


def _start(run_id, total_steps, t, world_size=1, device=None):
    return record(Start(run_id=run_id, preset="x", config={}, precision="autocast float16 + GradScaler",
                        world_size=world_size, device=device or {"type": "cuda", "name": "GPU", "count": 1},
                        torch="2.x", host="h", pid=1, total_steps=total_steps), t=t)


def _step(i, scale=None, rank=0):
    """Step record `i` (core.stream.records.Step, as the trainer writes it); copied from one built record,
    as tens of thousands are needed."""
    return {**STEP_RECORD, "t": 1000.0 + i, "rank": rank, "step": i, "epoch": 1 + i // 1000, "loss": 1.0 / (1 + i),
            "scale": scale}


def test_a_huge_event_file_is_skimmed_on_attach(tmp_path):
    from amptui.dashboard import runtail

    run = tmp_path / "huge"
    run.mkdir()
    with open(run / "events.jsonl", "w") as fh:
        fh.write(json.dumps(_start("huge", 60_000, t=0.0), separators=(",", ":")) + "\n")
        for i in range(1, 60_001):
            fh.write(json.dumps(_step(i, scale=1024.0), separators=(",", ":")) + "\n")
            if i % 500 == 0:
                fh.write(json.dumps(record(Scaler(step=i, event="backoff", old_scale=2048.0, new_scale=1024.0), t=0.0),
                                    separators=(",", ":")) + "\n")
    size = (run / "events.jsonl").stat().st_size
    old = runtail.SKIM_ABOVE_BYTES, runtail.SKIM_TARGET_STEPS
    runtail.SKIM_ABOVE_BYTES, runtail.SKIM_TARGET_STEPS = size // 4, 3_000  # as if it were 1M records
    try:
        model = RunModel(plots=plots())
        tail = RunTail(run, model, alive=lambda info: True)
        while tail.poll():
            pass
    finally:
        runtail.SKIM_ABOVE_BYTES, runtail.SKIM_TARGET_STEPS = old
    assert model.run.step == 60_000 and model.n_backoff == 120  # newest step and every scaler event kept
    assert model.series["loss"].count < 10_000  # only a sample of the step records was parsed
    # records appended after the catch-up are all read
    with open(run / "events.jsonl", "a") as fh:
        fh.write(json.dumps(_step(60_001, scale=1024.0), separators=(",", ":")) + "\n")
    tail.poll()
    assert model.run.step == 60_001


def test_tail_reads_fixture_log_and_scaler_events(tmp_path):
    root = copy_runs(tmp_path / "runs")
    model = RunModel(plots=plots())
    tail = RunTail(root / SCALER, model, alive=lambda info: False)
    while tail.poll():
        pass
    assert model.status == "completed" and model.run.step == 256 and model.run.total_steps == 256
    assert model.n_backoff == 37 and model.run.skipped_total == 37 and model.run.has_scaler
    assert model.scaler_events[-1]["step"] == 253 and model.scaler_events[-1]["overflow"][0] == "head.weight"
    assert min(model.series["backoffs"].points()[1]) == math.log2(262144.0)
    assert any("completed" in line for line in model.log_lines)
    assert model.run.precision_words == "autocast float16 + GradScaler" and model.elapsed(time.time()) < 10


def test_tail_follows_appends_torn_lines_and_other_ranks(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    events = run / "events.jsonl"
    start = _start("r1", 10, t=1.0, world_size=2, device={"type": "cuda", "name": "GPU", "count": 2})
    events.write_text(json.dumps(start) + "\n")
    (run / "run.json").write_text(json.dumps({"pid": 1, "host": "elsewhere"}))
    model = RunModel(plots=plots())
    tail = RunTail(run, model, alive=lambda info: True)
    tail.poll(now=10.0)
    assert model.status == "running" and model.run.world_size == 2
    line = json.dumps(_step(1, scale=1024.0)) + "\n"
    with open(events, "a") as fh:
        fh.write(line[:40])  # torn: the writer is mid-line
    tail.poll(now=11.0)
    assert model.run.step == 0
    with open(events, "a") as fh:
        fh.write(line[40:])
    (run / "events.rank1.jsonl").write_text(json.dumps(_step(1, rank=1)) + "\n" + json.dumps(
        record(Mem(devices=[{"index": 1, "name": "GPU", "used": 3e9, "total": 8e9, "util": 50}]), t=2.0, rank=1)) + "\n")
    tail.poll(now=100.0)  # new rank files are looked for every 2 s
    assert model.run.step == 1 and model.run.scale == 1024.0
    assert {"r0 allocated", "r1 allocated", "gpu1 used"} <= set(model.mem)
    assert model.mem_now["gpu1 used"] == (3e9, 8e9)


def test_status_starting_then_killed(tmp_path):
    run = tmp_path / "r2"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"pid": 1, "host": "x"}))
    alive = {"v": True}
    model = RunModel(plots=plots())
    tail = RunTail(run, model, alive=lambda info: alive["v"])
    tail.poll()
    assert model.status == "starting"
    alive["v"] = False
    tail.poll(now=time.monotonic() + 10)
    assert model.status == "killed"


def test_compare_rows_from_fixtures(tmp_path):
    root = copy_runs(tmp_path / "runs")
    summaries = [runsummary.summarize(root / r) for r in (QUICK, SCALER, FAILED)]
    rows = cmp.compare_rows(summaries)
    assert rows[0].speedup == 1.0 and rows[0].memory_saving == 0.0
    assert rows[1].skipped == 37 and rows[1].precision == "autocast float16 + GradScaler"
    assert rows[1].speedup == pytest.approx(summaries[1].steady_samples_per_s / summaries[0].steady_samples_per_s)
    assert rows[2].status == "failed" and rows[2].val_acc is None and rows[2].time_per_epoch_s is None
    assert rows[0].val_acc == pytest.approx(0.98046875) and rows[0].time_per_epoch_s > 0
    table = cmp.render(rows, "table")
    assert "speed-up" in table and "1.00x" in table and "98.05%" in table
    md = cmp.render(rows, "markdown")
    assert md.splitlines()[1].startswith("|---")
    assert cmp.render(rows, "csv").splitlines()[0].startswith("run_id,preset,precision,status,final_loss")
    assert json.loads(cmp.render(rows, "json"))[1]["skipped"] == 37
    assert cmp.compare_rows([]) == []


def test_home_runs_cache_reads_finished_runs_once(tmp_path, monkeypatch):
    from amptui.dashboard import runscache

    root = copy_runs(tmp_path / "runs")
    calls = []
    real = runscache.load_run
    monkeypatch.setattr(runscache, "load_run", lambda p, **kw: calls.append(p.name) or real(p, **kw))
    cache = runscache.RunsCache()
    first = cache.scan(root)
    assert [r.run_id for r in first] == [FAILED, SCALER, QUICK] and len(calls) == 3
    cache.scan(root)
    assert len(calls) == 3  # nothing changed: nothing read
    with open(root / QUICK / "events.jsonl", "a") as fh:
        fh.write("\n")
    again = cache.scan(root)
    assert calls[3:] == [QUICK] and len(again) == 3


def test_the_heat_map_names_the_layer_where_inf_came_first_and_counts_the_rest_downstream():
    """numerics-lab in float16 (the fixture): blocks.3 overflows, ln_f and head only pass its inf
    on. The heat map's legend names blocks.3 and counts the two after it, not three findings."""
    from support.dashboard import FIXTURES, NUMERICS

    from amptui.core.numerics import summarize
    from amptui.core.stream.events import read_events
    from amptui.dashboard.widgets.heatmap import legend_and_narrowest

    said = legend_and_narrowest(summarize(read_events(FIXTURES / "numerics" / NUMERICS / "events.jsonl"))).plain
    assert "\ninf/NaN out: blocks.3 +2 downstream\n" in said, said
    assert "ln_f" not in said and "head" not in said


def test_an_autopilot_rewind_redraws_the_redone_steps_once_on_the_run_screen_and_in_compare(tmp_path):
    """An autopilot rewind (rule widen_overflow without a GradScaler) trains the steps since its last
    checkpoint again in the same session: the run screen's plots and compare's loss curve draw each step
    once, from the checkpoint on (no zig-zag back to it), as after a resume from an older checkpoint."""
    from amptui.core.comparison.runsummary import summarize

    records = [{"kind": "start", "t": 1.0, "total_steps": 20},
               *[{"kind": "step", "rank": 0, "step": s, "loss": 1.0 / s} for s in range(1, 11)],
               {"kind": "checkpoint", "step": 10, "epoch": 1, "path": "checkpoints/last.pt"},
               *[{"kind": "step", "rank": 0, "step": s, "loss": 1.0 / s} for s in range(11, 15)],
               {"kind": "warning", "code": "autopilot", "message": "rewound from step 14 to step 10"},
               *[{"kind": "step", "rank": 0, "step": s, "loss": 2.0 / s} for s in range(11, 21)]]
    model = RunModel("r", plots())
    model.feed(records)
    xs, ys = model.series["loss"].points()
    assert xs == list(range(1, 21)) and ys[10:] == [2.0 / s for s in range(11, 21)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    cxs, cys = summarize(run).loss_curve.points()
    assert cxs == list(range(1, 21)) and cys[10:] == [2.0 / s for s in range(11, 21)]
