"""Panel 7, the range headroom: a heat map of layers x samples (beside the loss scale), with the
narrowest layers and the latest first non-finite module. Shown only for a run that wrote `numerics`
records; the other panels keep their places and keys. A run whose mode has a numerics probe
(core/modes/base.py) shows the probe's figures instead (a converted linear's GEMM SQNR: the
figure that says which layer the mode hurts; under its bf16 autocast the headroom is rarely the question)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from amptui.core.numerics import ProbeSeries
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.widgets.heatmap import HeatMapView, legend_and_narrowest, probe_legend


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
        if (series := summary.probed()) is not None:
            self._draw_probe(view, series)
            return
        narrowest = summary.narrowest_bits
        self.border_subtitle = f"narrowest {narrowest:.1f} bits" if narrowest not in (None, float("-inf")) else (
            "inf/NaN seen" if narrowest is not None else "")
        self.query_one(HeatMapView).show(summary)
        self.query_one("#numerics-info", Static).update(legend_and_narrowest(summary))

    def _draw_probe(self, view: PanelView, series: ProbeSeries) -> None:
        self.border_title = f"{self.number} {series.probe.title}"
        lowest = series.lowest(1)
        self.border_subtitle = "" if not lowest else (
            "inf/NaN seen" if lowest[0][1] == float("-inf") else f"lowest {series.probe.value_words(lowest[0][1])}")
        self.query_one(HeatMapView).show(view.model.numerics, series)
        self.query_one("#numerics-info", Static).update(probe_legend(view.model.numerics, series))
