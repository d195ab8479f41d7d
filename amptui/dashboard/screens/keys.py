"""Keys shown only where they apply, and a reason when one that does not apply is pressed.

A screen lists its keys once in BINDINGS and says in `refusal(action)` why an action does not
apply now (or None; base.DashboardScreen). The footer then hides the key (Textual's check_action);
pressing it anyway reaches a hidden fallback binding that shows the reason, so no key is ever
silently dead.

A read-only dashboard (`amptui serve --read-only`, told by READ_ONLY_ENV) leaves off, here and only
here (`why_off`), every action that starts, stops, changes or deletes something: the key is hidden,
pressed anyway it says why, the help lists it as off.

Each screen's first binding of an action gets an id, `scope.action` ("home.run", "run.stop"): the
name a keymap in amptui's config file remaps it by (dashboard/keymap.py), and the command palette
lists. Later bindings of the same action (escape beside q) are fixed aliases.
"""

from __future__ import annotations

import re
from dataclasses import replace

from textual.binding import Binding, BindingType
from textual.screen import Screen

READ_ONLY_ENV = "AMPTUI_READ_ONLY"  # "1" in the dashboards `amptui serve --read-only` starts
READ_ONLY_WHY = "read-only: served with --read-only"
# Every action of the dashboard's screens, classed once (tests/unit/test_read_only.py fails on one that is
# not). A read-only dashboard allows WATCH only: an action in neither set is off there (default-deny).
# WATCH looks, moves, compares and explains; CHANGES starts, stops, cancels, resumes, deletes, saves
# or writes a file (a picture, an export), or leaves the runs folder the tab was served.
WATCH = frozenset({"answer", "back", "cancel", "close", "command_palette", "compare", "detach", "done", "filter",
                   "first_run", "focus_presets", "help", "info", "last_run", "leave", "next_panel", "pane",
                   "panel", "plan", "previous_widget", "quit", "restore", "toggle_mark", "watch", "why_not", "x_axis"})
CHANGES = frozenset({"ab", "cancel_ab", "cancel_tune", "delete", "export", "picture", "resume", "run",
                     "runs_folders", "save_as", "save_winner", "script", "stop", "stop_or_back", "tune"})


def why_off(screen: Screen, action: str) -> str | None:
    """Why `action` does not apply on `screen` now (None: it does): off in a read-only dashboard
    unless it only watches, else the screen's own `refusal`. The footer, a key's fallback, the help
    and the palette ask here."""
    if getattr(screen.app, "read_only", False) and action not in WATCH:
        return READ_ONLY_WHY
    refusal = getattr(screen, "refusal", None)
    return refusal(action) if refusal is not None else None


def action_name(action: str) -> str:
    """An action as a keymap names it: `export('csv')` -> `export_csv`, `panel(0)` -> `panel_0`."""
    return "_".join(w for w in re.split(r"[^A-Za-z0-9_]+", action) if w)


def named(scope: str, bindings: list[Binding]) -> list[BindingType]:
    """The bindings with ids `scope.action` on the first binding of each action (see above)."""
    return list(_named(scope, bindings))


def _named(scope: str, bindings: list[Binding]) -> list[Binding]:
    out, seen = [], set()
    for b in bindings:
        name = action_name(b.action)
        if b.id is None and name not in seen and not name.startswith("why_not"):
            b = replace(b, id=f"{scope}.{name}")
        seen.add(name)
        out.append(b)
    return out


def with_reasons(bindings: list[Binding], actions: tuple[str, ...], scope: str) -> list[BindingType]:
    """BINDINGS (named in `scope`) plus, for each action that can be refused, a hidden binding on
    the same key that says why (Textual tries the next binding of a key when check_action refuses
    the first; CHANGES get one too, for a read-only dashboard). The fallback shares the action's id,
    so a remapped key keeps its reason."""
    bindings = _named(scope, bindings)
    out: list[BindingType] = list(bindings)
    for b in bindings:
        if b.action in actions or b.action.split("(")[0] not in WATCH:
            out.append(Binding(b.key, f"why_not('{b.action}')", b.description, show=False, id=b.id))
    return out
