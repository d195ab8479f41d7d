"""A hook must never break the script it watches."""

from __future__ import annotations

import functools
import sys
import threading

# One lock for all of a script's hooks: a script that steps from several threads (one optimizer
# shared, or one each) has its steps counted one optimizer step at a time, never two at once.
_BOOKKEEPING = threading.RLock()


def guarded(method):
    """A hook must never break the script: an error in amptui's bookkeeping turns recording off
    (said once on stderr) and the script goes on."""
    @functools.wraps(method)
    def run(self, *args):
        if self.off:
            return None
        try:
            with _BOOKKEEPING:
                return method(self, *args)
        except StopRequested:
            raise KeyboardInterrupt("amptui stop") from None
        except Exception as exc:  # noqa: BLE001
            self.off = True
            print(f"[amptui] recording stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return None
    return run


class StopRequested(Exception):
    pass
