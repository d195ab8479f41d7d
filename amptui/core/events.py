"""The event stream: append-only JSON lines between trainer and readers.

One writer per file. Each record is written as one line and flushed, so a reader sees whole
records except possibly a torn last line, which it leaves for the next read.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator

from . import safefile

from .records import BY_KIND, COMMON_FIELDS, Record, field_types

VERSION = 1
KINDS = tuple(BY_KIND)


def events_file(run_dir: Path, rank: int = 0) -> Path:
    return Path(run_dir) / ("events.jsonl" if rank == 0 else f"events.rank{rank}.jsonl")


def primary_events_file(run_dir: Path) -> Path:
    """The file that speaks for a run: rank 0's, or on a node of a multi-node run that holds other
    ranks (torchrun's rendezvous decides who is rank 0), this node's lowest rank's."""
    run_dir = Path(run_dir)
    main = events_file(run_dir)
    if main.exists():
        return main
    ranked = sorted(run_dir.glob("events.rank*.jsonl"), key=lambda p: int(p.name[11:-6] or 0))
    return ranked[0] if ranked else main


MAX_STRING = 16 * 1024  # a record's strings are capped (a 10 MB description stays whole in config.toml only)


def capped(text: str, limit: int = MAX_STRING) -> str:
    """`text`, or its start and end around a note of how much was cut (a traceback keeps its last lines)."""
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]} [... {len(text) - head - tail:,} characters cut ...] {text[-tail:]}"


def _clean(value: Any) -> Any:
    """JSON has no inf/NaN: write them as null; strings capped at MAX_STRING, so a record stays a
    line any reader takes (events.MAX_LINE_BYTES)."""
    if isinstance(value, str):
        return capped(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _ends_torn(fh: IO[Any]) -> bool:
    """Does the file behind the (append) handle `fh` end inside a line?"""
    try:
        size = os.fstat(fh.fileno()).st_size
        return size > 0 and os.pread(fh.fileno(), 1, size - 1) != b"\n"
    except OSError:
        return False


class EventWriter:
    """Appends records `{"v": 1, "kind", "t", "rank", ...}`; flushed at each record."""

    def __init__(self, path: Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        # As data: never appended through a symlink, to a FIFO, or to a hard link's twin.
        self._fh = safefile.open_file(self.path, "a+")
        if _ends_torn(self._fh):
            self._fh.write("\n")  # a line torn by a crash (full disk) must not swallow our first record

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        record = {"v": VERSION, "kind": kind, "t": round(time.time(), 6), "rank": self.rank}
        record.update(_clean(fields))
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()
        return record

    def write(self, record: Record) -> dict[str, Any]:
        """Append one record built from its class (core/records.py)."""
        return self.emit(record.KIND, **record.fields())

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MAX_LINE_BYTES = 4 * 1024 * 1024  # no real record comes near; a longer line is skipped unread

_FIELD_TYPES = field_types()


def valid_record(record: Any) -> bool:
    """Is this a record readers can use without checking each field: an object with a string
    kind whose well-known fields have the types their record classes declare (a finite number,
    an object, a string, a list, or null)? Anything else is a damaged line, skipped like invalid JSON."""
    if type(record) is not dict or type(record.get("kind")) is not str:
        return False
    types = _FIELD_TYPES.get(record["kind"], COMMON_FIELDS)
    for key, value in record.items():  # exact types: JSON gives no subclasses, and true is no number
        expected = types.get(key)
        if expected is not None and value is not None and type(value) not in expected:
            return False
        if type(value) is float and not math.isfinite(value):
            return False
    return True


class EventReader:
    """Tails one event file: each `read()` returns the records completed since the last call.

    A last line without its newline is left for the next read (the writer may be mid-write);
    a complete line that is not a valid record (see `valid_record`) is skipped and counted in
    `bad_lines`, and so is a line longer than MAX_LINE_BYTES, without ever holding it whole:
    memory stays bounded whatever the file holds.
    """

    _CHUNK = 1024 * 1024

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.bad_lines = 0
        self._partial = b""
        self._skipping = False  # inside an over-long line: drop bytes up to its newline

    def read(self, max_bytes: int | None = None) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        budget = max_bytes
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                # past max_bytes only while nothing was found yet: callers that read "until an
                # empty batch" must not stop inside a huge damaged line
                while budget is None or budget > 0 or not records:
                    chunk = fh.read(min(self._CHUNK, budget) if budget and budget > 0 else self._CHUNK)
                    if not chunk:
                        break
                    self.offset += len(chunk)
                    if budget is not None:
                        budget -= len(chunk)
                    self._take(chunk, records)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            return records
        return records

    def _take(self, chunk: bytes, records: list[dict[str, Any]]) -> None:
        if self._skipping:
            cut = chunk.find(b"\n")
            if cut == -1:
                return
            chunk, self._skipping = chunk[cut + 1:], False
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial, self._skipping = b"", True
            self.bad_lines += 1
        for line in lines:
            if not line.strip():
                continue
            if len(line) > MAX_LINE_BYTES:
                self.bad_lines += 1
                continue
            record = parse_line(line)
            if record is None:
                self.bad_lines += 1
            else:
                records.append(record)

    def follow(self, interval: float = 0.2, stop=lambda: False) -> Iterator[list[dict[str, Any]]]:
        """Yield batches of new records until `stop()` is true (polling; works on every filesystem)."""
        while True:
            batch = self.read()
            if batch:
                yield batch
            elif stop():
                return
            else:
                time.sleep(interval)


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One line as a record, or None when it is not a valid one."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return record if valid_record(record) else None


def read_events(path: Path) -> list[dict[str, Any]]:
    """All complete records of a file (a torn last line is ignored)."""
    return EventReader(path).read()
