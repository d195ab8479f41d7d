"""amptui.Monitor: an existing training loop writes amptui's event stream -- in-process, as the
example script under plain `python`, and launched by `amptui run --script`."""

from __future__ import annotations

import os

import pytest
import torch
from support.machine import count_device_reads
from support.records import events, only_run
from torch import nn

import amptui
from amptui.core.run import runs

STEP_FIELDS = {"v", "kind", "t", "rank", "step", "epoch", "loss", "lr", "scale", "skipped", "skipped_total",
               "samples_per_s", "step_time_ms", "mem"}


def by_kind(records, kind):
    return [r for r in records if r["kind"] == kind]


def tiny_loop(steps: int, mon: amptui.Monitor | None = None, fp16: bool = True, after_step=None):
    """The AMP recipe's loop at toy size: float16 + GradScaler (huge init scale, so it backs off)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 30, growth_interval=4, enabled=fp16)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    return model, opt, scaler, _run(steps, model, opt, scaler, x, y, mon, after_step)


def _run(steps, model, opt, scaler, x, y, mon, after_step):
    def loop(mon=mon):
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            if mon is not None:
                mon.step(loss, batch_size=8)
            if after_step is not None:
                after_step()
    return loop


def test_monitor_in_process_writes_a_valid_stream(runs_dir):
    model, opt, scaler, _ = tiny_loop(0)
    with amptui.Monitor("my-loop", scaler=scaler, optimizer=opt, model=model, log_every=5, total_steps=23,
                        config={"amp": {"dtype": "float16"}}) as mon:
        loop = _run(23, model, opt, scaler, torch.randn(8, 16), torch.randn(8, 16), mon, None)
        loop()
        mon.epoch(val_acc=torch.tensor(0.25))
        mon.warning("just so")
    run_dir = only_run(runs_dir)
    assert mon.run_dir == run_dir
    assert {"config.toml", "run.json", "events.jsonl"} <= {p.name for p in run_dir.iterdir()}
    recs = events(run_dir)
    kinds = [r["kind"] for r in recs]
    assert kinds[0] == "start" and kinds[-1] == "end" and {"step", "scaler", "epoch", "mem", "warning"} <= set(kinds)
    start = recs[0]
    for key in ("run_id", "preset", "config", "world_size", "device", "torch", "host", "pid"):
        assert key in start, key
    assert start["run_id"] == run_dir.name and start["preset"] == "my-loop" and start["pid"] == os.getpid()
    assert start["precision"]["words"] == "autocast float16 + GradScaler" and start["device"]["type"] == "cpu"
    steps = by_kind(recs, "step")
    assert [s["step"] for s in steps] == [5, 10, 15, 20, 23]  # every 5, plus the rest at the epoch's end
    for rec in steps:
        assert STEP_FIELDS <= set(rec), STEP_FIELDS - set(rec)
        assert rec["lr"] == 0.01 and rec["scale"] > 0 and rec["samples_per_s"] > 0 and "rss" in rec["mem"]
    backoffs = [r for r in by_kind(recs, "scaler") if r["event"] == "backoff"]
    growths = [r for r in by_kind(recs, "scaler") if r["event"] == "growth"]
    assert backoffs and growths
    assert sum(s["skipped"] for s in steps) == len(backoffs) == steps[-1]["skipped_total"]
    assert steps[-1]["scale"] == scaler.get_scale()
    assert all(b["new_scale"] == b["old_scale"] / 2 for b in backoffs)
    epoch = by_kind(recs, "epoch")[0]
    assert epoch["epoch"] == 1 and epoch["val_acc"] == 0.25 and epoch["train_loss"] > 0
    end = recs[-1]
    assert end["status"] == "completed" and end["steps"] == 23 and end["val_acc"] == 0.25
    info = runs.load_run(run_dir)
    assert (info.status, info.preset, info.precision, info.step, info.total_steps) == \
        ("completed", "my-loop", "fp16+scaler", 23, 23)
    from amptui.dashboard.runmodel import RunModel  # what the dashboard's run screen shows

    model_view = RunModel(run_dir.name)
    model_view.feed(recs)
    assert model_view.status == "completed" and model_view.run.has_scaler and model_view.run.lr == 0.01
    assert model_view.run.loss == steps[-1]["loss"] and model_view.run.scale == scaler.get_scale()
    assert model_view.run.skipped_total == len(backoffs)


def test_a_float32_loop_without_a_scaler_is_told_its_loss_is_not_finite(runs_dir):
    """The loss-scale alarms' NaN warning is the trainer's for every precision: a Monitor on a
    float32 loop (no GradScaler) says it too, naming the record's span (a Monitor sums its window)."""
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 8), torch.randn(8, 1)
    with amptui.Monitor("nan-loop", optimizer=opt, model=model, log_every=4) as mon:
        for step in range(1, 9):
            loss = nn.functional.mse_loss(model(x), y) * (float("nan") if step == 6 else 1.0)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            mon.step(loss, batch_size=8)
    said = [r for r in by_kind(events(only_run(runs_dir)), "warning") if r.get("code") == "loss_not_finite"]
    assert len(said) == 1 and "(NaN or inf) in steps 5-8" in said[0]["message"], said


def test_an_exception_inside_the_with_ends_the_run_failed_and_is_reraised(runs_dir):
    model = nn.Linear(4, 4)
    with pytest.raises(ValueError, match="boom"):
        with amptui.Monitor("boom", model=model) as mon:
            mon.step(torch.tensor(1.5))
            raise ValueError("boom at step 1")
    recs = events(only_run(runs_dir))
    end = recs[-1]
    assert end["kind"] == "end" and end["status"] == "failed" and end["steps"] == 1 and end["final_loss"] == 1.5
    assert end["error"]["type"] == "ValueError" and end["error"]["message"] == "boom at step 1"
    assert "raise ValueError" in end["error"]["traceback"]
    info = runs.load_run(only_run(runs_dir))
    assert info.status == "failed" and "boom at step 1" in info.error


def test_no_host_sync_per_step(runs_dir, monkeypatch):
    """CPU tensors have no device to wait for, and torch.cuda.set_sync_debug_mode needs CUDA; so
    every Python-level device-to-host read (item, tolist, float/int/bool of a tensor) is counted
    by wrapping it -- the mock stands in only for CUDA's sync-debug mode. The GradScaler's own
    per-step read (scaler.step checks found_inf) is AMP's and happens without the Monitor too:
    the Monitor may add exactly one read per `log_every` window."""
    counts = count_device_reads(monkeypatch)

    per_step: list[int] = []
    _, _, _, baseline = tiny_loop(40, after_step=lambda: per_step.append(counts["n"]))
    baseline()
    base_total, base_steps = counts["n"], per_step[:]
    assert base_total >= 40  # GradScaler.step reads found_inf once per step (AMP's own sync)

    counts["n"], per_step[:] = 0, []
    model, opt, scaler, _ = tiny_loop(0)
    mon = amptui.Monitor("sync-count", scaler=scaler, optimizer=opt, model=model, log_every=10)
    created = counts["n"]
    loop = _run(40, model, opt, scaler, torch.randn(8, 16), torch.randn(8, 16), mon,
                lambda: per_step.append(counts["n"]))
    loop()
    extra = [(m - created) - b for b, m in zip(base_steps, per_step)]
    # Cumulative extra reads after each step: 0 inside a window, +1 at steps 10, 20, 30, 40.
    assert extra == [i // 10 for i in range(1, 41)], extra
    mon.close()
    assert len(by_kind(events(only_run(runs_dir)), "step")) == 4


def test_the_monitor_computes_its_loops_precision_once_for_every_reader(runs_dir, monkeypatch):
    """One owner per process: the precision the Monitor sees its loop use (at its first step) is
    computed once and is the one its start record says, its range samples measure to and its hygiene
    checks (the Recorder's); before, the start record computed it again."""
    from amptui.core.config.precision import Precision

    model, opt, scaler, _ = tiny_loop(0)
    with amptui.Monitor("once", scaler=scaler, optimizer=opt, model=model, log_every=2,
                        config={"amp": {"dtype": "float16"}, "numerics": {"every": 2}}) as mon:
        real, calls = Precision.from_config.__func__, []  # from here on: what the loop's records read
        monkeypatch.setattr(Precision, "from_config", classmethod(lambda cls, *a, **k: calls.append(a) or real(cls, *a, **k)))
        _run(4, model, opt, scaler, torch.randn(8, 16), torch.randn(8, 16), mon, None)()
    assert len(calls) == 1
    assert mon.recorder.precision is not None and mon.recorder.precision.short == "fp16+scaler"
    recs = events(only_run(runs_dir))
    assert recs[0]["precision"]["short"] == "fp16+scaler"
    assert {r["dtype"] for r in by_kind(recs, "numerics")} == {"float16"}
