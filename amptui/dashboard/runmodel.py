"""What the run screen shows, built from event records; no Textual in here.

`RunModel` holds the run's state (`run`, a core.runstate.RunState: status, step, loss, scale,
precision, ...) and what only the dashboard draws: the plot series the panels declare (`Plot`,
each panel's PLOTS), memory per device and rank, the last few scaler events, the trainer's log
lines. `dashboard.runtail.RunTail` feeds it from the run folder in a worker thread; the screen
renders from it a few times a second. All access goes through `model.lock`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from amptui.core.config.precision import Precision
from amptui.core.numerics import NumericsSummary
from amptui.core.run.runstate import RunState
from amptui.core.series import Mode, Series
from amptui.core.stream.records import (
    Checkpoint,
    Epoch,
    Mem,
    Numerics,
    Record,
    Scaler,
    Start,
    Step,
    WarningRecord,
    as_record,
)

SERIES_CAP = 400
MAX_MEM_SERIES = 8
LOG_LINES = 400
SCALER_EVENTS = 200  # the loss-scale panel's scrolling list


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Plot:
    """A series a panel draws (its PLOTS): which records it comes from, the number it takes of each
    (None: no point), and how points merge when the series halves (core.series). A point sits at
    the record's step (a record without one: the run's step when it arrived)."""

    name: str                                  # model.series[name]
    of: type[Record]
    value: Callable[[Any], float | None]
    how: Mode = "last"
    cap: int = SERIES_CAP
    every_rank: bool = False                   # else only the records of the rank that speaks for the run


class RunModel:
    def __init__(self, run_id: str = "", plots: Iterable[Plot] = ()):
        self.run = RunState(primary_rank=0, run_id=run_id)  # rank 0, or a node's lowest rank (set by the tail)
        self.lock = threading.RLock()
        self.version = 0
        self.bad_lines = 0  # complete lines in the event files that were not records (skipped)
        self.damaged = ""   # why an event file cannot be read as data (a FIFO, a device, a link)
        self.plots: dict[type[Record], list[Plot]] = {}
        self.series: dict[str, Series] = {}
        for plot in plots:
            if plot.name not in self.series:
                self.plots.setdefault(plot.of, []).append(plot)
                self.series[plot.name] = Series(plot.cap, plot.how)
        self.time_s = Series(SERIES_CAP, "last")  # training seconds at each step (the time axis)
        self.n_backoff = 0
        self.n_growth = 0
        self.scaler_events: deque[dict[str, Any]] = deque(maxlen=SCALER_EVENTS)
        self.mem: dict[str, Series] = {}
        self.shards: dict[int, float] = {}  # FSDP: rank -> bytes of its parameter shards + optimizer state
        self.mem_now: dict[str, tuple[float, float | None]] = {}  # label -> (value, total)
        self.mem_peak: dict[str, float] = {}
        self.rank_step: dict[int, int] = {}
        self.epochs_seen: deque[Epoch] = deque(maxlen=50)
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
        if self.run.end is not None:
            return self.run.status
        if self.alive is False:
            return "killed"
        if self.run.started is None:
            return "starting"
        return "running"

    def elapsed(self, now: float) -> float | None:
        """The run's duration as every view tells it (core.runstate.RunClock: its training
        sessions summed, the time it lay stopped left out); counting up to `now` while it runs."""
        if self.run.started is None:
            return None
        return self.run.clock.seconds(now if self.status == "running" else None)

    def eta(self, now: float, session_t: float | None = None) -> float | None:
        return self.run.eta(now, session_t) if self.status == "running" else None

    # --- what the tail tells it ---------------------------------------------------------------
    def feed(self, records: Sequence[Record | dict[str, Any]]) -> None:
        """Records as the reader yields them (a line's dict is read as one), in file order."""
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
            run = self.run
            run.preset = run.preset or preset
            run.precision_said = run.precision_said or precision_words
            run.precision = run.precision or Precision.from_record(precision_words)
            self._changed()

    def speak_for(self, rank: int) -> None:
        """Another rank's file speaks for the run (a node of a multi-node run without rank 0)."""
        with self.lock:
            self.run.primary_rank = rank

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

    # --- folding records: the state (RunState.add), then what the panels draw ------------------------
    def add(self, rec: Record | dict[str, Any]) -> None:
        rec = as_record(rec)
        self.run.add(rec)
        own = self.run.speaks(rec)
        if own and self.run.redone_after is not None:  # a resume, an autopilot rewind: draw the redone steps once
            for series in (*self.series.values(), self.time_s, *self.mem.values()):
                series.rewind(self.run.redone_after)
        x = _num(getattr(rec, "step", None))
        for plot in self.plots.get(type(rec), ()):
            if own or plot.every_rank:
                self.series[plot.name].add(self.run.step if x is None else x, plot.value(rec))
        handler = _HANDLERS.get(type(rec))
        if handler is not None:
            handler(self, rec, own)

    def _on_start(self, rec: Start, own: bool) -> None:
        self._note_shards(rec)

    def _on_step(self, rec: Step, own: bool) -> None:
        step = _num(rec.step)
        if step is None:
            return
        self.rank_step[rec.rank] = int(step)
        if isinstance(rec.mem, dict):
            self._mem_from_step(rec.rank, step, rec.mem)
        t = rec.t
        if own and t is not None:
            self.time_s.add(step, self.run.clock.seconds(t))

    def _on_epoch(self, rec: Epoch, own: bool) -> None:
        if own:
            self.epochs_seen.append(rec)

    def _on_checkpoint(self, rec: Checkpoint, own: bool) -> None:
        self.checkpoints += 1

    def _on_numerics(self, rec: Numerics, own: bool) -> None:
        if own:
            self.numerics.add(rec)

    def _on_warning(self, rec: WarningRecord, own: bool) -> None:
        if not own:  # the run's own are the state's; another rank's are shown too
            self.run.warnings.append(str(rec.message or ""))

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

    def _note_shards(self, rec: Start) -> None:
        """FSDP: what the rank holds for good (its parameter shards + their optimizer state), drawn
        beside its allocated / rss line, so the rest of the peak is activations and buffers."""
        held = rec.sharded
        if isinstance(held, dict):
            value = (_num(held.get("params_bytes")) or 0.0) + (_num(held.get("optimizer_bytes")) or 0.0)
            self.shards[rec.rank] = value

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

    def _on_mem(self, rec: Mem, own: bool) -> None:
        rank = rec.rank
        x = self.rank_step.get(rank, self.run.step)
        devices = [dev for dev in rec.devices or [] if isinstance(dev, dict)]
        for dev in devices:
            if rank != 0 and self.run.world_size > 1 and dev.get("index") is None:
                continue
            self._mem_point(f"gpu{dev.get('index', 0)} used", x, dev.get("used"), dev.get("total"))
        if not rec.devices and f"r{rank} rss" not in self.mem and rec.rss is not None:
            self._mem_point(f"r{rank} rss", x, rec.rss)

    def _on_scaler(self, rec: Scaler, own: bool) -> None:
        self.run.scaler_seen = True  # another rank's event says so too
        if rec.event == "backoff":
            self.n_backoff += 1
        else:
            self.n_growth += 1
        overflow = rec.overflow or []
        self.scaler_events.append({"step": rec.step or 0, "event": rec.event, "old": rec.old_scale,
                                   "new": _num(rec.new_scale), "overflow": list(overflow[:4]),
                                   "n_overflow": len(overflow)})


# one handler per kind, after the state's (RunState.add) and the declared plots
_HANDLERS: dict[type[Record], Callable[[RunModel, Any, bool], None]] = {
    Start: RunModel._on_start, Step: RunModel._on_step, Mem: RunModel._on_mem, Scaler: RunModel._on_scaler,
    Epoch: RunModel._on_epoch, Checkpoint: RunModel._on_checkpoint, Numerics: RunModel._on_numerics,
    WarningRecord: RunModel._on_warning,
}

