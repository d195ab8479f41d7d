"""The one way amptui writes CSV (`amptui export`, `compare`/`ab --format csv`, the compare screen's
export): every header and text cell is a runs-folder string as shown (fmt.shown: no control
character) and, when it starts with =, +, -, @, a tab or a carriage return, prefixed with a single
quote, so a spreadsheet reads it as text and never as a formula (OWASP's rule against CSV
injection). Numbers stay numbers."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

from amptui.core.fmt import shown

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """`value` as a CSV cell: None empty, numbers as they are, text shown and never a formula."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = shown(value)
    if text.lstrip(" ").startswith(FORMULA_START) or str(value).startswith(FORMULA_START):
        return "'" + text
    return text


def write_csv(out: IO[str], columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
              lineterminator: str = "\r\n") -> int:
    """The header and `rows` (dicts keyed by `columns`) as CSV on `out`; returns the rows written."""
    writer = csv.writer(out, lineterminator=lineterminator)
    writer.writerow([cell(c) for c in columns])
    count = 0
    for row in rows:
        writer.writerow([cell(row.get(c)) for c in columns])
        count += 1
    return count
