"""The event stream (PRODUCT.md section 4): append-only JSON lines between trainer and readers.

One writer per file. Each record is written as one line and flushed, so a reader sees whole
records except possibly a torn last line, which it leaves for the next read.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Iterator

VERSION = 1
KINDS = ("start", "step", "scaler", "epoch", "mem", "checkpoint", "warning", "end")


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


def _clean(value: Any) -> Any:
    """JSON has no inf/NaN: write them as null plus nothing else surprising."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class EventWriter:
    """Appends records `{"v": 1, "kind", "t", "rank", ...}`; flushed at each record."""

    def __init__(self, path: Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        self._fh = open(self.path, "a", encoding="utf-8")

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        record = {"v": VERSION, "kind": kind, "t": round(time.time(), 6), "rank": self.rank}
        record.update(_clean(fields))
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()
        return record

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventReader:
    """Tails one event file: each `read()` returns the records completed since the last call.

    A last line without its newline is left for the next read (the writer may be mid-write);
    a complete line that is not a JSON object is skipped and counted in `bad_lines`.
    """

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.bad_lines = 0
        self._partial = b""

    def read(self, max_bytes: int | None = None) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read() if max_bytes is None else fh.read(max_bytes)
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        records = []
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                self.bad_lines += 1
                continue
            if isinstance(record, dict) and "kind" in record:
                records.append(record)
            else:
                self.bad_lines += 1
        return records

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


def read_events(path: Path) -> list[dict[str, Any]]:
    """All complete records of a file (a torn last line is ignored)."""
    return EventReader(path).read()
