"""The dashboard's actions by name: what a keymap may remap, what the command palette lists.

Every screen names its bindings `scope.action` (screens/keys.py `named`); this room gathers those
names, checks a keymap from amptui's config file against them (an unknown name is refused with
the names that come close; a key that would take over another action on the same screen is
refused naming both, keymap_clashes.py), and tells which keys an action has once the keymap applies.
The classes whose actions a keymap names (the app and its screens, by scope) are given by the app
(dashboard/app.py `keymap_scopes`): this room sits below the app and the screens.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Mapping

from textual.binding import Binding
from textual.keys import format_key

from amptui.core.errors import ConfigError
from amptui.dashboard.keymap_clashes import clashes

if TYPE_CHECKING:
    from textual.dom import DOMNode


def named_bindings(owner: type[DOMNode] | DOMNode) -> list[Binding]:
    """The bindings of a screen or app (class or instance) that have a name: one per action."""
    return [b for b in owner.BINDINGS if isinstance(b, Binding) and b.id and not b.action.startswith("why_not")]


def known_actions(scopes: Mapping[str, type]) -> dict[str, Binding]:
    """Every action a keymap can name, with its default binding; `scopes`: the app and its screens
    by scope ({"app": AmptuiApp, "home": HomeScreen, ...}, app.keymap_scopes())."""
    return {b.id: b for scope in scopes.values() for b in named_bindings(scope) if b.id}


def check_keymap(keymap: dict[str, str], source: str, scopes: Mapping[str, type]) -> dict[str, str]:
    """The keymap, each name checked (one ConfigError naming the file and the key otherwise), then
    its keys: the first that would take over another action on the same screen is refused, naming
    the file, the key and both actions."""
    known = known_actions(scopes)
    for name in keymap:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(near)}?" if near else "`amptui keys` lists them"
            raise ConfigError(f"{source}: keymap.{name}: no such action ({hint})")
    for scope, key, mine, other in clashes(keymap, scopes):
        fixed = other.startswith(("Textual's", "the "))  # a key the keymap cannot move
        raise ConfigError(f"{source}: keymap.{mine}: {key_shown(key)!r} is also {other}'s key on the {scope} "
                          "screen; pick another key" + ("" if fixed else f", or remap {other} too (a swap is fine)"))
    return keymap


def keys_of(binding: Binding, keymap: dict[str, str]) -> list[str]:
    """The keys that run `binding` now: the keymap's when it names the binding, else its own."""
    keys = keymap.get(binding.id or "") or binding.key
    return [k.strip() for k in keys.split(",") if k.strip()]


def key_shown(key: str) -> str:
    """A key as printed outside the app: "slash" -> "/", "question_mark" -> "?", "ctrl+r" as is."""
    return format_key(key)
