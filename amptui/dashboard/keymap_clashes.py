"""A keymap must not let one key take over another action: `"home.run" = "q"` while home.quit
still has q would drop Quit from the footer and launch a run on q. So before the dashboard opens
(and in `amptui keys`), every screen's keys are laid out as the keymap leaves them, with the app's
keys that apply on every screen (help, the command palette, Textual's ctrl+q / tab ...), and a key
the keymap gives to an action that another action there still uses is refused, naming both. A swap
(`"home.run" = "q"` and `"home.quit" = "r"`) is fine: q is no longer quit's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from textual.binding import Binding

from amptui.dashboard.screens.keys import action_name


@dataclass(frozen=True)
class _Key:
    key: str        # as Textual matches it ("slash", not "/")
    action: str     # what the user knows it by: "home.quit", "app.help", "Textual's Focus Next"
    remapped: bool  # the keymap gave this key to this action


def normal_key(key: str) -> str:
    """A key as Textual matches it: "/" -> "slash", "?" -> "question_mark", "ctrl+r" as is."""
    return next(iter(Binding.make_bindings([Binding(key.strip(), "x")]))).key


def _class_bindings(owner: type) -> list[tuple[type, Binding]]:
    """Every binding a class has, its bases' too (as Textual merges them), with the class that
    declared it."""
    out = []
    for cls in reversed(owner.__mro__):
        for b in cls.__dict__.get("BINDINGS", ()):
            binding = b if isinstance(b, Binding) else Binding(*b)
            out.append((cls, binding))
    return out


def _keys(owner: type, keymap: dict[str, str]) -> list[_Key]:
    """The keys of `owner` (a screen or the app) as the keymap leaves them."""
    pairs = [(cls, b) for cls, b in _class_bindings(owner) if not b.action.startswith("why_not")]
    names = {(cls, action_name(b.action)): b.id for cls, b in pairs if b.id}  # an alias goes by its action's name
    out = []
    for cls, b in pairs:
        name = b.id or names.get((cls, action_name(b.action))) or f"Textual's {b.description or b.action}"
        remapped = bool(b.id and keymap.get(b.id))
        keys = keymap[b.id] if b.id and remapped else b.key
        out += [_Key(normal_key(k), name, remapped) for k in keys.split(",") if k.strip()]
    return out


def clashes(keymap: dict[str, str], scopes: Mapping[str, type]) -> list[tuple[str, str, str, str]]:
    """(screen scope, key, the remapped action, the other action) for every key the keymap gives
    an action that another action on the same screen still has. `scopes`: the app (as "app") and
    its screens by scope (app.keymap_scopes())."""
    app: Any = scopes["app"]   # a Textual App class
    app_keys = _keys(app, keymap)
    if app.ENABLE_COMMAND_PALETTE:
        app_keys.append(_Key(normal_key(app.COMMAND_PALETTE_BINDING), "the command palette", False))
    found: dict[tuple[str, str, str, str], None] = {}  # ordered, and a membership test in O(1)
    for scope, screen in scopes.items():
        if scope == "app":
            continue
        keys = _keys(screen, keymap) + app_keys
        actions_of: dict[str, dict[str, None]] = {}  # key -> the actions that have it, in order
        for one in keys:
            actions_of.setdefault(one.key, {})[one.action] = None
        for mine in keys:  # linear: each key meets only the actions that share it (a keymap may be huge)
            if not mine.remapped:
                continue
            for other in actions_of[mine.key]:
                pair = (scope, mine.key, mine.action, other)
                if other != mine.action and pair not in found and (scope, mine.key, other, mine.action) not in found:
                    found[pair] = None
    return list(found)

