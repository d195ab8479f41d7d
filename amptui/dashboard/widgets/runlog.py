"""The run screen's log: a RichLog that wraps its lines again when its width changes.

RichLog wraps a line once, at the width it has when the line is written; lines written while the
layout was still settling (or before the terminal was resized) would keep a width the panel no
longer has. This one keeps the lines it shows and writes them again at the new width."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog


class RunLog(RichLog):
    def __init__(self, *, max_lines: int, id: str | None = None):
        super().__init__(max_lines=max_lines, id=id, auto_scroll=True, wrap=True, markup=False, highlight=False,
                         min_width=20)
        self._shown: deque[Text] = deque(maxlen=max_lines)
        self._wrapped_at = 0

    def add(self, line: Text) -> None:
        """Show one more line (scrolled to, as RichLog does)."""
        self._shown.append(line)
        self.write(line)

    def on_resize(self, event: Resize) -> None:
        # RichLog's own handler runs after this one: it writes what came before its size was known
        width = event.size.width
        if width and width != self._wrapped_at:
            if self._wrapped_at and self._shown:
                self.clear()
                for line in self._shown:
                    self.write(line)
            self._wrapped_at = width
        elif self._shown:
            # Shorter (a warning bar appeared above it): the newest line would drop out of view with
            # no write to scroll it back, as RichLog scrolls only when it writes.
            self.scroll_end(animate=False, immediate=False, x_axis=False)
