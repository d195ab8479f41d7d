"""Every screen's footer: Textual's Footer, rebuilt only when what it shows changes.

Textual rebuilds its footer (removes every key, mounts and styles new ones) on each signal that a
screen's bindings may have changed: every focus move, `refresh_bindings`, screen resumed. Most change
nothing it shows. KeysFooter keeps Textual's signal handling and decides at rebuild time instead:
what `compose()` would yield now is compared with the keys actually mounted, and only a difference
rebuilds. Rebuilds are serialized (one asked for during another makes that one look once more), so
the last look always reads the bindings after the last signal. An earlier version compared each
signal with keys read apart from those mounted; a run's status (its tail's thread writes it) changed
in between, and a finished run's `s Stop` stayed shown."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

from textual.compose import compose
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup


def _shown(widgets: Iterable[Widget]) -> Iterator[tuple]:
    """What these footer children draw, as values to compare. A key's `-compact` class is left out: data
    binding sets it from the footer's `compact` once mounted, the same on a key mounted now."""
    for w in widgets:
        if type(w) is FooterKey:
            yield FooterKey, w.key, w.key_display, w.description, w.action, w._disabled, w.tooltip, \
                w.classes - {"-compact"}
        elif type(w) is FooterLabel:
            yield FooterLabel, str(w.content), w.classes
        elif type(w) is KeyGroup:  # composed, not mounted: its keys are still pending
            yield KeyGroup, w.classes, tuple(_shown(w.children if w.is_attached else w._pending_children))
        else:
            yield (object(),)  # a kind not known here: never equal, so the footer is rebuilt


class KeysFooter(Footer):
    _rebuilding = False  # a recompose is running (it may await across other screens' callbacks)
    _again = False  # asked for again while it ran: it looks once more when done

    async def recompose(self) -> None:
        if self._rebuilding:
            self._again = True
            return
        self._rebuilding = True
        try:
            while True:
                self._again = False
                if not self.is_attached or self._pruning:
                    return
                mounted = tuple(_shown(self.query_children("*").exclude(".-textual-system")))
                if mounted != tuple(_shown(compose(self))):
                    await super().recompose()
                if not self._again:
                    return
        except asyncio.CancelledError:  # cut short (its screen's queue closed): the keys may be half mounted
            self._again = True
            raise
        finally:
            self._rebuilding = False
            if self._again:  # a look asked for and not done: ask again
                self.call_after_refresh(self.recompose)
