"""`amptui export RUN`: a run's step series as CSV or JSON, one row per step record.

Read from the run's primary event file in chunks, twice, so memory stays flat however long the
run: the first pass learns the columns and where each session was superseded by a resume (a run
resumed from its checkpoint at step 40 repeats steps 41.. : the later session's rows win), the
second writes the rows. An epoch's evaluation (val_loss, val_acc, the epoch's own metrics) sits on
the last step row of that epoch. Only numbers are taken from the file (it is data: a string or a
nested value in a damaged record is left out), and JSON has no inf/NaN: writers store them as null.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from amptui.core.errors import UserError
from amptui.core.stream.csvsafe import write_csv
from amptui.core.stream.events import EventReader, primary_events_file
from amptui.core.stream.records import EPOCH, Checkpoint, Epoch, Record, Start, Step

CHUNK = 4 * 1024 * 1024
FORMATS = ("csv", "json")

STEP_COLUMNS = ("step", "epoch", "t", "elapsed_s", "loss", "lr", "scale", "skipped", "skipped_total",
                "samples_per_s", "step_time_ms", "data_wait_ms", "grad_norm", "tflops")
MEM_KEYS = ("allocated", "reserved", "peak_allocated", "rss", "peak_rss")  # step.mem, as mem_<key>
EVAL_COLUMNS = ("train_loss", "val_loss", "val_acc")
_EPOCH_NOT_METRICS = {"v", "kind", "t", "rank", EPOCH.epoch, EPOCH.epoch_time_s, EPOCH.eval_time_s,
                      EPOCH.checkpoint_time_s, EPOCH.partial}
OPTIONAL_STEP = ("grad_norm", "tflops", "data_wait_ms", "scale")  # columns only when some row has them


def number(value: Any) -> float | int | None:
    """A finite number from the file, else None (bools, strings and nested values are not figures)."""
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return value
    return None


def _rewound(rec: Record, last: float) -> bool:
    """A step record at or below the last one of its session: an autopilot rewind (trainer/autopilot.py) trained
    the steps since its last checkpoint again; the rows read it as a new session resumed from that checkpoint."""
    step = number(rec.step) if isinstance(rec, Step) else None
    return step is not None and step <= last


class _Sessions:
    """Pass one: each session's cut-off step (the step the next session resumed from) and the
    columns that hold something."""

    def __init__(self) -> None:
        self.cutoffs: list[float] = []   # per session, rows above this step were redone later
        self.last = -math.inf            # the session's last step record's step (a lower one: a rewind)
        self.checkpoint = 0              # the last checkpoint record's step (where a rewind goes back to)
        self.first_t: float | None = None
        self.mem_keys: set[str] = set()
        self.step_keys: set[str] = set()
        self.eval_keys: list[str] = []

    def add(self, rec: Record) -> None:
        if isinstance(rec, Start):
            if self.first_t is None:
                self.first_t = number(rec.t)
            resumed = number(rec.resumed_from)
            if self.cutoffs and resumed is not None:
                self.cutoffs[-1] = resumed
            self.cutoffs.append(math.inf)
            self.last = -math.inf
        elif isinstance(rec, Checkpoint) and number(rec.step) is not None:
            self.checkpoint = rec.step
        elif isinstance(rec, Step):
            step = number(rec.step)
            if step is not None and _rewound(rec, self.last) and self.cutoffs:
                self.cutoffs[-1] = self.checkpoint if self.checkpoint < step else step - 1
                self.cutoffs.append(math.inf)
            self.last = step if step is not None else self.last
            self.step_keys.update(k for k in OPTIONAL_STEP if number(rec.get(k)) is not None)
            mem = rec.mem
            if isinstance(mem, dict):
                self.mem_keys.update(k for k in MEM_KEYS if number(mem.get(k)) is not None)
        elif isinstance(rec, Epoch):
            for key, value in rec.wire.items():
                if key not in _EPOCH_NOT_METRICS and number(value) is not None and key not in self.eval_keys:
                    self.eval_keys.append(key)

    def columns(self) -> list[str]:
        steps = [c for c in STEP_COLUMNS if c not in OPTIONAL_STEP or c in self.step_keys]
        mem = [f"mem_{k}" for k in MEM_KEYS if k in self.mem_keys]
        known = [c for c in EVAL_COLUMNS if c in self.eval_keys]
        others = [k if k not in STEP_COLUMNS and not k.startswith("mem_") else f"epoch_{k}"
                  for k in self.eval_keys if k not in EVAL_COLUMNS]
        return steps + mem + known + others


def _records(path: Path) -> Iterator[Record]:
    reader = EventReader(path)
    while batch := reader.read(CHUNK):
        yield from batch
    if reader.damaged:  # a link, a FIFO, a folder: not an empty run, and not to be exported as one
        raise UserError(f"cannot export: {reader.damaged}")


def step_rows(run_dir: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """The columns, and the rows (dicts over those columns; None where a row has no value)."""
    path = primary_events_file(Path(run_dir))
    sessions = _Sessions()
    for rec in _records(path):
        sessions.add(rec)
    columns = sessions.columns()
    return columns, _rows(path, sessions, columns)


def _rows(path: Path, sessions: _Sessions, columns: list[str]) -> Iterator[dict[str, Any]]:
    session = -1
    pending: dict[str, Any] | None = None  # the latest row: an epoch record after it adds its metrics
    superseded = False                     # this session has gone past the step the next one resumed from
    last = -math.inf                       # as _Sessions counts them: a rewind starts a session too
    for rec in _records(path):
        if isinstance(rec, Start) or (_rewound(rec, last) and session >= 0):
            session, superseded, last = session + 1, False, -math.inf
            if isinstance(rec, Start):
                continue
        if isinstance(rec, Step) and number(rec.step) is not None:
            last = rec.step
        cutoff = sessions.cutoffs[session] if 0 <= session < len(sessions.cutoffs) else math.inf
        if isinstance(rec, Step):
            step = number(rec.step)
            if step is not None and step > cutoff:
                superseded = True  # redone by a later session
            if step is None or superseded:
                continue
            if pending is not None:
                yield pending
            pending = _step_row(rec, columns, sessions.first_t)
        elif isinstance(rec, Epoch) and pending is not None and not superseded:
            for key, value in rec.wire.items():
                if key in _EPOCH_NOT_METRICS or number(value) is None:
                    continue
                column = key if key in columns else f"epoch_{key}"
                if column in columns:
                    pending[column] = value
    if pending is not None:
        yield pending


def _step_row(rec: Step, columns: list[str], first_t: float | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(columns)
    for column in columns:
        if column in STEP_COLUMNS and column != "elapsed_s":
            row[column] = number(rec.get(column))
    mem = rec.mem
    if isinstance(mem, dict):
        for key in MEM_KEYS:
            if f"mem_{key}" in row:
                row[f"mem_{key}"] = number(mem.get(key))
    t = number(rec.t)
    if t is not None and first_t is not None:
        row["elapsed_s"] = round(t - first_t, 3)
    return row


def write(run_dir: Path, fmt: str, out: IO[str]) -> int:
    """The series in `fmt` on `out`; returns the number of rows written."""
    columns, rows = step_rows(run_dir)
    count = 0
    if fmt == "csv":
        return write_csv(out, columns, rows, lineterminator="\n")
    out.write("[")
    for row in rows:
        out.write(("," if count else "") + "\n" + json.dumps(row, separators=(", ", ": ")))
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count
