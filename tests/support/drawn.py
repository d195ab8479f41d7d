"""A widget's lines as the terminal shows them, each cut at the widget's width (`drawn_text`)."""

from __future__ import annotations


def drawn_text(widget) -> str:
    """The widget's lines as drawn (each cut at the widget's width, as the terminal shows them)."""
    return "\n".join(widget.render_line(y).text.rstrip() for y in range(widget.size.height))
