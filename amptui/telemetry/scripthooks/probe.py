"""The probe `amptui ab --script` runs before any variant (jobs/scriptprobe.py): the script under
the hooks, as written, until its first optimizer step (or, for a loop that updates its parameters
by hand, NO_OPTIMIZER_AFTER backward() calls with no step); then what the hooks saw is written to
the file PROBE_ENV names and the process ends at once (os._exit: none of the script's own
handlers, checkpoints or output run after that point)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from amptui.core import safefile
from amptui.core.config.scriptsets import PROBE_ENV

if TYPE_CHECKING:
    from amptui.telemetry.scripthooks.host import Session


def probing() -> str | None:
    return os.environ.get(PROBE_ENV) or None


def report(session: Session, path: str, stepped: bool) -> None:
    """What the script's own loop does, then the end of the probe process."""
    scaler = session.scaling.scaler
    seen = {
        "autocast": sorted(f"torch.autocast({device!r}, dtype=torch.{dtype})" for device, dtype in session.seen.entered),
        "scaler": bool(scaler is not None and scaler.is_enabled()),
        "optimizer_step": stepped,
        "backward_calls": session.steps.losses_seen,
    }
    try:
        with safefile.open_file(path, "x") as out:  # a new file in the probe's own folder, never through a link
            json.dump(seen, out)
    finally:
        os._exit(0)
