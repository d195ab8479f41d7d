"""Reading a run folder into a RunModel: its event files (rank 0's and any
`events.rank<N>.jsonl`) and its output.log, in chunks, so a huge history streams in without
stalling anything. `RunTail.poll()` runs in a worker thread and tells the model what it read
through the model's methods.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable

from amptui.core import safefile
from amptui.core.run.runfiles import RunFolder
from amptui.core.run.runs import load_run, process_alive, read_launch_info, writer_alive
from amptui.core.stream.events import EventReader, events_file, open_events
from amptui.core.stream.records import Record, Scaler
from amptui.dashboard.runmodel import RunModel

CHUNK_BYTES = 1024 * 1024
LOG_TAIL_BYTES = 64 * 1024
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


SKIM_ABOVE_BYTES = 32 * 1024 * 1024  # a history bigger than this is skimmed on first attach
SKIM_TARGET_STEPS = 10_000            # step records parsed while skimming (plots keep 400 points)
_STEP_MARK = b'"kind":"step"'
# one regex pass is several times faster than bytes.find per marker on lines that all start alike
_MARKED_RE = re.compile(rb'"kind":"(start|epoch|checkpoint|warning|end|scaler)"')


def _compact(path: Path) -> bool:
    """Written by amptui's EventWriter (compact separators), so the kind markers are exact."""
    try:
        with open_events(path) as fh:
            return b'"kind":"start"' in fh.read(4096)
    except OSError:
        return False


class SkimReader(EventReader):
    """core.stream.events.EventReader (its LineFramer: whole records only, a torn last line waits, damaged
    and over-long lines counted), plus skimming: with stride k > 1 only every k-th step record is
    parsed (and always the newest of each chunk, so counters such as skipped_total stay exact).
    Every other kind is always parsed."""

    def __init__(self, path: Path):
        super().__init__(path)
        self._steps = 0
        self.unparsed_scaler: dict[str, int] = {}  # set by a skimming read

    def read(self, max_bytes: int | None = CHUNK_BYTES, stride: int = 1) -> list[Record]:
        chunk = self.read_chunk(max_bytes or CHUNK_BYTES)
        if not chunk:
            return []
        if stride > 1 and self.framer.at_line_start:
            # skimming: stop after the last newline and read the torn rest again next time (no copies)
            cut = chunk.rfind(b"\n") + 1
            if cut:
                self.offset += cut
                return self._skim(chunk, cut, stride)
        self.offset += len(chunk)
        out: list[Record] = []
        pending: tuple[int, bytes] | None = None
        for line in self.framer.feed(chunk):
            if stride > 1 and _STEP_MARK in line:
                self._steps += 1
                if self._steps % stride:
                    pending = (len(out), line)
                    continue
                pending = None
            record = self.framer.parse(line)
            if record is not None:
                out.append(record)
        if pending is not None:
            record = self.framer.parse(pending[1])
            if record is not None:
                out.insert(pending[0], record)
        return out

    def _skim(self, data: bytes, size: int, stride: int) -> list[Record]:
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
                record = self.framer.parse(line)
                if record is not None:
                    out.append(record)
        for record in out:
            if isinstance(record, Scaler) and record.event in counts:
                counts[record.event] -= 1
        self.unparsed_scaler = counts
        return out


class RunTail:
    """Reads a run folder's event files and log into a RunModel; call `poll` repeatedly."""

    def __init__(self, run_dir: Path, model: RunModel, alive: Callable[[dict], bool] = process_alive):
        self.run_dir = Path(run_dir)
        self.model = model
        self.readers: dict[int, SkimReader] = {0: SkimReader(events_file(self.run_dir, 0))}
        self._skim: dict[int, tuple[int, int]] = {}  # rank -> (stride, until offset) for the first catch-up
        self._alive = alive
        self._log = LogTail(RunFolder(self.run_dir).output_log)
        self._last_scan = 0.0
        self._last_alive = 0.0

    def prefill(self) -> None:
        """Name and precision from config.toml, before the trainer's start record arrives."""
        try:
            info = load_run(self.run_dir)
        except Exception:  # a half-written folder: the events will tell
            return
        self.model.prefill(info.preset, info.precision_words)

    def poll(self, now: float | None = None) -> bool:
        """Read what is new (at most a chunk per file). True when more is already waiting."""
        now = time.monotonic() if now is None else now
        if now - self._last_scan > 2.0:
            self._last_scan = now
            self._scan_ranks()
        more = False
        for rank, reader in list(self.readers.items()):
            more = self._read_rank(rank, reader) or more
        self.model.add_log(self._log.read())
        self.model.set_bad_lines(sum(r.bad_lines for r in self.readers.values()))
        self.model.set_damaged("; ".join(r.damaged for r in self.readers.values() if r.damaged))
        if not more:
            self.model.caught_up()
        if not self.model.run.ended and (now - self._last_alive > 2.0 or self.model.alive is None):
            self._last_alive = now
            self._check_alive()
        return more

    def _scan_ranks(self) -> None:
        for path in self.run_dir.glob("events.rank*.jsonl"):
            m = re.fullmatch(r"events\.rank(\d+)\.jsonl", path.name)
            if m and int(m.group(1)) not in self.readers:
                self.readers[int(m.group(1))] = SkimReader(path)
        # On a node of a multi-node run without rank 0, its lowest rank speaks for the run.
        if not events_file(self.run_dir, 0).exists() and len(self.readers) > 1:
            self.model.speak_for(min(r for r in self.readers if r != 0))

    def _skim_plan(self, reader: SkimReader) -> tuple[int, int]:
        """(stride, until offset): how sparsely the history already on disk is read at attach."""
        try:
            size = reader.path.stat().st_size
        except FileNotFoundError:
            size = 0
        # ~300 bytes a step record: parse about SKIM_TARGET_STEPS of a huge history on attach
        stride = max(1, size // 300 // SKIM_TARGET_STEPS) if size > SKIM_ABOVE_BYTES else 1
        if stride > 1 and not _compact(reader.path):
            stride = 1  # skimming finds records by their compact markers; read everything
        return stride, size

    def _read_rank(self, rank: int, reader: SkimReader) -> bool:
        """One chunk of a rank's file into the model; True when a whole chunk was read."""
        if rank not in self._skim:
            self._skim[rank] = self._skim_plan(reader)
        stride, until = self._skim[rank]
        before = reader.offset
        skimming = stride > 1 and reader.offset < until
        records = reader.read(CHUNK_BYTES * 8 if skimming else CHUNK_BYTES, stride if skimming else 1)
        self.model.feed(records)
        if skimming and reader.unparsed_scaler:
            self.model.count_skimmed_scaler(reader.unparsed_scaler)
            reader.unparsed_scaler = {}
        # more waits after a whole chunk, and while skimming (a skim stops at its chunk's last newline)
        return reader.offset - before >= CHUNK_BYTES or (skimming and reader.offset < until)

    def _check_alive(self) -> None:
        """From the run's lock, as `amptui runs` tells it (run.json's pid only for a folder from
        before the lock file, checked by `alive`)."""
        if not os.path.lexists(RunFolder(self.run_dir).lock):
            info = read_launch_info(self.run_dir)
            if not info:  # no launch record: not started yet, or started by something that is gone
                self.model.set_alive(None if self.model.run.started is None else False)
                return
        alive, _ = writer_alive(self.run_dir, alive=self._alive)
        self.model.set_alive(alive)


class LogTail:
    """The last lines of the trainer's output.log, then what is appended (carriage-return redraws
    and colours stripped)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset: int | None = None
        self._partial = b""

    def read(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if self.offset is None:
            self.offset = max(0, size - LOG_TAIL_BYTES)
            skip_first = self.offset > 0
        else:
            skip_first = False
        if size < self.offset:  # truncated: start again
            self.offset, self._partial = 0, b""
        if size == self.offset:
            return []
        with safefile.open_file(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(min(size - self.offset, LOG_TAIL_BYTES * 4))
        self.offset += len(chunk)
        parts = (self._partial + chunk).split(b"\n")
        self._partial = parts.pop()
        if skip_first and parts:
            parts = parts[1:]
        lines = []
        for raw in parts:
            text = raw.decode("utf-8", "replace")
            lines.append(_ANSI.sub("", text.split("\r")[-1] if "\r" in text.rstrip("\r") else text.rstrip("\r")))
        return lines
