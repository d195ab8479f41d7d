"""A line plot (textual-plotext) that redraws only when its data changed.

The axes are ours, not plotext's guesses: the x axis spans `Figure.x_range` (the same for every
panel of a run, and for every run in compare) in optimizer steps or seconds; y ticks sit on round
numbers labelled for their unit (core.axis). Everything is rebuilt at the widget's size on each
render, so a resize redraws inside the new frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from textual_plotext import PlotextPlot

from amptui.core import axis

COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "white")


@dataclass
class Line:
    xs: Sequence[float]
    ys: Sequence[float]
    label: str = ""
    color: str | tuple[int, int, int] = "cyan"
    marker: str = "braille"
    scatter: bool = False
    sparse: bool = False  # markers on every third column only: a line under it stays visible


@dataclass
class Figure:
    lines: list[Line] = field(default_factory=list)
    empty: str = "waiting for data"
    legend: bool = True  # labels are shown when more than one line has one
    log2_ticks: bool = False  # y values are log2 of something: label the ticks 2^k
    y_unit: str = ""  # core.axis units: "bytes", "lr", or plain numbers
    x_unit: str = "step"  # "step" or "seconds"
    x_range: tuple[float, float] | None = None  # shared with the other panels; else the data's own
    y_range: tuple[float, float] | None = None  # forced (e.g. a band around zero); else the data's
    marks: tuple[float, ...] = ()  # x positions marked with a vertical line: the autopilot's precision switches

    def key(self) -> tuple:
        """What a redraw depends on: each line's length, ends and label, the options, and the words
        shown with nothing to draw (they change while the lines stay empty)."""
        return (tuple((len(line.xs), line.xs[0] if line.xs else None, line.xs[-1] if line.xs else None,
                       line.ys[-1] if line.ys else None, line.label, line.marker) for line in self.lines),
                self.log2_ticks, self.legend, self.y_unit, self.x_unit, self.x_range, self.y_range, self.empty, self.marks)


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _thin(pts: list, most: int) -> list:
    if len(pts) <= most:
        return pts
    return [pts[round(i * (len(pts) - 1) / (most - 1))] for i in range(most)]


class MetricPlot(PlotextPlot):
    """`update_figure(fig)` stores the data; the plot is rebuilt at the widget's size on render."""

    DEFAULT_CSS = """
    MetricPlot { height: 1fr; min-height: 5; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._figure = Figure()
        self._key: tuple | None = None

    @property
    def figure(self) -> Figure:
        return self._figure

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
        x_lo, x_hi = self._x_limits(fig)
        visible = [(line, [(x, y) for x, y in zip(line.xs, line.ys, strict=False)
                           if x_lo <= x <= x_hi and y is not None and math.isfinite(y)]) for line in fig.lines]
        legend = fig.legend and sum(1 for line, pts in visible if pts and line.label) > 1
        for line, pts in visible:
            if not pts:
                continue
            kwargs: dict[str, Any] = {"color": line.color, "marker": line.marker}
            if line.label and legend:
                kwargs["label"] = line.label
            if line.sparse:
                pts = _thin(pts, max(2, (self.size.width - 10) // 3))
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            (plt.scatter if line.scatter else plt.plot)(xs, ys, **kwargs)
        for x in fig.marks:
            if x_lo <= x <= x_hi:
                plt.vline(x, "magenta")
        self._x_axis(fig, x_lo, x_hi)
        self._y_axis(fig, [y for _, pts in visible for _, y in pts])
        return super().render()

    @staticmethod
    def _x_limits(fig: Figure) -> tuple[float, float]:
        if fig.x_range is not None:
            return fig.x_range
        xs = _finite([x for line in fig.lines for x in line.xs])
        return (min(xs), max(xs)) if xs else (0.0, 1.0)

    def _x_axis(self, fig: Figure, lo: float, hi: float) -> None:
        count = max(2, min(8, (self.size.width - 10) // 9))
        lo, hi, at = axis.x_ticks(lo, hi, count, fig.x_unit)
        self.plt.xlim(lo, hi)
        self.plt.xticks(at, axis.labels(at, fig.x_unit))

    def _y_axis(self, fig: Figure, ys: list[float]) -> None:
        if not ys:
            return
        lo, hi = fig.y_range or (min(ys), max(ys))
        rows = max(1, self.size.height - 3)  # the frame and the x labels take three rows
        if fig.log2_ticks:
            lo, hi = math.floor(lo), math.ceil(hi)
            if hi == lo:
                lo, hi = lo - 1, hi + 1
            # no more ticks than rows to hold them apart: a crowded axis drops labels unpredictably
            room = max(2, rows // 2)
            step = max(1, math.ceil((hi - lo) / max(1, room - 1)))
            ticks = list(range(lo, hi + 1, step))
            self.plt.ylim(lo, hi)
            self.plt.yticks([float(t) for t in ticks], [f"2^{t}" for t in ticks])
            return
        count = max(2, min(6, rows // 2))
        lo, hi, at = axis.ticks(lo, hi, count, fig.y_unit)
        self.plt.ylim(lo, hi)
        self.plt.yticks(at, axis.labels(at, fig.y_unit))
