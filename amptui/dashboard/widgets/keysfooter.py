"""Every screen's footer: Textual's Footer, rebuilt only when the keys it shows change.

Textual rebuilds its footer (a new widget per key, each one styled) on every signal that a screen's
bindings may have changed: each focus move, each `refresh_bindings`, each screen resumed. Most of
those change nothing the footer shows, and on a busy training box the rebuild was a good part of
what a key press cost. The keys drawn (key, words, enabled, tooltip) are compared first: those the
last rebuild drew, not those of the signal that asked for it (the keys can change in between)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


def keys_shown(screen: Screen) -> tuple:
    """What a footer on `screen` would draw, as a value to compare."""
    return tuple((binding.key, binding.description, binding.action, binding.group, enabled, tooltip)
                 for _node, binding, enabled, tooltip in screen.active_bindings.values() if binding.show)


class KeysFooter(Footer):
    _drawn: tuple | None = None  # the keys the last rebuild drew

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._drawn = keys_shown(self.screen)
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self._drawn is not None and screen is self.screen and keys_shown(screen) == self._drawn:
            return
        super().bindings_changed(screen)
