"""The event stream: append-only JSON lines between trainer and readers.

One writer per file. Each record is written as one line and flushed, so a reader sees whole
records except possibly a torn last line, which it leaves for the next read.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator

from amptui.core.run.runfiles import RunFolder
from amptui.core.safefile import UnsafeFile, open_fd, open_file
from amptui.core.stream.fieldtypes import field_types
from amptui.core.stream.records import BY_KIND, COMMON_FIELDS, Record, from_wire

VERSION = 1
KINDS = tuple(BY_KIND)


def events_file(run_dir: Path, rank: int = 0) -> Path:
    return RunFolder(run_dir).rank_events(rank)


def primary_events_file(run_dir: Path) -> Path:
    """The file that speaks for a run: rank 0's, or on a node of a multi-node run that holds other
    ranks (torchrun's rendezvous decides who is rank 0), this node's lowest rank's."""
    run_dir = Path(run_dir)
    main = events_file(run_dir)
    if main.exists():
        return main
    # only events.rank<digits>.jsonl: another name there (events.rankx.jsonl) is not a rank's file
    ranked = sorted((p for p in run_dir.glob("events.rank*.jsonl") if p.name[11:-6].isascii() and p.name[11:-6].isdigit()),
                    key=lambda p: int(p.name[11:-6]))
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


RESERVE_BYTES = 64 * 1024  # disk kept back for the end record: a run that fills the disk still ends `failed`


class EventWriter:
    """Appends records `{"v": 1, "kind", "t", "rank", ...}`; flushed at each record.

    `reserve`: hold RESERVE_BYTES of the disk in an unlinked file beside the events (no name in the
    folder; the kernel frees it when its descriptor closes, a SIGKILL included). When the disk
    fills, the reserve is given back, so the record being written (completed from its buffer) and
    the `end` record that says "No space left on device" still fit."""

    def __init__(self, path: Path, rank: int = 0, reserve: bool = False):
        self.path = Path(path)
        self.rank = rank
        # As data: never appended through a symlink, to a FIFO, or to a hard link's twin.
        self._fh = open_file(self.path, "a+")
        if _ends_torn(self._fh):
            self._fh.write("\n")  # a line torn by a crash (full disk) must not swallow our first record
        self._reserve = _reserve_beside(self.path) if reserve else None

    def _give_back(self) -> bool:
        """Free the reserve (True if there was one)."""
        if self._reserve is None:
            return False
        fd, self._reserve = self._reserve, None
        try:
            os.ftruncate(fd, 0)  # freed now, though forked DataLoader workers share the descriptor
        except OSError:
            pass
        os.close(fd)
        return True

    def _flush(self, kind: str) -> None:
        try:
            self._fh.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC or not self._give_back():
                raise
            if kind != "end":
                raise  # the run fails on this; its end record then fits in what was given back
            self._fh.flush()

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        record = {"v": VERSION, "kind": kind, "t": round(time.time(), 6), "rank": self.rank}
        record.update(_clean(fields))
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._flush(kind)
        return record

    def write(self, record: Record) -> dict[str, Any]:
        """Append one record built from its class (core/stream/records.py)."""
        return self.emit(record.KIND, **record.fields())

    def close(self) -> None:
        try:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
        finally:
            self._give_back()

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reserve_beside(path: Path) -> int | None:
    """A descriptor of RESERVE_BYTES written to a file in `path`'s folder and unlinked at once;
    None when the disk has not even that (then there is nothing to keep back)."""
    reserve = path.with_name(f".{path.name}.{os.getpid()}.reserve")
    try:
        fd = open_fd(reserve, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    except OSError:
        return None
    try:
        os.unlink(reserve)
        os.write(fd, bytes(RESERVE_BYTES))  # written, not sparse: the blocks are ours
        os.fsync(fd)
        return fd
    except OSError:
        os.close(fd)
        return None


MAX_LINE_BYTES = 4 * 1024 * 1024  # no real record comes near; a longer line is skipped unread
CHUNK_BYTES = 1024 * 1024

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


def parse_line(line: bytes) -> Record | None:
    """One line as its record object (records.from_wire), or None when it is not a valid one (or
    longer than MAX_LINE_BYTES)."""
    if len(line) > MAX_LINE_BYTES:
        return None
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return from_wire(record) if valid_record(record) else None


class LineFramer:
    """The one way event files are cut into lines: bytes in, whole non-blank lines out.

    A last line without its newline is held for the next `feed` (the writer may be mid-write). A
    line longer than `max_line` is dropped as soon as that is known, never held whole: its bytes
    are skipped up to its newline. So the framer holds at most `max_line` bytes whatever the file
    holds. `bad_lines` counts dropped over-long lines and, through `parse`, lines that are no
    valid record (see `valid_record`): one count for every way a line can be damaged.
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES):
        self.max_line = max_line
        self.bad_lines = 0
        self._held: list[bytes] = []  # the torn last line, in the pieces it arrived in
        self._held_bytes = 0
        self._skipping = False        # inside an over-long line: drop bytes up to its newline

    @property
    def held_bytes(self) -> int:
        """Bytes of a torn line waiting for its end (at most `max_line`)."""
        return self._held_bytes

    @property
    def at_line_start(self) -> bool:
        """Nothing held or being skipped: the next byte fed begins a line."""
        return not self._held_bytes and not self._skipping

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by `chunk` (blank lines left out)."""
        if self._skipping:
            cut = chunk.find(b"\n")
            if cut == -1:
                return []
            chunk, self._skipping = chunk[cut + 1:], False
        parts = chunk.split(b"\n")  # no copy of a chunk without a newline
        torn = parts.pop()
        if parts and self._held:
            parts[0] = b"".join(self._held) + parts[0]
            self._held, self._held_bytes = [], 0
        self._hold(torn)
        lines = []
        for line in parts:
            if len(line) > self.max_line:
                self.bad_lines += 1
            elif line.strip():
                lines.append(line)
        return lines

    def _hold(self, piece: bytes) -> None:
        if not piece:
            return
        self._held_bytes += len(piece)
        if self._held_bytes > self.max_line:  # too long already: count it now, skip to its end
            self._held, self._held_bytes, self._skipping = [], 0, True
            self.bad_lines += 1
        else:
            self._held.append(piece)

    def parse(self, line: bytes) -> Record | None:
        """`parse_line`, counting a line that is no valid record in `bad_lines`."""
        record = parse_line(line)
        if record is None:
            self.bad_lines += 1
        return record

    def records(self, chunk: bytes) -> list[Record]:
        """The valid records completed by `chunk`."""
        out = []
        for line in self.feed(chunk):
            record = self.parse(line)
            if record is not None:
                out.append(record)
        return out


def open_events(path: Path) -> IO[bytes]:
    """An event file opened as data: no symlink followed, a regular file only (a FIFO or a device
    is refused without waiting: `UnsafeFile`, an OSError)."""
    return open_file(path, "rb", within=Path(path).parent)


class EventReader:
    """Tails one event file: each `read()` returns the records completed since the last call.

    Lines come from a LineFramer (a torn last line waits; damaged and over-long lines are counted
    in `bad_lines`), so memory stays bounded whatever the file holds. A file that cannot be read
    as data (a symlink, a FIFO, a device, a folder) gives no records and says why in `damaged`.
    """

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.framer = LineFramer()
        self.damaged = ""  # why the file cannot be read, when it cannot

    @property
    def bad_lines(self) -> int:
        return self.framer.bad_lines

    def read_chunk(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` from `offset` (not advanced: the caller takes what it uses)."""
        try:
            with open_events(self.path) as fh:
                fh.seek(self.offset)
                data = fh.read(max_bytes)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            self.damaged = str(exc) if isinstance(exc, UnsafeFile) else f"{self.path}: {exc.strerror or exc}"
            return b""
        self.damaged = ""
        return data

    def read(self, max_bytes: int | None = None) -> list[Record]:
        """Records completed since the last call, reading about `max_bytes` (all there is: None).
        Past `max_bytes` only while nothing was found yet: callers that read "until an empty
        batch" must not stop inside a huge damaged line."""
        records: list[Record] = []
        budget = max_bytes
        while budget is None or budget > 0 or not records:
            chunk = self.read_chunk(min(CHUNK_BYTES, budget) if budget and budget > 0 else CHUNK_BYTES)
            if not chunk:
                break
            self.offset += len(chunk)
            if budget is not None:
                budget -= len(chunk)
            records += self.framer.records(chunk)
        return records

    def follow(self, interval: float = 0.2, stop=lambda: False) -> Iterator[list[Record]]:
        """Yield batches of new records until `stop()` is true (polling; works on every filesystem)."""
        while True:
            batch = self.read()
            if batch:
                yield batch
            elif stop():
                return
            else:
                time.sleep(interval)


def read_events(path: Path) -> list[Record]:
    """All complete records of a file (a torn last line is ignored)."""
    return EventReader(path).read()
