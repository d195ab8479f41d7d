"""The range-headroom heat map: one row per sampled layer, one column per sample (the newest on the
right), each cell coloured by the layer's narrowest headroom on that sample (forward output or
gradient, log2 bits to the dtype's largest finite value). A run whose mode has a numerics probe
(core/modes/base.py: a converted linear's GEMM SQNR in dB, say) draws the probe's view
instead: one row per layer it measured, each cell its figure on that sample in the probe's bands,
low hot as low headroom is. Drawn from core.numerics.NumericsSummary: no torch, no telemetry."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

from amptui.core.modes import NumericsProbe
from amptui.core.numerics import NumericsSummary, ProbeSeries, fmt_bits, nonfinite_text, some_names

# (below this many bits, colour, word): red has overflowed or is one doubling away
BANDS = ((0.0, "bold red", "inf/NaN"), (1.0, "red", "<1"), (4.0, "dark_orange", "<4"),
         (8.0, "yellow", "<8"), (math.inf, "green", "8+"))
PALETTE = tuple(style for _, style, _ in BANDS)  # a probe's five bands take the same colours
CELL = "█"
EMPTY = ("·", "grey42")  # not sampled on that step (or no value: all zeros)


def band(value: float | None, bands: tuple = BANDS) -> tuple[str, str]:
    """(character, style) of one cell: headroom bits by BANDS, a probe's figure by its probe_bands."""
    if value is None:
        return EMPTY
    if value == -math.inf:
        return "✖", bands[0][1]
    for limit, style, _ in bands[1:]:
        if value < limit:
            return CELL, style
    return CELL, bands[-1][1]


def heat_map(summary: NumericsSummary, width: int, height: int) -> Text:
    """The map in `width` x `height` cells: layer names on the left, the newest samples right. With
    more layers than rows, the narrowest ones are kept (in the model's order)."""
    if not summary.rows or width < 8 or height < 1:
        return Text("no range samples yet", style="dim")
    keep = {s.name for s in summary.narrowest(height)}
    bold = {name for name in summary.rows if _is_narrow(summary, name)}
    return _grid(summary.rows, keep, bold, BANDS, width, height)


def probe_bands(probe: NumericsProbe) -> tuple:
    """A probe's (below, word) bands in the heat map's colours."""
    return tuple((limit, style, word) for (limit, word), style in zip(probe.bands, PALETTE, strict=True))


def probe_map(series: ProbeSeries | None, width: int, height: int) -> Text:
    """A probe's view in `width` x `height` cells: a row per layer it measured, its figure per sample.
    With more layers than rows, the lowest ones are kept (in the model's order); those under its
    alarm's line (the second band) in bold."""
    if series is None or not series.rows or width < 8 or height < 1:
        return Text(f"no {series.probe.key if series else 'probe'} samples yet", style="dim")
    lowest = series.lowest(len(series.rows))
    keep = {name for name, _ in lowest[:height]}
    bold = {name for name, low in lowest if low < series.probe.bands[1][0]}
    return _grid(series.rows, keep, bold, probe_bands(series.probe), width, height)


def _grid(rows: dict[str, list[float | None]], keep: set[str], bold: set[str], bands: tuple,
          width: int, height: int) -> Text:
    names = list(rows)
    if len(names) > height:
        names = [n for n in names if n in keep][:height]
    label_w = min(max(len(n) for n in names), max(6, width // 2))
    shared = _shared_prefix(names) if max(len(n) for n in names) > label_w else ""
    label_w = min(max(len(n) - len(shared) for n in names), label_w)
    cols = max(1, width - label_w - 1)
    lines = []
    for name in names:
        label = name[len(shared):]
        label = label if len(label) <= label_w else "…" + label[-(label_w - 1):]
        line = Text(label.rjust(label_w) + " ", style="bold" if name in bold else "")
        for value in rows[name][-cols:]:
            char, style = band(value, bands)
            line.append(char, style=style)
        lines.append(line)
    return Text("\n").join(lines)


def _shared_prefix(names: list[str]) -> str:
    """The dotted parts every name starts with ("blocks." of blocks.0.mlp.fc and blocks.1.attn.qkv):
    left off the labels when they do not fit, so a cut keeps the block's number."""
    parts = [n.split(".")[:-1] for n in names]
    shared = []
    for column in zip(*parts, strict=False):
        if len(set(column)) > 1:
            break
        shared.append(column[0])
    return "".join(p + "." for p in shared)


def _is_narrow(summary: NumericsSummary, name: str) -> bool:
    stats = summary.layers.get(name)
    return stats is not None and stats.narrowest is not None and stats.narrowest < BANDS[1][0]


def _key(bands: tuple, unit: str) -> Text:
    text = Text()
    for _, style, word in bands:
        text.append(CELL if word != "inf/NaN" else "✖", style=style)
        text.append(f"{word} ")
    text.append(unit, style="dim")
    return text


def probe_legend(summary: NumericsSummary, series: ProbeSeries, shown: int = 3) -> Text:
    """A probe's view's colour key, its headline, the layers whose figure fell lowest, and the latest
    first non-finite module."""
    probe = series.probe
    text = _key(probe_bands(probe), probe.unit)
    text.append(f"\n{probe.headline(series.latest)}")
    last = summary.latest_first()
    if last is not None:
        text.append(f"\nstep {last['step']}: first non-finite: ", style="red")
        text.append(nonfinite_text(last))
    if lowest := series.lowest(shown):
        text.append("\nlowest: ")
        text.append(", ".join(f"{name} {'inf/NaN' if low == -math.inf else probe.value_words(low)}" for name, low in lowest),
                    style="bold")
    return text


def legend_and_narrowest(summary: NumericsSummary, shown: int = 3) -> Text:
    """The colour key, the narrowest layers with their figures, and the latest first non-finite."""
    text = _key(BANDS, f"bits to {summary.dtype or '?'} max")
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
        self.probed: ProbeSeries | None = None

    def show(self, summary: NumericsSummary, probed: ProbeSeries | None = None) -> None:
        """Draw `summary`'s headroom, or (`probed`) a mode's probe's figures."""
        self.summary, self.probed = summary, probed
        self.refresh()

    def render(self) -> Text:
        if self.probed is not None:
            return probe_map(self.probed, self.size.width, self.size.height)
        return heat_map(self.summary, self.size.width, self.size.height)
