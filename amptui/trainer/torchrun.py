"""`python -m amptui.trainer.torchrun RUN_DIR [--resume] [-- SCRIPT_ARGS]`: a DDP run.

Runs torchrun (PyTorch's own launcher, in this process) on the trainer or the user's script.
When a rank fails, torchrun stops the others and raises ChildFailedError; the failing rank's
exception comes from torchelastic's error file (written by `@record` in that rank), and this
supervisor turns it into the run's `end` record: status `failed`, naming the rank.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core import launch
from ..core.events import EventReader, EventWriter, primary_events_file


def first_failure(exc) -> tuple[int, dict]:
    """The root cause among the failed ranks: the earliest recorded exception.

    Ranks that fail *because* another rank died (a collective whose peer vanished, or
    the SIGTERM torchrun sends to the survivors) come later, or carry no error file.
    """
    failures = []
    for rank, failure in exc.failures.items():
        data = failure.error_file_data.get("message") if isinstance(failure.error_file_data, dict) else None
        recorded = isinstance(data, dict)
        message = data.get("message", "") if recorded else str(failure.message)
        extra = data.get("extraInfo", {}) if recorded else {}
        exact = float(extra.get("amptui_time", failure.timestamp)) if recorded else float("inf")
        failures.append((not recorded, exact, rank, message, extra.get("py_callstack", ""), failure.exitcode))
    failures.sort()
    _, _, rank, message, callstack, exitcode = failures[0]
    kind, _, text = message.partition(": ")
    if not text:
        kind, text = "WorkerFailed", message or f"exit code {exitcode}"
    return rank, {"type": kind, "message": text, "rank": rank, "traceback": callstack[-4000:]}


def main() -> int:
    argv = sys.argv[1:]
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m amptui.trainer.torchrun")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    run_dir = args.run_dir.resolve()
    cfg = launch.load_config(run_dir)

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    before = {p: p.stat().st_size for p in run_dir.glob("events*.jsonl")}
    try:
        torchrun(launch.torchrun_args(cfg, run_dir, args.resume, script_args))
        return 0
    except ChildFailedError as exc:
        rank, error = first_failure(exc)
        print(f"[amptui] rank {rank} failed: {error['type']}: {error['message']}", file=sys.stderr, flush=True)
        path = primary_events_file(run_dir)
        _write_end(path, before.get(path, 0), error)
        return 1


def _write_end(path: Path, offset: int, error: dict) -> None:
    """The run's `end` record, unless this session's records already end with one."""
    session = EventReader(path, offset=offset).read()
    if any(r.get("kind") == "end" for r in session):
        return
    steps = [r for r in session if r.get("kind") == "step"]
    started = next((r["t"] for r in session if r.get("kind") == "start"), None)
    rank = next((r["rank"] for r in session if r.get("kind") == "start"), 0)
    with EventWriter(path, rank=rank) as writer:
        writer.emit("end", status="failed", total_time_s=(time.time() - started) if started else None,
                    steps=steps[-1]["step"] if steps else 0, final_loss=steps[-1]["loss"] if steps else None,
                    val_acc=None, peak_mem=None, error=error)


if __name__ == "__main__":
    sys.exit(main())
