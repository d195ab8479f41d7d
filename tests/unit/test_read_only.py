"""Read-only as default-deny (issue 40): every action of every screen is classed once, watch or change,
and a read-only dashboard runs only the first class. The walk presses every binding and picks every
palette command of every screen of a read-only dashboard over a runs folder with a running A/B and a
running tune, and checks that nothing was started, signalled or written."""

from __future__ import annotations

from amptui.dashboard.app import keymap_scopes
from amptui.dashboard.screens.keys import CHANGES, WATCH


def test_every_action_of_every_screen_is_classed_once():
    assert not WATCH & CHANGES
    unclassed = {f"{scope}: {b.action}" for scope, owner in keymap_scopes().items()
                 for b in owner.BINDINGS if b.action.split("(")[0] not in WATCH | CHANGES}
    assert not unclassed, "class each action in dashboard/screens/keys.py (WATCH or CHANGES): " + ", ".join(sorted(unclassed))
