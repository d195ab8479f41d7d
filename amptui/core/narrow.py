"""Tables on a narrow screen (80 columns): whole columns left out by priority until the rest fit,
never half a word. The CLI's tables (cli/tables.py) and the dashboard's compare screen both fit
their columns here."""

from __future__ import annotations

from typing import Mapping, Sequence


def columns_that_fit(widths: Mapping[str, int], drop: Sequence[str], width: int, gap: int = 2) -> list[str]:
    """The columns of `widths` (in its order) left after leaving out those named in `drop`, in that
    order, until the rest fit `width` cells with `gap` cells between neighbours. Columns not in
    `drop` stay even when the rest still does not fit (the caller scrolls or wraps then)."""
    columns = list(widths)
    for name in drop:
        if sum(widths[c] for c in columns) + gap * (len(columns) - 1) <= width:
            break
        if name in columns:
            columns.remove(name)
    return columns
