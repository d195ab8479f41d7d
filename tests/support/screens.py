"""The real command line on a pseudo-terminal (`amptui_on_terminal`) and what the terminal shows, line by line
(`screen_lines`)."""

from __future__ import annotations

import re

from support.terminal import amptui_on_pty

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def amptui_on_terminal(*args: str, cols: int = 80, rows: int = 24, timeout: float = 300) -> tuple[int, str]:
    """Run the real CLI with stdin/stdout/stderr on a pseudo-terminal `cols` wide; returns the exit
    code and everything it drew."""
    return amptui_on_pty(list(args), size=(cols, rows), timeout=timeout)


def screen_lines(drawn: str) -> list[str]:
    """What the terminal shows, line by line, as drawn: every redraw (\\r) and line is one entry."""
    return [s for s in re.split(r"[\r\n]+", ANSI.sub("", drawn)) if s.strip()]
