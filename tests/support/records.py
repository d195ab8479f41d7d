"""Event files: written as a run writes them, read back whole or as far as a live run got."""

from __future__ import annotations

import json
from pathlib import Path

from amptui.core.stream.events import VERSION
from amptui.core.stream.records import Record
from support.waits import wait_until


def record(rec: Record, t: float, rank: int = 0) -> dict:
    """The dict a writer puts on one line of events.jsonl for `rec` (a core/stream/records.py class) at
    time `t`: what `EventWriter.write` writes, with a time the test chooses."""
    return {"v": VERSION, "kind": rec.KIND, "t": t, "rank": rank, **rec.fields()}


def write_records(path: Path, records: list[dict]) -> None:
    """An event file of whole lines, as a finished run leaves it."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def events(run_dir: Path, name: str = "events.jsonl") -> list[dict]:
    return [json.loads(line) for line in (run_dir / name).read_text().splitlines() if line.strip()]


def events_so_far(run_dir: Path, name: str = "events.jsonl") -> list[dict]:
    """What a live run has written so far: nothing yet while a detached trainer is still
    starting, and only whole lines (the trainer may be mid-write)."""
    try:
        text = (run_dir / name).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def wait_for_step(run_dir: Path, n: int = 1, timeout: float = 90) -> int:
    """Wait until a live run has written a step record for step `n` or later; return that step."""
    def reached() -> int | None:
        steps = [r["step"] for r in events_so_far(run_dir) if r["kind"] == "step"]
        return steps[-1] if steps and steps[-1] >= n else None

    log = run_dir / "output.log"
    return wait_until(reached, timeout, lambda: f"{run_dir.name}: step {n} ({timeout:.0f} s)\n"
                      + (log.read_text() if log.exists() else ""), step=0.2)


def wait_for_end(run_dir: Path, timeout: float = 120) -> list[dict]:
    """Wait until the run's `end` record is written; return all records."""
    def ended() -> list[dict] | None:
        recs = events_so_far(run_dir)
        return recs if any(r["kind"] == "end" for r in recs) else None

    return wait_until(ended, timeout, f"{run_dir.name}'s end record ({timeout:.0f} s)", step=0.2)


def only_run(runs_dir: Path) -> Path:
    found = [p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]
