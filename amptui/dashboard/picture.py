"""Pictures that leave the terminal: a screen as Textual draws it, as SVG.

    svg = screen_svg(app)                       # the app's current screen (the dashboard's `p` key)
    (dashboard.app.headless_svg draws one screen headless with these: `compare --format svg`,
    `watch RUN --svg FILE`)

Textual's SVG writes each run of same-styled characters as one <text> stretched to its cells by
`textLength`. Viewers that ignore textLength (rsvg-convert) lay the run out in a fallback font
when the web font is not there, and a run of braille dots (every plot line) then grows wider than
its cells and spills out of the plot frame. So every character outside ASCII and the box-drawing
block gets a <text> of its own at its cell's x, and each run starts at its first glyph (a viewer
that drops a leading &#160; shifts nothing): the picture holds its grid in any viewer.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.cells import cell_len

from amptui.core import safefile

if TYPE_CHECKING:
    pass

_TEXT = re.compile(r'<text ([^>]*?)x="([0-9.]+)"([^>]*?)textLength="([0-9.]+)"([^>]*)>([^<]*)</text>')
SETTLE_S = 0.3  # a last pause after the screen says it is drawn, for the compositor


def _safe(ch: str) -> bool:
    """Characters every monospace font draws at one cell (ASCII, box drawing)."""
    return ch.isascii() or ch == "\xa0" or "\u2500" <= ch <= "\u257f"


def _pin(match: re.Match) -> str:
    before, x, middle, length, after, body = match.groups()
    text = html.unescape(body)
    cells = cell_len(text)
    if cells == 0:
        return match.group(0)
    width = float(length) / cells
    out: list[str] = []

    def flush(chunk: str, at: float) -> None:
        # Leading and trailing spaces are only background (drawn by the rects): some viewers drop a
        # leading &#160; and would shift the rest of the run one cell left, so start at the first glyph.
        lead = len(chunk) - len(chunk.lstrip(" \xa0"))
        chunk = chunk.strip(" \xa0")
        if chunk:
            at += lead * width
            out.append(f'<text {before}x="{at:g}"{middle}textLength="{width * cell_len(chunk):g}"{after}>'
                       f'{_escape(chunk)}</text>')

    x0, run, run_x = float(x), "", float(x)
    for ch in text:
        if _safe(ch):
            if not run:
                run_x = x0
            run += ch
        else:
            flush(run, run_x)
            run = ""
            flush(ch, x0)
        x0 += width * cell_len(ch)
    flush(run, run_x)
    return "".join(out)


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace(" ", "&#160;").replace("\xa0", "&#160;")


def pin_cells(svg: str) -> str:
    """The SVG with every wide-risk character placed at its own cell (see the module's note)."""
    return _TEXT.sub(_pin, svg)


def screen_svg(app, title: str | None = None) -> str:
    """The app's current screen as a self-contained SVG."""
    return pin_cells(app.export_screenshot(title=title))


def save_screen(app, folder: Path, stem: str) -> Path:
    """Write the current screen to folder/<stem>-<time>.svg (never over an existing file)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    svg, n = screen_svg(app), 1
    while True:  # a new file (O_EXCL): never over one that is there, never through a link
        path = folder / (f"{base}.svg" if n == 1 else f"{base}-{n}.svg")
        try:
            with safefile.open_file(path, "x") as out:
                out.write(svg)
            return path
        except FileExistsError:
            n += 1


def parse_size(text: str) -> tuple[int, int]:
    """"120x40" -> (120, 40); ValueError with the reason otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text or "")
    if not m:
        raise ValueError(f"size {text!r}: expected COLUMNSxROWS, e.g. 120x40")
    cols, rows = int(m.group(1)), int(m.group(2))
    if not (40 <= cols <= 400 and 12 <= rows <= 200):
        raise ValueError(f"size {text!r}: columns 40..400, rows 12..200")
    return cols, rows
