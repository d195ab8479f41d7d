"""The home screen's title line, fitted to its width each time it is drawn (so also after a resize):
the hint that other runs folders exist (`o`) always shows; a long runs folder path gives way first
by dropping the tagline, then by losing its middle (its start and last folders stay: they say where
the user is)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import RenderResult
from textual.widgets import Static

from amptui.core.fmt import shown

ELLIPSIS = "…"
NAME = "amptui"
TAGLINE = " · mixed-precision training dashboard"
RUNS_IN = " · runs in "


def _cut_middle(text: str, width: int) -> str:
    """`text` in at most `width` cells, its middle replaced by an ellipsis (more of its end kept)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    room = width - 1
    head_room = room // 2
    head = ""
    for ch in text:
        if cell_len(head + ch) > head_room:
            break
        head += ch
    tail = ""
    for ch in reversed(text):
        if cell_len(head) + cell_len(ch + tail) > room:
            break
        tail = ch + tail
    return head + ELLIPSIS + tail


def shorten_path(path: str, width: int) -> str:
    """`path` in at most `width` cells: whole if it fits, else its first folder, an ellipsis and as
    many of its last folders as fit (`/home/ann/…/exp/runs`); when even the last one does not fit
    with the start, that last one alone, cut in its middle."""
    if cell_len(path) <= width:
        return path
    parts = path.split("/")
    lead = 2 if path.startswith("/") else 1      # "/home" or "~" / "runs": the start that says where
    head = "/".join(parts[:lead])
    best = ""
    for first in range(lead + 1, len(parts)):    # the most trailing folders that fit after head/…/
        candidate = f"{head}/{ELLIPSIS}/" + "/".join(parts[first:])
        if cell_len(candidate) <= width:
            best = candidate
            break
    if best:
        return best
    last = parts[-1] or path
    alone = f"{ELLIPSIS}/{last}"
    if cell_len(alone) <= width:
        return alone
    return _cut_middle(last, width)


def fit_title(runs_display: str, others: int, width: int) -> Text:
    """The title as it fits `width` cells: the tagline goes first, then the path's middle; the
    `o` hint stays."""
    path = shown(runs_display)
    hint = f" · o: {others} other folder{'s' if others > 1 else ''}" if others else ""
    fixed = cell_len(NAME + RUNS_IN + hint)
    tagline = TAGLINE if cell_len(NAME + TAGLINE) + cell_len(RUNS_IN + path + hint) <= width else ""
    if not tagline:
        path = shorten_path(path, max(width - fixed, 1))
    return Text.assemble((NAME, "bold"), tagline, RUNS_IN, (path, "italic"), (hint, "dim"))


class HomeTitle(Static):
    """`show(runs folder, other folders)`; each draw fits them to the width it has then."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.runs_display = ""
        self.others = 0

    def show(self, runs_display: str, others: int) -> None:
        self.runs_display, self.others = runs_display, others
        self.refresh()

    def render(self) -> RenderResult:
        width = self.content_size.width or cell_len(NAME + TAGLINE + RUNS_IN + self.runs_display) + 40
        return fit_title(self.runs_display, self.others, width)
