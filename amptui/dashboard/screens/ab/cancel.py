"""S on the home and run screens: cancel the whole A/B the run belongs to (jobs.groups.cancel: no
further variant starts, the running one stops at a checkpoint; the A/B ends `stopped`), or the
whole tune a trial belongs to (SIGINT to `amptui tune`, as its screen's q and Ctrl-C do)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from amptui.core.errors import UserError
from amptui.dashboard.notice import Notice, refused
from amptui.jobs import groups as groupmod
from amptui.jobs import signals

CANCEL_KEY = "S"


def cancel_ab_of(root: Path, run_id: str | None) -> Notice:
    """S on run `run_id` of runs folder `root`: what was cancelled, or why nothing was."""
    try:
        found = groupmod.groups(root) if root.is_dir() else []
    except OSError as exc:
        return Notice(str(exc), severity="error")
    group = next((g for g in found if run_id and run_id in g.runs and g.active), None)
    tune = running_tune_of(root, run_id) if group is None else None
    if tune is not None:
        try:  # SIGINT, as Ctrl-C; only to the process the tune's file proves is `amptui tune`
            signals.prove(tune, f"tune {tune.get('tune_id', '')}").interrupt()
        except signals.NotOurs as exc:
            return refused(str(exc), "Tune not stopped", timeout=8)
        return Notice(f"tune {tune.get('tune_id', '')} stopping: the running trial ends at its next record; "
                      "no further trial starts", timeout=8)
    if group is None:
        return Notice("S cancels a running A/B or tune: highlight (or watch) one of its runs; this one is not "
                      "part of a running A/B or tune", severity="warning", timeout=6)
    try:
        stopping = groupmod.cancel(root, group)
    except (UserError, OSError) as exc:
        return refused(str(exc), "A/B not cancelled", timeout=8)
    return Notice(f"A/B {group.label} of {group.preset} cancelled: no further variant starts"
                  + (f"; {', '.join(stopping)} is stopping (checkpoint first)" if stopping else ""), timeout=8)


_TRIAL_RUN = re.compile(r"-tune-(?P<hex>[0-9a-f]{4})-[0-9]+-[0-9a-f]{4}$")  # a trial's run id (core/tunenames.py)


def running_tune_of(root: Path, run_id: str | None) -> dict[str, Any] | None:
    """The result of the running tune whose trial `run_id` is, or None."""
    from amptui.tune import plan as T

    match = _TRIAL_RUN.search(run_id or "")
    if match is None:
        return None
    for path in Path(root).glob(f"*-tune-{match.group('hex')}.tune.json"):
        try:
            result = T.read_result(path)
        except (OSError, UserError, ValueError):
            continue
        if result.get("status") == "running" and any(t.get("run_id") == run_id for t in result.get("trials") or []):
            return result
    return None
