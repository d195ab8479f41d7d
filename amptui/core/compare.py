"""The tutorials' comparison table, computed from runs' event streams (no UI here).

    summaries = [summarize(run_dir) for run_dir in dirs]
    rows = compare_rows(summaries)          # speed-up and memory saving against the first run
    print(render(rows, "table"))            # or "markdown", "csv", "json"

Used by the dashboard's compare screen and meant for `amptui compare`.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .events import EventReader, primary_events_file
from .fmt import fmt_bytes, fmt_duration
from .series import Series

_CHUNK = 8 * 1024 * 1024
# Timings leave out start-up and warm-up: step records whose window ends in the first 10% of the
# run's steps (at least the first record) do not count. Each window is timed between two reads of
# the device, so it is a synchronised device timing.
WARMUP_FRACTION = 0.1
TIMING_NOTE = ("speed-up = steady-state samples/s against the first run (start-up and the first 10% of steps "
               "left out; windows timed between device syncs); memory saving = 1 - peak / first run's peak")


@dataclass
class RunSummary:
    run_id: str
    preset: str = ""
    precision: str = ""          # words: "autocast float16 + GradScaler"
    device: str = ""
    status: str = "running"      # completed/stopped/failed from the end record; else running/killed unknown here
    steps: int = 0
    total_steps: int | None = None
    epochs_done: int = 0
    final_loss: float | None = None
    val_acc: float | None = None
    peak_mem: float | None = None
    total_time_s: float | None = None
    time_per_epoch_s: float | None = None
    skipped: int = 0
    world_size: int = 1
    steady_samples_per_s: float | None = None   # after warm-up; see WARMUP_FRACTION
    steady_step_ms: float | None = None
    loss_curve: Series = field(default_factory=lambda: Series(cap=400))

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("loss_curve")
        return data


def _peak_of(mem: dict[str, Any] | None) -> float | None:
    if not mem:
        return None
    for key in ("peak_allocated", "peak_rss", "allocated", "rss"):
        if mem.get(key) is not None:
            return float(mem[key])
    return None


def summarize(run_dir: Path) -> RunSummary:
    """Read a run's whole rank-0 event stream (in chunks, constant memory) into its summary."""
    run_dir = Path(run_dir)
    summary = RunSummary(run_id=run_dir.name)
    reader = EventReader(primary_events_file(run_dir))
    first_t = last_t = None
    epoch_times: list[float] = []
    windows: list[tuple[int, int, float, float]] = []  # (last step, steps, seconds, samples) per step record
    prev_step = 0
    peak = None
    end = None
    session_time: float | None = None
    while True:
        batch = reader.read(_CHUNK)
        if not batch:
            break
        for rec in batch:
            kind = rec.get("kind")
            t = rec.get("t")
            if t is not None:
                first_t = t if first_t is None else first_t
                last_t = t
            if kind == "start":
                summary.preset = rec.get("preset", summary.preset)
                summary.precision = rec.get("precision", summary.precision)
                summary.device = (rec.get("device") or {}).get("name", summary.device)
                summary.total_steps = rec.get("total_steps", summary.total_steps)
                summary.world_size = rec.get("world_size", summary.world_size)
                end = None  # a resumed session continues the run
                prev_step = rec.get("resumed_from") or 0
            elif kind == "step":
                step = rec.get("step", 0)
                if rec.get("step_time_ms") is not None and step > prev_step:
                    seconds = rec["step_time_ms"] / 1000 * (step - prev_step)
                    rate = rec.get("samples_per_s")
                    windows.append((step, step - prev_step, seconds, rate * seconds if rate else 0.0))
                prev_step = step
                summary.steps = rec.get("step", summary.steps)
                summary.final_loss = rec.get("loss", summary.final_loss)
                summary.skipped = rec.get("skipped_total", summary.skipped) or 0
                summary.loss_curve.add(rec.get("step", 0), rec.get("loss"))
                p = _peak_of(rec.get("mem"))
                if p is not None:
                    peak = p if peak is None else max(peak, p)
            elif kind == "epoch":
                summary.epochs_done = max(summary.epochs_done, rec.get("epoch") or 0)
                if rec.get("epoch_time_s") is not None and not rec.get("partial"):
                    epoch_times.append(float(rec["epoch_time_s"]))  # whole epochs only
                if rec.get("val_acc") is not None:
                    summary.val_acc = rec["val_acc"]
            elif kind == "end":
                end = rec
                if rec.get("total_time_s") is not None:  # a resumed run's time is all its sessions'
                    session_time = (session_time or 0.0) + float(rec["total_time_s"])
                if rec.get("peak_mem") is not None:
                    peak = float(rec["peak_mem"]) if peak is None else max(peak, float(rec["peak_mem"]))
    if end is not None:
        summary.status = end.get("status", "failed")
        summary.steps = end.get("steps", summary.steps) or summary.steps
        if end.get("final_loss") is not None:
            summary.final_loss = end["final_loss"]
        if end.get("val_acc") is not None:
            summary.val_acc = end["val_acc"]
        summary.total_time_s = session_time
    if summary.total_time_s is None and first_t is not None and last_t is not None:
        summary.total_time_s = max(0.0, last_t - first_t)
    summary.peak_mem = peak
    _steady_rates(summary, windows)
    if epoch_times:
        summary.time_per_epoch_s = sum(epoch_times) / len(epoch_times)
    return summary


def _steady_rates(summary: RunSummary, windows: list[tuple[int, int, float, float]]) -> None:
    """Samples/s and ms/step over the step records after warm-up (see WARMUP_FRACTION)."""
    total = summary.total_steps or (windows[-1][0] if windows else 0)
    warm = max(1, int(WARMUP_FRACTION * total))
    steady = [w for w in windows[1:] if w[0] - w[1] >= warm] or windows[-1:]
    steps = sum(w[1] for w in steady)
    seconds = sum(w[2] for w in steady)
    if seconds > 0 and steps:
        summary.steady_step_ms = 1000 * seconds / steps
        samples = sum(w[3] for w in steady)
        summary.steady_samples_per_s = samples / seconds if samples else None


@dataclass
class CompareRow:
    run_id: str
    preset: str
    precision: str
    status: str
    final_loss: float | None
    val_acc: float | None
    val_acc_delta: float | None  # this run's val acc - the first run's
    peak_mem: float | None
    total_time_s: float | None
    time_per_epoch_s: float | None
    samples_per_s: float | None  # steady state (see WARMUP_FRACTION)
    speedup: float | None        # steady samples/s against the first run (1.0 for the first)
    memory_saving: float | None  # 1 - this peak / first peak (0.0 for the first)
    skipped: int
    steps: int


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def compare_rows(summaries: list[RunSummary]) -> list[CompareRow]:
    """Rows of the table; speed-up and memory saving are against the first summary (the baseline)."""
    rows: list[CompareRow] = []
    base = summaries[0] if summaries else None
    for s in summaries:
        speedup = _ratio(s.steady_samples_per_s, base.steady_samples_per_s) if base else None
        if speedup is None and base:  # no throughput recorded (e.g. a Monitor without batch sizes)
            speedup = _ratio(base.steady_step_ms, s.steady_step_ms)
        ratio = _ratio(s.peak_mem, base.peak_mem) if base else None
        delta = s.val_acc - base.val_acc if base and s.val_acc is not None and base.val_acc is not None else None
        rows.append(CompareRow(
            run_id=s.run_id, preset=s.preset, precision=s.precision, status=s.status,
            final_loss=s.final_loss, val_acc=s.val_acc, val_acc_delta=delta, peak_mem=s.peak_mem,
            total_time_s=s.total_time_s, time_per_epoch_s=s.time_per_epoch_s, samples_per_s=s.steady_samples_per_s,
            speedup=speedup, memory_saving=None if ratio is None else 1.0 - ratio, skipped=s.skipped,
            steps=s.steps))
    return rows


HEADERS = ("run", "precision", "final loss", "val acc", "acc vs 1st", "peak mem", "total time", "time/epoch",
           "samples/s", "speed-up", "mem saving", "skipped")


def _secs(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.1f} s" if s < 60 else fmt_duration(s)


def cells(row: CompareRow) -> tuple[str, ...]:
    """One row as display strings, in HEADERS order."""
    return (
        row.run_id,
        row.precision or "-",
        "-" if row.final_loss is None else f"{row.final_loss:.4f}",
        "-" if row.val_acc is None else f"{100 * row.val_acc:.2f}%",
        "-" if row.val_acc_delta is None else f"{100 * row.val_acc_delta:+.2f} pt",
        fmt_bytes(row.peak_mem),
        _secs(row.total_time_s),
        _secs(row.time_per_epoch_s),
        "-" if row.samples_per_s is None else f"{row.samples_per_s:.0f}",
        "-" if row.speedup is None else f"{row.speedup:.2f}x",
        "-" if row.memory_saving is None else f"{100 * row.memory_saving:+.1f}%",
        str(row.skipped),
    )


def render(rows: list[CompareRow], fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps([asdict(r) for r in rows], indent=2)
    if fmt == "csv":  # raw numbers (bytes, seconds, fractions), for spreadsheets and scripts
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(CompareRow.__dataclass_fields__))
        writer.writeheader()
        for r in rows:
            writer.writerow(asdict(r))
        return out.getvalue()
    table = [HEADERS] + [cells(r) for r in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(table[0]) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)
