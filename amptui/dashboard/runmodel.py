"""What the run screen shows, built from event records; no Textual in here.

`RunModel` is the run's state (core.runstate.RunState: status, step, loss, scale, precision, ...)
plus what only the dashboard draws: bounded, downsampled plot series, the last few scaler events,
memory per device and rank, the trainer's log lines. `dashboard.runtail.RunTail` feeds it from
the run folder in a worker thread; the screen renders from it a few times a second. All access
goes through `model.lock`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Any

from amptui.core.config.precision import Precision
from amptui.core.numerics import NumericsSummary
from amptui.core.records import (
    EPOCH,
    MEM,
    SCALER,
    STEP,
    WARNING,
    Checkpoint,
    Epoch,
    Mem,
    Numerics,
    Scaler,
    Start,
    Step,
    WarningRecord,
)
from amptui.core.run.runstate import RunState
from amptui.core.series import Series

SERIES_CAP = 400
MAX_MEM_SERIES = 8
LOG_LINES = 400
SCALER_EVENTS = 200  # the loss-scale panel's scrolling list


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


class RunModel(RunState):
    def __init__(self, run_id: str = ""):
        super().__init__(primary_rank=0, run_id=run_id)  # rank 0, or a node's lowest rank (set by the tail)
        self.lock = threading.RLock()
        self.version = 0
        self.bad_lines = 0  # complete lines in the event files that were not records (skipped)
        self.damaged = ""   # why an event file cannot be read as data (a FIFO, a device, a link)
        self.loss_s = Series(SERIES_CAP, "mean")
        self.lr_s = Series(SERIES_CAP, "last")
        self.val_s = Series(SERIES_CAP // 2, "last")  # validation loss at each evaluated epoch
        self.scale_s = Series(SERIES_CAP, "last")
        self.sps_s = Series(SERIES_CAP, "mean")
        self.steptime_s = Series(SERIES_CAP, "mean")
        self.time_s = Series(SERIES_CAP, "last")  # training seconds at each step (the time axis)
        self.backoffs = Series(SERIES_CAP // 2, "min")
        self.growths = Series(SERIES_CAP // 2, "max")
        self.n_backoff = 0
        self.n_growth = 0
        self.scaler_events: deque[dict[str, Any]] = deque(maxlen=SCALER_EVENTS)
        self.mem: dict[str, Series] = {}
        self.shards: dict[int, float] = {}  # FSDP: rank -> bytes of its parameter shards + optimizer state
        self.mem_now: dict[str, tuple[float, float | None]] = {}  # label -> (value, total)
        self.mem_peak: dict[str, float] = {}
        self.rank_step: dict[int, int] = {}
        self.epochs_seen: deque[dict[str, Any]] = deque(maxlen=50)
        self.checkpoints = 0
        self.alive: bool | None = None  # process check, set by the tail
        self.records = 0
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES)
        self.log_seq = 0  # lines ever appended, so a view can append only what is new
        self.loading = True  # still catching up with the history on disk
        self.numerics = NumericsSummary(cap=SERIES_CAP)  # range headroom per layer (the heat map)

    # --- status -----------------------------------------------------------------------------
    @property
    def status(self) -> str:
        if self.end is not None:
            return super().status
        if self.alive is False:
            return "killed"
        if self.started is None:
            return "starting"
        return "running"

    def elapsed(self, now: float) -> float | None:
        """The run's duration as every view tells it (core.runstate.RunClock: its training
        sessions summed, the time it lay stopped left out); counting up to `now` while it runs."""
        if self.started is None:
            return None
        return self.clock.seconds(now if self.status == "running" else None)

    def eta(self, now: float, session_t: float | None = None) -> float | None:
        return super().eta(now, session_t) if self.status == "running" else None

    # --- what the tail tells it ---------------------------------------------------------------
    def feed(self, records: list[dict[str, Any]]) -> None:
        """Valid records (core.events.valid_record), in file order."""
        if not records:
            return
        with self.lock:
            for rec in records:
                self.add(rec)
            self.records += len(records)
            self.version += 1

    def _changed(self) -> None:
        self.version += 1

    def prefill(self, preset: str, precision_words: str) -> None:
        """Name and precision from config.toml, before the trainer's start record arrives."""
        with self.lock:
            self.preset = self.preset or preset
            self.precision_said = self.precision_said or precision_words
            self.precision = self.precision or Precision.from_record(precision_words)
            self._changed()

    def speak_for(self, rank: int) -> None:
        """Another rank's file speaks for the run (a node of a multi-node run without rank 0)."""
        with self.lock:
            self.primary_rank = rank

    def count_skimmed_scaler(self, counts: dict[str, int]) -> None:
        """Scaler events a skimming read counted without parsing them."""
        with self.lock:
            self.n_backoff += counts.get("backoff", 0)
            self.n_growth += counts.get("growth", 0)

    def set_bad_lines(self, count: int) -> None:
        with self.lock:
            if count != self.bad_lines:
                self.bad_lines = count
                self._changed()

    def set_damaged(self, why: str) -> None:
        with self.lock:
            if why != self.damaged:
                self.damaged = why
                self._changed()

    def caught_up(self) -> None:
        with self.lock:
            if self.loading:
                self.loading = False
                self._changed()

    def set_alive(self, alive: bool | None) -> None:
        with self.lock:
            if alive != self.alive:
                self.alive = alive
                self._changed()

    def add_log(self, lines: list[str]) -> None:
        if not lines:
            return
        with self.lock:
            self.log_lines.extend(lines)
            self.log_seq += len(lines)
            self._changed()

    # --- folding records: the state (RunState.add), then the plots --------------------------------
    def add(self, rec: dict[str, Any]) -> None:
        super().add(rec)
        kind = rec.get("kind")
        own = self.speaks(rec)
        if kind == Start.KIND:
            self._note_shards(rec)
        if kind == Start.KIND and own and self.session_step:
            for series in (self.loss_s, self.lr_s, self.scale_s, self.sps_s, self.steptime_s, self.val_s, self.time_s,
                           self.backoffs, self.growths, *self.mem.values()):
                series.rewind(self.session_step)  # steps after the checkpoint are done again: draw them once
        elif kind == Step.KIND:
            self._plot_step(rec, own)
        elif kind == Mem.KIND:
            self._plot_mem(rec)
        elif kind == Scaler.KIND:
            self._plot_scaler(rec)
        elif kind == Epoch.KIND and own:
            self.epochs_seen.append(rec)
            self.val_s.add(self.step, _num(rec.get(EPOCH.val_loss)))
        elif kind == Checkpoint.KIND:
            self.checkpoints += 1
        elif kind == Numerics.KIND and own:
            self.numerics.add(rec)
        elif kind == WarningRecord.KIND and not own:
            self.warnings.append(str(rec.get(WARNING.message, "")))

    def _plot_step(self, rec: dict[str, Any], own: bool) -> None:
        rank, step = int(rec.get("rank") or 0), _num(rec.get(STEP.step))
        if step is None:
            return
        self.rank_step[rank] = int(step)
        mem = rec.get(STEP.mem)
        if isinstance(mem, dict):
            self._mem_from_step(rank, step, mem)
        if not own:
            return
        self.loss_s.add(step, self.loss)
        self.lr_s.add(step, self.lr)
        if self.scale is not None and self.scale > 0:
            self.scale_s.add(step, math.log2(self.scale))
        self.sps_s.add(step, self.samples_per_s)
        self.steptime_s.add(step, self.step_time_ms)
        t = _num(rec.get("t"))
        if t is not None:
            self.time_s.add(step, self.clock.seconds(t))

    def _mem_series(self, label: str) -> Series | None:
        series = self.mem.get(label)
        if series is None:
            if len(self.mem) >= MAX_MEM_SERIES:
                return None
            series = self.mem[label] = Series(SERIES_CAP, "max")
        return series

    def _mem_point(self, label: str, x: float, value: Any, total: Any = None) -> None:
        value, total = _num(value), _num(total)
        if value is None:
            return
        series = self._mem_series(label)
        if series is not None:
            series.add(x, float(value))
        self.mem_now[label] = (float(value), float(total) if total is not None else None)
        self._mem_peak(label, value)

    def _mem_peak(self, label: str, value: Any) -> None:
        if _num(value) is not None:
            self.mem_peak[label] = max(self.mem_peak.get(label, 0.0), float(value))

    def _note_shards(self, rec: dict[str, Any]) -> None:
        """FSDP: what the rank holds for good (its parameter shards + their optimizer state), drawn
        beside its allocated / rss line, so the rest of the peak is activations and buffers."""
        held = rec.get("sharded")
        if isinstance(held, dict):
            value = (_num(held.get("params_bytes")) or 0.0) + (_num(held.get("optimizer_bytes")) or 0.0)
            self.shards[int(rec.get("rank") or 0)] = value

    def _mem_from_step(self, rank: int, step: float, mem: dict[str, Any]) -> None:
        if rank in self.shards:
            self._mem_point(f"r{rank} shards", step, self.shards[rank])
        if "allocated" in mem:
            self._mem_point(f"r{rank} allocated", step, mem.get("allocated"))
            self._mem_point(f"r{rank} reserved", step, mem.get("reserved"))
            self._mem_peak(f"r{rank} allocated", mem.get("peak_allocated"))
        elif "rss" in mem:
            self._mem_point(f"r{rank} rss", step, mem.get("rss"))
            self._mem_peak(f"r{rank} rss", mem.get("peak_rss"))

    def _plot_mem(self, rec: dict[str, Any]) -> None:
        rank = int(rec.get("rank") or 0)
        x = self.rank_step.get(rank, self.step)
        devices = [dev for dev in rec.get(MEM.devices) or [] if isinstance(dev, dict)]
        for dev in devices:
            if rank != 0 and self.world_size > 1 and dev.get("index") is None:
                continue
            self._mem_point(f"gpu{dev.get('index', 0)} used", x, dev.get("used"), dev.get("total"))
        if not rec.get(MEM.devices) and f"r{rank} rss" not in self.mem and rec.get(MEM.rss) is not None:
            self._mem_point(f"r{rank} rss", x, rec.get(MEM.rss))

    def _plot_scaler(self, rec: dict[str, Any]) -> None:
        self.scaler_seen = True
        step = rec.get(SCALER.step) or 0
        new = _num(rec.get(SCALER.new_scale))
        y = math.log2(new) if new is not None and new > 0 else None
        if rec.get(SCALER.event) == "backoff":
            self.n_backoff += 1
            self.backoffs.add(step, y)
        else:
            self.n_growth += 1
            self.growths.add(step, y)
        overflow = rec.get(SCALER.overflow) or []
        self.scaler_events.append({"step": step, "event": rec.get(SCALER.event), "old": rec.get(SCALER.old_scale),
                                   "new": new, "overflow": list(overflow[:4]), "n_overflow": len(overflow)})

