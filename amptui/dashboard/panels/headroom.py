"""Panel 7, the range headroom: a heat map of layers x samples (beside the loss scale), with the
narrowest layers and the latest first non-finite module. Shown only for a run that wrote `numerics`
records; the other panels keep their places and keys. A float8 run's (amp.float8) samples carry its
float8 linears: the panel shows their SQNR instead (its float8 view), the figure that says which
layer float8 hurts; under bf16 autocast the headroom is rarely the question."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.widgets.heatmap import HeatMapView, float8_legend, legend_and_narrowest


class RangeHeadroomPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "numerics", "range headroom", "range headroom (log2)", 3.5
    OPTIONAL = True
    MISSING = "this run has no range samples: run it with --set numerics.every=N"  # its key, pressed anyway

    def compose(self) -> ComposeResult:
        yield HeatMapView(id="heatmap")
        yield Static(id="numerics-info", classes="info")

    def has_data(self, model: RunModel) -> bool:
        return model.numerics.records > 0

    def draw(self, view: PanelView) -> None:
        summary = view.model.numerics
        if not summary.records:
            return
        if summary.float8_rows:
            self._draw_float8(view)
            return
        narrowest = summary.narrowest_bits
        self.border_subtitle = f"narrowest {narrowest:.1f} bits" if narrowest not in (None, float("-inf")) else (
            "inf/NaN seen" if narrowest is not None else "")
        self.query_one(HeatMapView).show(summary)
        self.query_one("#numerics-info", Static).update(legend_and_narrowest(summary))

    def _draw_float8(self, view: PanelView) -> None:
        summary = view.model.numerics
        self.border_title = f"{self.number} float8 SQNR (dB)"
        lowest = summary.lowest_float8(1)
        self.border_subtitle = "" if not lowest else (
            "inf/NaN seen" if lowest[0][1] == float("-inf") else f"lowest {lowest[0][1]:.1f} dB")
        self.query_one(HeatMapView).show(summary, float8=True)
        self.query_one("#numerics-info", Static).update(float8_legend(summary))
