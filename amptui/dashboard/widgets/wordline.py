"""One line of words that never shows half a word: on a narrow screen (80x24) the words that fit,
then an ellipsis, instead of Textual's `text-overflow: ellipsis`, which cuts mid-word."""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import RenderableType
from rich.text import Text
from textual.widgets import Static

ELLIPSIS = "…"
TRAILING = " ·,;:—-"  # separators a shortened line does not end on


def fit_words(text: Text, width: int) -> Text:
    """`text` in `width` cells: whole if it fits, else its leading whole words and "…" (the
    separator before the cut dropped). A first word longer than the line is left out whole."""
    if width <= 0 or text.cell_len <= width:
        return text
    plain = text.plain
    cut = 0
    for gap in re.finditer(r"\s+", plain):
        end = len(plain[:gap.start()].rstrip(TRAILING))
        if cell_len(plain[:end]) + 1 > width:
            break
        cut = end
    out = text[:cut]
    out.append(ELLIPSIS, style="dim")
    return out


class WordLine(Static):
    """A Static of one line fitted to its width at word boundaries (again on every resize). Given
    several forms (`show_forms`, longest first), the first that fits is shown whole, as the CLI's
    narrow tables pick a precision's form; the last is shortened when none fits."""

    _forms: tuple[Text, ...] = ()

    def show_forms(self, *forms: Text) -> None:
        self._forms = forms
        self.update(forms[0] if forms else "")

    def render(self) -> RenderableType:
        width = self.content_size.width
        content = self.content
        if isinstance(content, str):
            content = Text.from_markup(content) if self._render_markup else Text(content)
        if not isinstance(content, Text) or "\n" in content.plain:
            return super().render()  # type: ignore[return-value]
        forms = self._forms if self._forms and self._forms[0] == content else (content,)
        return next((f for f in forms if f.cell_len <= width), None) or fit_words(forms[-1], width)
