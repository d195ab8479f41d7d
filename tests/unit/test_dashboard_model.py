"""The dashboard's data side without a screen: bounded series, the run model, the tail, compare."""

from __future__ import annotations

import tracemalloc

import pytest
from support.records import record

from amptui.core.series import Series
from amptui.core.stream.records import Start, Step
from amptui.dashboard.panels import plots
from amptui.dashboard.runmodel import SERIES_CAP, RunModel


def test_series_stays_bounded_and_keeps_its_shape():
    s = Series(cap=100, mode="mean")
    for i in range(100_000):
        s.add(i, float(i))
    xs, ys = s.points()
    assert len(xs) <= 101 and s.count == 100_000
    assert xs == sorted(xs) and xs[-1] == 99_999
    # bucket means of a straight line stay on it
    assert all(abs(y - x) < s.stride for x, y in zip(xs, ys))


@pytest.mark.parametrize("mode,expect", [("max", 9.0), ("min", 0.0), ("last", 9.0)])
def test_series_modes(mode, expect):
    s = Series(cap=2, mode=mode)
    for i in range(10):
        s.add(i, float(i % 10))
    assert len(s) <= 3
    assert (max if mode != "min" else min)(s.points()[1]) == expect


def test_series_skips_missing_values():
    s = Series(cap=10)
    for v in (None, float("nan"), 1.0):
        s.add(0, v)
    assert s.points() == ([0], [1.0])


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


def test_a_long_history_keeps_memory_flat():
    """Once the series are full, more records cost next to nothing: 10k traced records after a
    10k warm-up, then 20k more (each series compacts many times over) stay within the cap."""
    total = 40_000
    model = RunModel("big", plots())
    model.feed([_start("big", total, t=1000.0)])
    model.feed([_step(i, scale=65536.0) for i in range(1, 10_001)])
    tracemalloc.start()
    model.feed([_step(i, scale=65536.0) for i in range(10_001, 20_001)])
    small = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()  # the rest untraced: fast
    for chunk in range(20_001, total + 1, 20_000):
        model.feed([_step(i, scale=65536.0) for i in range(chunk, chunk + 20_000)])
    big = sum(len(s) for s in (model.series["loss"], model.series["lr"], model.series["log2_scale"], model.series["samples_per_s"], *model.mem.values()))
    assert model.run.step == total
    for series in (model.series["loss"], model.series["lr"], model.series["log2_scale"], model.series["samples_per_s"], *model.mem.values()):
        assert len(series) <= SERIES_CAP + 1
    assert big <= 7 * (SERIES_CAP + 1)
    assert small < 2_000_000  # 10k more records cost next to nothing once the series are full
    assert set(model.mem) == {"r0 allocated", "r0 reserved"}


def test_a_resumed_session_redraws_the_redone_steps_once():
    from amptui.dashboard.runmodel import RunModel

    model = RunModel("r", plots())
    model.feed([{"kind": "start", "t": 1.0, "total_steps": 40}])
    model.feed([{"kind": "step", "rank": 0, "step": s, "loss": 1.0 / s} for s in range(1, 19)])
    model.feed([{"kind": "end", "status": "failed", "steps": 18},
                {"kind": "start", "t": 2.0, "resumed_from": 14, "total_steps": 40}])
    model.feed([{"kind": "step", "rank": 0, "step": s, "loss": 1.0 / s} for s in range(15, 41)])
    xs, _ = model.series["loss"].points()
    assert xs == sorted(set(xs)) and xs[-1] == 40


def test_the_loss_panel_says_waiting_only_before_a_step_record():
    """A float16 run whose every step was skipped has step records but no finite loss: the panel
    says so, with the skipped count, rather than "waiting for data" (as if nothing had arrived)."""
    from amptui.dashboard.panels.loss import loss_missing_words

    model = RunModel("r", plots())
    model.feed([{"kind": "start", "t": 1.0, "total_steps": 40}])
    assert loss_missing_words(model) == ("waiting for data", "-")
    model.feed([{"kind": "step", "rank": 0, "step": s, "loss": None, "scale": 2.0 ** (16 - s),
                 "skipped_total": s} for s in range(1, 4)])
    words, footer = loss_missing_words(model)
    assert words.startswith("no finite loss yet: 3 steps, every loss inf/NaN") and footer == "inf/NaN"
    assert "3 steps skipped for inf/NaN gradients: see the loss scale" in words


def test_the_no_finite_loss_panel_names_the_first_non_finite_module():
    """The numerics records found where the inf came from: the panel names that module, its
    direction and the value that crossed float16's range, at the step it was found."""
    from amptui.dashboard.panels.loss import loss_missing_words

    model = RunModel("r", plots())
    model.feed([{"kind": "start", "t": 1.0, "total_steps": 40}])
    model.feed([{"kind": "step", "rank": 0, "step": s, "loss": None, "scale": 2.0 ** (16 - s),
                 "skipped_total": s} for s in range(1, 4)])
    assert "first non-finite" not in loss_missing_words(model)[0]  # numerics off: nothing to name
    first = {"module": "blocks.3.mlp.proj", "where": "forward", "value": 383012.875,
             "text": "blocks.3.mlp.proj (forward, float16 max exceeded: 3.8e5)"}
    model.feed([{"kind": "numerics", "rank": 0, "step": 3, "dtype": "float16", "max_finite": 65504.0,
                 "layers": [], "first_nonfinite": first, "traced": True}])
    words, footer = loss_missing_words(model)
    assert words.splitlines()[:2] == ["no finite loss yet: 3 steps, every loss inf/NaN or not measured",
                                      "step 3: first non-finite: blocks.3.mlp.proj (forward, float16 max exceeded: 3.8e5)"]
    assert footer == "inf/NaN"


def test_compare_draws_a_resumed_runs_redone_steps_once():
    """A run resumed from an older checkpoint: compare's loss curve, like the run screen, forgets the first
    session's steps past the checkpoint."""
    from amptui.core.comparison.runsummary import RunSummary

    summary = RunSummary(run_id="r")
    for rec in [{"kind": "start", "t": 1.0, "total_steps": 40},
                *[{"kind": "step", "rank": 0, "step": s, "loss": 1.0} for s in range(1, 19)],
                {"kind": "end", "status": "failed", "steps": 18},
                {"kind": "start", "t": 2.0, "resumed_from": 14, "total_steps": 40},
                *[{"kind": "step", "rank": 0, "step": s, "loss": 1.0} for s in range(15, 41)]]:
        summary.add(rec)
    xs, _ = summary.loss_curve.points()
    assert xs == list(range(1, 41))
