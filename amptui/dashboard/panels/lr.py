"""Panel 2: the learning rate, with its latest value in the footer."""

from __future__ import annotations

from textual.app import ComposeResult

from amptui.core import axis
from amptui.core.stream.records import Step
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import Plot
from amptui.dashboard.widgets.plot import Line, MetricPlot


class LearningRatePanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "lr", "lr", "learning rate", 2
    PLOTS = (Plot("lr", Step, lambda rec: rec.lr),)

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-lr")

    def draw(self, view: PanelView) -> None:
        m = view.model
        xs, ys = view.x(m.series["lr"])
        self.query_one(MetricPlot).update_figure(view.figure([Line(xs, ys, color="green")], y_unit="lr"))
        self.border_subtitle = axis.eng(m.run.lr) if m.run.lr is not None else "-"
