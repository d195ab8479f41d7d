"""`python -m amptui.trainer RUN_DIR [--resume]`: train the run described by RUN_DIR/config.toml.

Started by `amptui run`, the dashboard, or torchrun (one process per rank); it talks to the
rest of amptui only through RUN_DIR/events.jsonl. `run` is the process around the loop (loop.py):
a stop on SIGTERM/SIGINT with a checkpoint, and an end record whatever happens.
"""

import argparse
import signal
import sys
import traceback
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from amptui.core.errors import UserError
from amptui.core.fmt import fmt_loss
from amptui.core.run import runlock
from amptui.trainer.loop import StopRequested, Trainer
from amptui.trainer.recording import record_failure


def run(run_dir: Path, resume: bool) -> int:
    trainer = Trainer(run_dir, resume)

    def request_stop(signum, _frame):
        trainer.stop_requested = True
        trainer.log(f"received {signal.Signals(signum).name}: stopping at the next record, with a checkpoint")

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        trainer.setup()
        status = trainer.train()
        trainer.save_checkpoint()
        trainer.finish(status)
        trainer.log(f"completed: {trainer.progress.step} steps, final loss {fmt_loss(trainer.recorder.last_loss)}")
        return 0
    except StopRequested:
        trainer.save_checkpoint()
        trainer.finish("stopped")
        trainer.log(f"stopped at step {trainer.progress.step}; resume with: amptui resume {run_dir.name}")
        return 0
    except BaseException as exc:  # the run's record must say why it ended, whatever happened
        if trainer.dist.under_torchrun:
            # The supervisor writes the run's end record from torchelastic's error files, naming
            # the rank that failed first; this rank only records its own exception.
            record_failure(exc)
            if trainer.dist.rank == 0:
                trainer.recorder.close()
            else:
                trainer.finish("failed", exc)  # into this rank's own events.rank<N>.jsonl
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return 1
        trainer.finish("failed", exc)
        if isinstance(exc, UserError):
            print(f"error: {exc}", file=sys.stderr, flush=True)
        else:
            traceback.print_exc()
        return 1
    finally:
        if trainer.turns is not None:
            trainer.turns.retire()  # the other variants go on taking turns without this one
        trainer.dist.close()


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
