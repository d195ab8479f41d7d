"""`python -m amptui.trainer RUN_DIR [--resume]`: train the run described by RUN_DIR/config.toml.

Started by `amptui run`, the dashboard, or torchrun (one process per rank); it talks to the
rest of amptui only through RUN_DIR/events.jsonl.
"""

import argparse
import sys
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from amptui.core.errors import UserError
from amptui.core.run import runlock
from amptui.trainer.loop import run


@record  # anything that escapes the loop's own handling still reaches torchelastic's error file
def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m amptui.trainer")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--resume", action="store_true", help="continue from RUN_DIR/checkpoints/last.pt")
    args = parser.parse_args()
    run_dir = args.run_dir.resolve()
    # One writer per run folder: adopt the lock `amptui run/resume` handed down (or take it)
    # before anything is written; held until this process exits. Not per rank under torchrun.
    try:
        lock = runlock.hold_for_this_process(run_dir)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    try:
        return run(run_dir, args.resume)
    finally:
        if lock is not None:
            lock.release()


if __name__ == "__main__":
    sys.exit(main())
