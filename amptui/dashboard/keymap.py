"""The dashboard's actions by name: what a keymap may remap, what the command palette lists.

Every screen names its bindings `scope.action` (screens/keys.py `named`); this room gathers those
names, checks a keymap from amptui's config file against them (an unknown name is refused with
the names that come close; a key that would take over another action on the same screen is
refused naming both, keymap_clashes.py), and tells which keys an action has once the keymap applies.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Iterable

from textual.binding import Binding

from amptui.core.errors import ConfigError

if TYPE_CHECKING:
    from textual.dom import DOMNode


def named_bindings(owner: type[DOMNode] | DOMNode) -> list[Binding]:
    """The bindings of a screen or app (class or instance) that have a name: one per action."""
    return [b for b in owner.BINDINGS if isinstance(b, Binding) and b.id and not b.action.startswith("why_not")]


def screen_scopes() -> dict[str, type]:
    """The screens a keymap names actions of, by scope ("home": HomeScreen)."""
    from amptui.dashboard.screens.compare import CompareScreen
    from amptui.dashboard.screens.home import HomeScreen
    from amptui.dashboard.screens.run import RunScreen
    from amptui.dashboard.screens.tune import TuneScreen

    return {"home": HomeScreen, "run": RunScreen, "compare": CompareScreen, "tune": TuneScreen}


def _scopes() -> Iterable[type]:
    from amptui.dashboard.app import AmptuiApp

    return (AmptuiApp, *screen_scopes().values())


def known_actions() -> dict[str, Binding]:
    """Every action a keymap can name, with its default binding."""
    return {b.id: b for scope in _scopes() for b in named_bindings(scope) if b.id}


def check_keymap(keymap: dict[str, str], source: str) -> dict[str, str]:
    """The keymap, each name checked (one ConfigError naming the file and the key otherwise)."""
    known = known_actions()
    for name in keymap:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=3)
            hint = f"did you mean {', '.join(near)}?" if near else "`amptui keys` lists them"
            raise ConfigError(f"{source}: keymap.{name}: no such action ({hint})")
    from amptui.dashboard.keymap_clashes import check_clashes

    check_clashes(keymap, source)
    return keymap


def keys_of(binding: Binding, keymap: dict[str, str]) -> list[str]:
    """The keys that run `binding` now: the keymap's when it names the binding, else its own."""
    keys = keymap.get(binding.id or "") or binding.key
    return [k.strip() for k in keys.split(",") if k.strip()]


def key_shown(key: str) -> str:
    """A key as printed outside the app: "slash" -> "/", "question_mark" -> "?", "ctrl+r" as is."""
    from textual.keys import format_key

    return format_key(key)
