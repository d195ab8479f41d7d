"""The ends of an event file: what `amptui runs` and the home screen need of a run without reading
all of a huge history. The first and last HEAD_BYTES/TAIL_BYTES give the start record and the
newest step and end; the `start`/`end` records between them give every session's duration.

Lines are cut by core.stream.events.LineFramer, like every other reader's. The middle's session records
are remembered per file by a SessionIndex the caller owns (bounded), so a list refreshed every
few seconds reads only what was appended since.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from amptui.core.safefile import UnsafeFile
from amptui.core.stream.events import CHUNK_BYTES, LineFramer, open_events
from amptui.core.stream.records import Record

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 256 * 1024
_SESSION_MARK = re.compile(rb'"kind":\s*"(?:start|end)"')


@dataclass
class Ends:
    """Records from the start and the end of an event file, and the session records between."""

    head: list[Record] = field(default_factory=list)
    middle: list[Record] = field(default_factory=list)
    tail: list[Record] = field(default_factory=list)  # empty when `head` holds the whole file
    damaged: str = ""  # why the file could not be read as data (a FIFO, a device, a symlink)

    def records(self) -> list[Record]:
        return self.head + self.middle + self.tail


class SessionIndex:
    """`start`/`end` records found in the middle of event files, per file (path and inode), so a
    rescan reads only what was appended. Holds at most `max_files` files (the least recently used
    go) and `max_records` records per file (the oldest sessions but the first go)."""

    def __init__(self, max_files: int = 1024, max_records: int = 256):
        self.max_files = max_files
        self.max_records = max_records
        self._files: OrderedDict[tuple[str, int], tuple[int, list[Record]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._files)

    def scan(self, fh: IO[bytes], path: Path, begin: int, end: int) -> list[Record]:
        key = (str(path), os.fstat(fh.fileno()).st_ino)
        scanned, found = self._files.pop(key, (begin, []))
        if end > scanned:
            found = found + session_records(fh, scanned, end)
            if len(found) > self.max_records:
                found = found[:1] + found[len(found) - self.max_records + 1:]
            scanned = end
        self._files[key] = (scanned, found)
        while len(self._files) > self.max_files:
            self._files.popitem(last=False)
        return found


def session_records(fh: IO[bytes], begin: int, end: int) -> list[Record]:
    """The `start` and `end` records of the whole lines in [begin, end), read in chunks."""
    framer = LineFramer()
    found = []
    fh.seek(begin)
    left = end - begin
    while left > 0:
        chunk = fh.read(min(CHUNK_BYTES, left))
        if not chunk:
            break
        left -= len(chunk)
        for line in framer.feed(chunk):
            if _SESSION_MARK.search(line):
                record = framer.parse(line)
                if record is not None:
                    found.append(record)
    return found


def _records(data: bytes) -> list[Record]:
    """The records of the whole lines in `data` (a torn last line left out)."""
    return LineFramer().records(data)


def read_ends(path: Path, sessions: SessionIndex | None = None) -> Ends:
    """A run's event file read at both ends (the whole of a small one). `sessions`: where the
    middle's session records are remembered between calls (None: scanned afresh)."""
    try:
        with open_events(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= HEAD_BYTES + TAIL_BYTES:
                return Ends(head=_records(fh.read(size)))
            head = fh.read(HEAD_BYTES)
            fh.seek(size - TAIL_BYTES)
            tail = fh.read(TAIL_BYTES)
            head_end = head.rfind(b"\n") + 1
            tail_start = size - TAIL_BYTES + tail.find(b"\n") + 1  # the tail's first line is cut
            if sessions is None:
                middle = session_records(fh, head_end, tail_start)
            else:
                middle = sessions.scan(fh, path, head_end, tail_start)
    except FileNotFoundError:
        return Ends()
    except OSError as exc:  # UnsafeFile says what the file is; others say what went wrong
        return Ends(damaged=str(exc) if isinstance(exc, UnsafeFile) else f"{path}: {exc.strerror or exc}")
    return Ends(head=_records(head), middle=middle, tail=_records(tail[tail.find(b"\n") + 1:]))
