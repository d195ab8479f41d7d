"""Panel 4: memory, one line per kind the run measures (device allocated and reserved, each
rank's RSS), with the peak in the footer and the latest of each under the plot."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from amptui.core.fmt import fmt_bytes
from amptui.core.series import Series
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.widgets.plot import COLORS, Line, MetricPlot


class MemoryPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "mem", "memory", "memory", 4

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-mem")
        yield Static(id="mem-info", classes="info")

    def held(self, model: RunModel) -> list[Series]:
        return list(model.mem.values())

    def draw(self, view: PanelView) -> None:
        m = view.model
        lines = []
        for i, (label, series) in enumerate(m.mem.items()):
            xs, ys = view.x(series)
            lines.append(Line(xs, ys, label=label, color=COLORS[i % len(COLORS)]))
        self.query_one(MetricPlot).update_figure(view.figure(lines, y_unit="bytes"))
        peaks = list(m.mem_peak.values())
        self.border_subtitle = f"peak {fmt_bytes(max(peaks))}" if peaks else ""
        parts = []
        for label, (value, total) in m.mem_now.items():
            of = f"/{fmt_bytes(total)}" if total else ""
            parts.append(f"{label} {fmt_bytes(value)}{of} · peak {fmt_bytes(m.mem_peak.get(label))}")
        self.query_one("#mem-info", Static).update(Text("\n".join(parts[:4])))
