"""What the run screen shows, built from event records; no Textual in here.

`RunModel.feed(records)` folds records into bounded state (downsampled series, the last few
scaler events, ...); `RunTail.poll(model)` reads new records from a run's event files (rank 0
and any `events.rank<N>.jsonl`) and its output.log, in chunks, so a huge history streams in
without stalling anything. The tail runs in a worker thread; the screen renders from the model
a few times a second. All model access goes through `model.lock`.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from ..core.events import events_file
from ..core.inputbound import DataWait
from ..core.runs import process_alive, read_launch_info
from ..core.series import Series

SERIES_CAP = 400
MAX_MEM_SERIES = 8
CHUNK_BYTES = 1024 * 1024
LOG_LINES = 400
LOG_TAIL_BYTES = 64 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


class RunModel:
    def __init__(self, run_id: str = ""):
        self.lock = threading.RLock()
        self.version = 0
        self.run_id = run_id
        self.primary_rank = 0  # the rank whose file speaks for the run (0, or a node's lowest rank)
        self.bad_lines = 0  # complete lines in the event files that were not records (skipped)
        self.preset = ""
        self.precision = ""
        self.device: dict[str, Any] = {}
        self.world_size = 1
        self.total_steps: int | None = None
        self.steps_per_epoch: int | None = None
        self.epochs: int | None = None
        self.started_t: float | None = None
        self.session_t: float | None = None
        self.session_step = 0
        self.last_t: float | None = None
        self.step = 0
        self.epoch = 0
        self.loss: float | None = None
        self.lr: float | None = None
        self.scale: float | None = None
        self.skipped_total = 0
        self.samples_per_s: float | None = None
        self.step_time_ms: float | None = None
        self.grad_norm: float | None = None
        self.tflops: float | None = None
        self.peak_tflops: float | None = None
        self.has_scaler = False
        self.loss_s = Series(SERIES_CAP, "mean")
        self.lr_s = Series(SERIES_CAP, "last")
        self.val_s = Series(SERIES_CAP // 2, "last")  # validation loss at each evaluated epoch
        self.scale_s = Series(SERIES_CAP, "last")
        self.sps_s = Series(SERIES_CAP, "mean")
        self.steptime_s = Series(SERIES_CAP, "mean")
        self.data_wait = DataWait()  # the input-bound notice
        self.backoffs = Series(SERIES_CAP // 2, "min")
        self.growths = Series(SERIES_CAP // 2, "max")
        self.n_backoff = 0
        self.n_growth = 0
        self.scaler_events: deque[dict[str, Any]] = deque(maxlen=6)
        self.mem: dict[str, Series] = {}
        self.mem_now: dict[str, tuple[float, float | None]] = {}  # label -> (value, total)
        self.mem_peak: dict[str, float] = {}
        self.rank_step: dict[int, int] = {}
        self.epochs_seen: deque[dict[str, Any]] = deque(maxlen=50)
        self.warnings: deque[str] = deque(maxlen=10)
        self.checkpoints = 0
        self.last_checkpoint: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.alive: bool | None = None  # process check, set by the tail
        self.records = 0
        self.log_lines: deque[str] = deque(maxlen=LOG_LINES)
        self.log_seq = 0  # lines ever appended, so a view can append only what is new
        self.loading = True  # still catching up with the history on disk

    # --- status -----------------------------------------------------------------------------
    @property
    def status(self) -> str:
        if self.end is not None:
            return str(self.end.get("status", "failed"))
        if self.alive is False:
            return "killed"
        if self.started_t is None:
            return "starting"
        return "running"

    def elapsed(self, now: float) -> float | None:
        if self.started_t is None:
            return None
        if self.end is not None or self.status == "killed":
            end_t = (self.end or {}).get("t") or self.last_t or self.started_t
            return max(0.0, end_t - self.started_t)
        return max(0.0, now - self.started_t)

    def eta(self, now: float) -> float | None:
        if self.status != "running" or not self.total_steps or self.session_t is None:
            return None
        done = self.step - self.session_step
        if done <= 0 or self.step >= self.total_steps:
            return None
        return (now - self.session_t) / done * (self.total_steps - self.step)

    @property
    def progress(self) -> float:
        if not self.total_steps:
            return 0.0
        return min(1.0, self.step / self.total_steps)

    # --- folding records -----------------------------------------------------------------------
    def feed(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        with self.lock:
            for rec in records:
                handler = getattr(self, "_on_" + str(rec.get("kind")), None)
                if handler is not None:
                    try:
                        handler(rec)
                    except (TypeError, ValueError, KeyError, AttributeError):
                        pass  # a record with odd fields must never take the screen down
                t = rec.get("t")
                if isinstance(t, (int, float)):
                    self.last_t = t if self.last_t is None else max(self.last_t, t)
            self.records += len(records)
            self.version += 1

    def _on_start(self, rec: dict[str, Any]) -> None:
        if rec.get("rank", 0) != self.primary_rank:
            return
        self.run_id = rec.get("run_id") or self.run_id
        self.preset = rec.get("preset") or self.preset
        self.precision = rec.get("precision") or self.precision
        self.device = rec.get("device") or self.device
        self.world_size = rec.get("world_size") or self.world_size
        self.total_steps = rec.get("total_steps") or self.total_steps
        self.steps_per_epoch = rec.get("steps_per_epoch") or self.steps_per_epoch
        self.epochs = rec.get("epochs") or self.epochs
        if self.started_t is None:
            self.started_t = rec.get("t")
        self.session_t = rec.get("t")
        self.session_step = rec.get("resumed_from") or 0
        if self.session_step:  # steps after the checkpoint are done again: draw them once
            for series in (self.loss_s, self.lr_s, self.scale_s, self.sps_s, self.steptime_s, self.val_s,
                           self.backoffs, self.growths, *self.mem.values()):
                series.rewind(self.session_step)
        self.peak_tflops = _num(rec.get("peak_tflops")) or self.peak_tflops
        cfg = rec.get("config") or {}
        amp = cfg.get("amp") or {}
        self.has_scaler = bool(amp.get("grad_scaler") is True or "GradScaler" in self.precision)
        self.end = None  # a resumed session: the run goes on

    def _on_step(self, rec: dict[str, Any]) -> None:
        rank = rec.get("rank", 0) or 0
        step = rec.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(rank, int):
            return  # not a step record we can place
        self.rank_step[rank] = step
        mem = rec.get("mem")
        if isinstance(mem, dict):
            self._mem_from_step(rank, step, mem)
        if rank != self.primary_rank:
            return
        get = rec.get
        self.step = step
        self.epoch = int(_num(get("epoch")) or self.epoch)
        self.loss = _num(get("loss"))
        self.lr = _num(get("lr"))
        self.scale = _num(get("scale"))
        self.skipped_total = int(_num(get("skipped_total")) or 0)
        self.samples_per_s = _num(get("samples_per_s"))
        self.step_time_ms = _num(get("step_time_ms"))
        if "grad_norm" in rec:
            self.grad_norm = _num(get("grad_norm"))
        if "tflops" in rec:
            self.tflops = _num(get("tflops"))
        self.loss_s.add(step, self.loss)
        self.lr_s.add(step, self.lr)
        if self.scale is not None and self.scale > 0:
            self.has_scaler = True
            self.scale_s.add(step, math.log2(self.scale))
        self.sps_s.add(step, self.samples_per_s)
        self.steptime_s.add(step, self.step_time_ms)
        self.data_wait.add(rec)

    def _mem_series(self, label: str) -> Series | None:
        series = self.mem.get(label)
        if series is None:
            if len(self.mem) >= MAX_MEM_SERIES:
                return None
            series = self.mem[label] = Series(SERIES_CAP, "max")
        return series

    def _mem_point(self, label: str, x: float, value: Any, total: Any = None) -> None:
        if not isinstance(value, (int, float)):
            return
        series = self._mem_series(label)
        if series is not None:
            series.add(x, float(value))
        self.mem_now[label] = (float(value), float(total) if isinstance(total, (int, float)) else None)
        self.mem_peak[label] = max(self.mem_peak.get(label, 0.0), float(value))

    def _mem_from_step(self, rank: int, step: int, mem: dict[str, Any]) -> None:
        if "allocated" in mem:
            self._mem_point(f"r{rank} allocated", step, mem.get("allocated"))
            self._mem_point(f"r{rank} reserved", step, mem.get("reserved"))
            if mem.get("peak_allocated") is not None:
                self.mem_peak[f"r{rank} allocated"] = max(self.mem_peak.get(f"r{rank} allocated", 0.0),
                                                          float(mem["peak_allocated"]))
        elif "rss" in mem:
            self._mem_point(f"r{rank} rss", step, mem.get("rss"))
            if mem.get("peak_rss") is not None:
                self.mem_peak[f"r{rank} rss"] = max(self.mem_peak.get(f"r{rank} rss", 0.0), float(mem["peak_rss"]))

    def _on_mem(self, rec: dict[str, Any]) -> None:
        rank = rec.get("rank", 0) or 0
        x = self.rank_step.get(rank, self.step)
        for dev in rec.get("devices") or []:
            if rank != 0 and self.world_size > 1 and dev.get("index") is None:
                continue
            self._mem_point(f"gpu{dev.get('index', 0)} used", x, dev.get("used"), dev.get("total"))
        if not rec.get("devices") and f"r{rank} rss" not in self.mem and rec.get("rss") is not None:
            self._mem_point(f"r{rank} rss", x, rec.get("rss"))

    def _on_scaler(self, rec: dict[str, Any]) -> None:
        self.has_scaler = True
        step = rec.get("step") or 0
        new = rec.get("new_scale")
        y = math.log2(new) if isinstance(new, (int, float)) and new > 0 else None
        if rec.get("event") == "backoff":
            self.n_backoff += 1
            self.backoffs.add(step, y)
        else:
            self.n_growth += 1
            self.growths.add(step, y)
        overflow = rec.get("overflow") or []
        self.scaler_events.append({"step": step, "event": rec.get("event"), "old": rec.get("old_scale"),
                                   "new": new, "overflow": list(overflow[:4]), "n_overflow": len(overflow)})

    def _on_epoch(self, rec: dict[str, Any]) -> None:
        if rec.get("rank", 0) != self.primary_rank:
            return
        self.epochs_seen.append(rec)
        self.val_s.add(self.step, _num(rec.get("val_loss")))

    def _on_checkpoint(self, rec: dict[str, Any]) -> None:
        self.checkpoints += 1
        self.last_checkpoint = rec

    def _on_warning(self, rec: dict[str, Any]) -> None:
        self.warnings.append(str(rec.get("message", "")))

    def _on_end(self, rec: dict[str, Any]) -> None:
        primary = rec.get("rank", 0) == self.primary_rank
        if primary or rec.get("status") == "failed":
            if self.end is None or primary:
                self.end = rec
                if primary and isinstance(rec.get("steps"), int):
                    self.step = rec["steps"]

    def add_log(self, lines: list[str]) -> None:
        if not lines:
            return
        with self.lock:
            self.log_lines.extend(lines)
            self.log_seq += len(lines)
            self.version += 1

    @property
    def error(self) -> dict[str, Any] | None:
        end = self.end or {}
        return end.get("error") or None


SKIM_ABOVE_BYTES = 32 * 1024 * 1024  # a history bigger than this is skimmed on first attach
SKIM_TARGET_STEPS = 10_000            # step records parsed while skimming (plots keep 400 points)
_STEP_MARK = b'"kind":"step"'
# one regex pass is several times faster than bytes.find per marker on lines that all start alike
_MARKED_RE = re.compile(rb'"kind":"(start|epoch|checkpoint|warning|end|scaler)"')


def _compact(path: Path) -> bool:
    """Written by amptui's EventWriter (compact separators), so the kind markers are exact."""
    try:
        with open(path, "rb") as fh:
            return b'"kind":"start"' in fh.read(4096)
    except OSError:
        return False


class SkimReader:
    """Like core.events.EventReader (whole records only; a torn last line waits), plus skimming:
    with stride k > 1 only every k-th step record is parsed (and always the newest of each chunk,
    so counters such as skipped_total stay exact). Every other kind is always parsed."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = 0
        self.bad_lines = 0
        self._partial = b""
        self._steps = 0
        self.unparsed_scaler: dict[str, int] = {}  # set by a skimming read

    def read(self, max_bytes: int, stride: int = 1) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(max_bytes)
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        if stride > 1 and not self._partial:
            # skimming: stop after the last newline and read the torn rest again next time (no copies)
            cut = chunk.rfind(b"\n") + 1
            if cut:
                self.offset += cut
                return self._skim(chunk, cut, stride)
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out: list[dict[str, Any]] = []
        pending: tuple[int, bytes] | None = None
        for line in lines:
            if not line.strip():
                continue
            if stride > 1 and _STEP_MARK in line:
                self._steps += 1
                if self._steps % stride:
                    pending = (len(out), line)
                    continue
                pending = None
            record = self._parse(line)
            if record is not None:
                out.append(record)
        if pending is not None:
            record = self._parse(pending[1])
            if record is not None:
                out.insert(pending[0], record)
        return out

    def _skim(self, data: bytes, size: int, stride: int) -> list[dict[str, Any]]:
        """Records of a chunk of whole lines, without looking at most of them: every rare kind
        (start, epoch, checkpoint, warning, end) found by its marker, step and mem records sampled
        one line per `stride` lines' worth of bytes, scaler events every `stride`-th plus the last
        few, and the newest step in full. Scaler events left unparsed are still counted."""

        def line_at(pos: int) -> tuple[int, int]:
            end = data.find(b"\n", pos, size)
            return data.rfind(b"\n", 0, pos) + 1, size if end == -1 else end

        spans: set[tuple[int, int]] = set()
        counts = {"backoff": 0, "growth": 0}
        scaler_at = []
        for match in _MARKED_RE.finditer(data, 0, size):  # one pass: the rare kinds and the scaler events
            if match.group(1) == b"scaler":
                head = data[match.end():match.end() + 160]
                event = "backoff" if b'"event":"backoff"' in head else "growth" if b'"event":"growth"' in head else ""
                if event:
                    counts[event] += 1
                scaler_at.append(match.start())
            else:
                spans.add(line_at(match.start()))
        gap = stride * 300
        pos = 0
        while pos < size:
            span = line_at(pos)
            spans.add(span)
            pos = span[1] + 1 + gap
        pos = data.rfind(_STEP_MARK, 0, size)
        if pos != -1:
            spans.add(line_at(pos))
        for i, at in enumerate(scaler_at):
            if i % stride == 0 or i >= len(scaler_at) - 6:
                spans.add(line_at(at))
        out = []
        for start, end in sorted(spans):
            line = data[start:end]
            if line.strip():
                record = self._parse(line)
                if record is not None:
                    out.append(record)
        for record in out:
            if record.get("kind") == "scaler" and record.get("event") in counts:
                counts[record["event"]] -= 1
        self.unparsed_scaler = counts
        return out

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        try:
            record = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            self.bad_lines += 1
            return None
        if isinstance(record, dict) and "kind" in record:
            return record
        self.bad_lines += 1
        return None


class RunTail:
    """Reads a run folder's event files and log into a RunModel; call `poll` repeatedly."""

    def __init__(self, run_dir: Path, model: RunModel, alive: Callable[[dict], bool] = process_alive):
        self.run_dir = Path(run_dir)
        self.model = model
        self.readers: dict[int, SkimReader] = {0: SkimReader(events_file(self.run_dir, 0))}
        self._skim: dict[int, tuple[int, int]] = {}  # rank -> (stride, until offset) for the first catch-up
        self._alive = alive
        self._log_path = self.run_dir / "output.log"
        self._log_offset: int | None = None
        self._log_partial = b""
        self._last_scan = 0.0
        self._last_alive = 0.0

    def prefill(self) -> None:
        """Name and precision from config.toml, before the trainer's start record arrives."""
        try:
            from ..core.runs import load_run

            info = load_run(self.run_dir)
        except Exception:  # a half-written folder: the events will tell
            return
        with self.model.lock:
            self.model.preset = self.model.preset or info.preset
            self.model.precision = self.model.precision or info.precision_words
            self.model.version += 1

    def _scan_ranks(self) -> None:
        for path in self.run_dir.glob("events.rank*.jsonl"):
            m = re.fullmatch(r"events\.rank(\d+)\.jsonl", path.name)
            if m and int(m.group(1)) not in self.readers:
                self.readers[int(m.group(1))] = SkimReader(path)
        # On a node of a multi-node run without rank 0, its lowest rank speaks for the run.
        if not events_file(self.run_dir, 0).exists() and len(self.readers) > 1:
            with self.model.lock:
                self.model.primary_rank = min(r for r in self.readers if r != 0)

    def _read_log(self) -> list[str]:
        try:
            size = self._log_path.stat().st_size
        except FileNotFoundError:
            return []
        if self._log_offset is None:
            self._log_offset = max(0, size - LOG_TAIL_BYTES)
            skip_first = self._log_offset > 0
        else:
            skip_first = False
        if size < self._log_offset:  # truncated: start again
            self._log_offset, self._log_partial = 0, b""
        if size == self._log_offset:
            return []
        with open(self._log_path, "rb") as fh:
            fh.seek(self._log_offset)
            chunk = fh.read(min(size - self._log_offset, LOG_TAIL_BYTES * 4))
        self._log_offset += len(chunk)
        data = self._log_partial + chunk
        parts = data.split(b"\n")
        self._log_partial = parts.pop()
        if skip_first and parts:
            parts = parts[1:]
        lines = []
        for raw in parts:
            text = raw.decode("utf-8", "replace")
            text = _ANSI.sub("", text.split("\r")[-1] if "\r" in text.rstrip("\r") else text.rstrip("\r"))
            lines.append(text)
        return lines

    def poll(self, now: float | None = None) -> bool:
        """Read what is new (at most a chunk per file). True when more is already waiting."""
        now = time.monotonic() if now is None else now
        if now - self._last_scan > 2.0:
            self._last_scan = now
            self._scan_ranks()
        more = False
        for rank, reader in list(self.readers.items()):
            if rank not in self._skim:
                try:
                    size = reader.path.stat().st_size
                except FileNotFoundError:
                    size = 0
                # ~300 bytes a step record: parse about SKIM_TARGET_STEPS of a huge history on attach
                stride = max(1, size // 300 // SKIM_TARGET_STEPS) if size > SKIM_ABOVE_BYTES else 1
                if stride > 1 and not _compact(reader.path):
                    stride = 1  # skimming finds records by their compact markers; read everything
                self._skim[rank] = (stride, size)
            stride, until = self._skim[rank]
            before = reader.offset
            skimming = stride > 1 and reader.offset < until
            records = reader.read(CHUNK_BYTES * 8 if skimming else CHUNK_BYTES, stride if skimming else 1)
            self.model.feed(records)
            if skimming and reader.unparsed_scaler:
                with self.model.lock:
                    self.model.n_backoff += reader.unparsed_scaler.get("backoff", 0)
                    self.model.n_growth += reader.unparsed_scaler.get("growth", 0)
                reader.unparsed_scaler = {}
            if reader.offset - before >= CHUNK_BYTES:
                more = True
        self.model.add_log(self._read_log())
        bad = sum(r.bad_lines for r in self.readers.values())
        if bad != self.model.bad_lines:
            with self.model.lock:
                self.model.bad_lines = bad
                self.model.version += 1
        if not more:
            with self.model.lock:
                if self.model.loading:
                    self.model.loading = False
                    self.model.version += 1
        if self.model.end is None and (now - self._last_alive > 2.0 or self.model.alive is None):
            self._last_alive = now
            info = read_launch_info(self.run_dir)
            if info:
                alive: bool | None = bool(self._alive(info))
            else:  # no launch record: not started yet, or started by something that is gone
                alive = None if self.model.started_t is None else False
            with self.model.lock:
                if alive != self.model.alive:
                    self.model.alive = alive
                    self.model.version += 1
        return more
