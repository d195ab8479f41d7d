"""A line plot (textual-plotext) that redraws only when its data changed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from textual_plotext import PlotextPlot

COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "white")


@dataclass
class Line:
    xs: Sequence[float]
    ys: Sequence[float]
    label: str = ""
    color: str = "cyan"
    marker: str = "braille"
    scatter: bool = False


@dataclass
class Figure:
    lines: list[Line] = field(default_factory=list)
    empty: str = "waiting for data"
    legend: bool = True  # labels are shown when more than one line has one
    log2_ticks: bool = False  # y values are log2 of something: label the ticks 2^k

    def key(self) -> tuple:
        """What a redraw depends on: each line's length, last point and label, and the options."""
        return (tuple((len(line.xs), line.xs[-1] if line.xs else None, line.ys[-1] if line.ys else None, line.label)
                      for line in self.lines), self.log2_ticks, self.legend)


def _short(n: int) -> str:
    if abs(n) >= 1_000_000:
        return f"{n / 1_000_000:.3g}M"
    if abs(n) >= 10_000:
        return f"{n / 1000:.3g}k"
    return str(n)


class MetricPlot(PlotextPlot):
    """`update_figure(fig)` stores the data; the plot is rebuilt at the widget's size on render."""

    DEFAULT_CSS = """
    MetricPlot { height: 1fr; min-height: 5; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._figure = Figure()
        self._key: tuple | None = None

    def update_figure(self, figure: Figure) -> None:
        key = figure.key()
        if key != self._key:
            self._key = key
            self._figure = figure
            self.refresh()

    def render(self):
        fig = self._figure
        if not any(line.xs for line in fig.lines):
            from rich.text import Text

            return Text(fig.empty, style="dim italic", justify="center")
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        legend = fig.legend and sum(1 for line in fig.lines if line.xs and line.label) > 1
        for line in fig.lines:
            if not line.xs:
                continue
            kwargs = {"color": line.color, "marker": line.marker}
            if line.label and legend:
                kwargs["label"] = line.label
            if line.scatter:
                plt.scatter(list(line.xs), list(line.ys), **kwargs)
            else:
                plt.plot(list(line.xs), list(line.ys), **kwargs)
        xs = [x for line in fig.lines for x in line.xs]
        lo, hi = min(xs), max(xs)
        if hi > lo and all(float(x).is_integer() for x in (lo, hi)):
            n = max(2, min(5, self.size.width // 10))
            ticks = sorted({int(round(lo + (hi - lo) * i / (n - 1))) for i in range(n)})
            plt.xticks(ticks, [_short(t) for t in ticks])
        if fig.log2_ticks:
            ys = [y for line in fig.lines for y in line.ys]
            lo, hi = math.floor(min(ys)), math.ceil(max(ys))
            # no more ticks than rows to hold them apart: a crowded axis drops labels unpredictably
            room = max(2, (self.size.height - 3) // 2)
            step = max(1, math.ceil((hi - lo) / max(1, room - 1)))
            ticks = list(range(lo, hi + 1, step))
            plt.yticks([float(t) for t in ticks], [f"2^{t}" for t in ticks])
        return super().render()
