"""Sentences for a person on the terminal (doctor's report, notes, hints, errors): through rich,
so on a terminal they wrap at word boundaries to its width and a wrapped line goes on at its own
indent; anywhere else (a pipe, a log, a test) exactly as written, one line per line.

The tables are cli/tables.py's and the live progress line cli/console.py's; this is the rest of
the CLI's text.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.text import Text

from amptui.cli.console import terminal
from amptui.core.fmt import shown


def say(text: str, out: TextIO | None = None, *, hang: int = 0) -> None:
    """Print `text` (one or more lines). On a terminal each line wraps at word boundaries, its
    continuation indented like the line itself plus `hang` columns."""
    out = out if out is not None else sys.stdout
    text = shown(text, newlines=True)
    console = terminal(out)
    if console is None:
        out.write(text + "\n")
        out.flush()
        return
    for line in text.split("\n"):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        if not body:
            console.print()
            continue
        for i, part in enumerate(Text(body).wrap(console, max(10, console.width - indent - hang))):
            part.rstrip()
            console.print(Text(" " * (indent + (hang if i else 0))) + part)


def error(message: str) -> None:
    """`amptui: error: ...` on stderr: one line where nobody reads it on a terminal, wrapped at
    word boundaries where someone does."""
    say(f"amptui: error: {message}", sys.stderr, hang=2)
