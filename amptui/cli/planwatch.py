"""`plan --script`'s hold on the script it samples: a budget for its first optimizer step (a
script that never steps has nothing to sample: it is ended, and the plan says why in one line),
and the script's process session ended with the plan, however the plan ends (a signal, a second
Ctrl-C, an error), since the script runs in a session of its own (jobs/spawn.py).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

FIRST_STEP_BUDGET_S = 300.0  # the default wait for a script's first optimizer step
_LOOK_S = 0.25
_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class FirstStepWatch:
    """Watches the run for its first record (the hooks write `start` at the first optimizer step);
    none within `budget_s`: says so and ends the script's session (`expired`)."""

    def __init__(self, run_dir: Path, proc, budget_s: float):
        self.expired = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(Path(run_dir), proc, budget_s), daemon=True)
        self._thread.start()

    def _watch(self, run_dir: Path, proc, budget_s: float) -> None:
        from amptui.core.stream.events import EventReader, primary_events_file
        from amptui.jobs import signals

        deadline = time.monotonic() + budget_s
        reader = None
        while not self._done.wait(_LOOK_S):
            if proc.poll() is not None:
                return
            reader = reader or EventReader(primary_events_file(run_dir))
            with contextlib.suppress(OSError, ValueError):
                if reader.read():
                    return
            if time.monotonic() >= deadline:
                self.expired = True
                print(f"\namptui: plan: no optimizer step in {budget_s:g} s (--budget): ending the script",
                      file=sys.stderr, flush=True)
                signals.kill_child_session(proc)
                return

    def done(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def script_ends_with_plan(proc) -> Iterator[None]:
    """While `plan` follows the script: SIGTERM and SIGHUP end the plan by SystemExit (not at once,
    as they would), and whatever ends the plan ends the script's session too."""
    from amptui.jobs import signals

    def leave(signum: int, _frame) -> None:
        raise SystemExit(128 + signum)

    old = {signum: signal.signal(signum, leave) for signum in _SIGNALS}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if proc.poll() is None:
            signals.kill_child_session(proc)
