"""The range-headroom heat map: one row per sampled layer, one column per sample (the newest on the
right), each cell coloured by the layer's narrowest headroom on that sample (forward output or
gradient, log2 bits to the dtype's largest finite value). Drawn from core.numerics.NumericsSummary:
no torch, no telemetry."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

from amptui.core.numerics import NumericsSummary, fmt_bits, nonfinite_text, some_names

# (below this many bits, colour, word): red has overflowed or is one doubling away
BANDS = ((0.0, "bold red", "inf/NaN"), (1.0, "red", "<1"), (4.0, "dark_orange", "<4"),
         (8.0, "yellow", "<8"), (math.inf, "green", "8+"))
CELL = "█"
EMPTY = ("·", "grey42")  # not sampled on that step (or no value: all zeros)


def band(bits: float | None) -> tuple[str, str]:
    """(character, style) of one cell."""
    if bits is None:
        return EMPTY
    if bits == -math.inf:
        return "✖", BANDS[0][1]
    for limit, style, _ in BANDS[1:]:
        if bits < limit:
            return CELL, style
    return CELL, BANDS[-1][1]


def heat_map(summary: NumericsSummary, width: int, height: int) -> Text:
    """The map in `width` x `height` cells: layer names on the left, the newest samples right. With
    more layers than rows, the narrowest ones are kept (in the model's order)."""
    names = list(summary.rows)
    if not names or width < 8 or height < 1:
        return Text("no range samples yet", style="dim")
    if len(names) > height:
        keep = {s.name for s in summary.narrowest(height)}
        names = [n for n in names if n in keep][:height]
    label_w = min(max(len(n) for n in names), max(6, width * 2 // 5))
    cols = max(1, width - label_w - 1)
    lines = []
    for name in names:
        row = summary.rows[name][-cols:]
        label = name if len(name) <= label_w else "…" + name[-(label_w - 1):]
        line = Text(label.rjust(label_w) + " ", style="bold" if _is_narrow(summary, name) else "")
        for bits in row:
            char, style = band(bits)
            line.append(char, style=style)
        lines.append(line)
    return Text("\n").join(lines)


def _is_narrow(summary: NumericsSummary, name: str) -> bool:
    stats = summary.layers.get(name)
    return stats is not None and stats.narrowest is not None and stats.narrowest < BANDS[1][0]


def legend_and_narrowest(summary: NumericsSummary, shown: int = 3) -> Text:
    """The colour key, the narrowest layers with their figures, and the latest first non-finite."""
    text = Text()
    for _, style, word in BANDS:
        text.append(CELL if word != "inf/NaN" else "✖", style=style)
        text.append(f"{word} ")
    text.append(f"bits to {summary.dtype or '?'} max", style="dim")
    last = summary.latest_first()
    if last is not None:
        text.append(f"\nstep {last['step']}: first non-finite: ", style="red")
        text.append(nonfinite_text(last))
    ranked = summary.narrowest(len(summary.layers))
    narrow = [s for s in ranked if s.narrowest != -math.inf][:shown]
    source = summary.nonfinite_source()
    if source is not None:  # the layers after it held its inf: counted, not listed as findings
        text.append("\ninf/NaN out: ", style="red")
        text.append(source[0].name, style="bold")
        text.append(f" +{len(source[1])} downstream" if source[1] else "")
    elif broken := [s.name for s in summary.nonfinite_layers()]:  # no forward finding says which came first
        text.append("\ninf/NaN out: ", style="red")
        text.append(some_names(broken, shown), style="bold")
    if narrow:
        text.append("\nnarrowest: ")
        text.append(", ".join(f"{s.name} {fmt_bits(s.narrowest)}" for s in narrow), style="bold")
    return text


class HeatMapView(Widget):
    """The heat map drawn at the size the layout gives it (redrawn on resize)."""

    DEFAULT_CSS = "HeatMapView { height: 1fr; }"

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.summary = NumericsSummary()

    def show(self, summary: NumericsSummary) -> None:
        self.summary = summary
        self.refresh()

    def render(self) -> Text:
        return heat_map(self.summary, self.size.width, self.size.height)
