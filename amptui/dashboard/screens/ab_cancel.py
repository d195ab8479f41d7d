"""S on the home and run screens: cancel the whole A/B the run belongs to (jobs.groups.cancel: no
further variant starts, the running one stops at a checkpoint; the A/B ends `stopped`)."""

from __future__ import annotations

from amptui.core.errors import UserError
from amptui.dashboard.screens.base import DashboardScreen
from amptui.jobs import groups as groupmod

CANCEL_KEY = "S"


def cancel_ab_of(screen: DashboardScreen, run_id: str | None) -> None:
    root = screen.app.runs_root
    try:
        found = groupmod.groups(root) if root.is_dir() else []
    except OSError as exc:
        screen.notify(str(exc), severity="error")
        return
    group = next((g for g in found if run_id and run_id in g.runs and g.active), None)
    if group is None:
        screen.notify("S cancels a running A/B: highlight (or watch) one of its runs; this one is not part "
                      "of a running A/B", severity="warning", timeout=6)
        return
    try:
        stopping = groupmod.cancel(root, group)
    except (UserError, OSError) as exc:
        screen.notify(str(exc), title="A/B not cancelled", severity="error", timeout=8)
        return
    screen.notify(f"A/B {group.label} of {group.preset} cancelled: no further variant starts"
                  + (f"; {', '.join(stopping)} is stopping (checkpoint first)" if stopping else ""), timeout=8)
