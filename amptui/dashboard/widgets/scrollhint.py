"""A visible hint where a table is wider than its box (80 columns): the box's bottom border says
that more columns are to the right (or left) and which keys scroll, as long as some are hidden.
The same for text taller than its scrolling box (show_rows_hint)."""

from __future__ import annotations

from typing import Callable

from textual.screen import Screen
from textual.widget import Widget

MORE_RIGHT = "more columns → · ← → scroll"
MORE_LEFT = "← more columns · ← → scroll"


def columns_hint(table: Widget) -> str:
    """The hint for `table` as it is scrolled now ("" when every column is in sight)."""
    if table.max_scroll_x <= 0:
        return ""
    return MORE_RIGHT if table.scroll_x < table.max_scroll_x else MORE_LEFT


def show_columns_hint(screen: Screen, table: Widget, box: Widget) -> None:
    """Keep `box`'s border subtitle on the hint while `screen` lives: it follows the scrolling
    and a table that grows or shrinks (its horizontal scrollbar comes or goes)."""

    _follow(screen, table, ("scroll_x", "show_horizontal_scrollbar"), box, lambda: columns_hint(table))


MORE_BELOW = "more below ↓ · tab, then ↓ scrolls"
MORE_ABOVE = "↑ more above · ↑ scrolls"


def rows_hint(box: Widget) -> str:
    if box.max_scroll_y <= 0:
        return ""
    return MORE_BELOW if box.scroll_y < box.max_scroll_y else MORE_ABOVE


def show_rows_hint(screen: Screen, box: Widget) -> None:
    """Keep the scrolling `box`'s border subtitle on whether more lines are below or above."""

    _follow(screen, box, ("scroll_y", "show_vertical_scrollbar", "virtual_size"), box, lambda: rows_hint(box))


def _follow(screen: Screen, watched: Widget, names: tuple[str, ...], box: Widget, hint: Callable[[], str]) -> None:
    """Set `box`'s border subtitle to hint() now and whenever one of `watched`'s `names` changes."""

    def update(_: object = None) -> None:
        box.border_subtitle = hint()

    for name in names:
        screen.watch(watched, name, update, init=False)
    screen.call_after_refresh(update)
