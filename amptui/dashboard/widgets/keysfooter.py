"""Every screen's footer: Textual's Footer, rebuilt only when the keys it shows change.

Textual rebuilds its footer (a new widget per key, each one styled) on every signal that a screen's
bindings may have changed: each focus move, each `refresh_bindings`, each screen resumed. Most of
those change nothing the footer shows, and on a busy training box the rebuild was a good part of
what a key press cost. The keys are compared first (bindings, keys as displayed, enabled, tooltips):
those the last rebuild drew, not those of the signal that asked for it (they can change in between)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


def keys_shown(screen: Screen) -> tuple:
    """What a footer on `screen` draws, as a value to compare: every binding (a frozen dataclass, so
    all its fields; the hidden ones too: the palette's key is drawn), its key as the app displays it,
    whether it is enabled, its tooltip."""
    app = screen.app
    return tuple((binding, app.get_key_display(binding), enabled, tooltip)
                 for _node, binding, enabled, tooltip in screen.active_bindings.values())


class KeysFooter(Footer):
    _drawn: tuple | None = None  # the keys the last rebuild drew

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._drawn = keys_shown(self.screen)
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if self._drawn is not None and self.is_attached and screen is self.screen \
                and keys_shown(screen) == self._drawn:
            return
        super().bindings_changed(screen)
