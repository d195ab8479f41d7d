"""Panel 5: throughput, samples per second per logging window (dim) under their rolling median,
with the step time and the FLOP rate (and its share of the measured peak) under the plot."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from amptui.core.fmt import fmt_flops
from amptui.core.series import rolling_median
from amptui.core.stream.records import Step
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import Plot
from amptui.dashboard.widgets.plot import Line, MetricPlot

MEDIAN_WINDOW = 9  # throughput windows in the rolling median drawn over the raw ones
RAW_SPEED = (150, 95, 40)  # the raw throughput windows: a dim orange under the median


class ThroughputPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "speed", "throughput", "throughput", 5
    PLOTS = (Plot("samples_per_s", Step, lambda rec: rec.samples_per_s, how="mean"),)

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-speed")
        yield Static(id="speed-info", classes="info")

    def draw(self, view: PanelView) -> None:
        m = view.model.run
        xs, ys = view.x(view.model.series["samples_per_s"])
        median = rolling_median(ys, MEDIAN_WINDOW)
        lines = [Line(xs, ys, label="windows", color=RAW_SPEED),
                 Line(xs, median, label=f"median of {MEDIAN_WINDOW}", color="orange")]
        self.query_one(MetricPlot).update_figure(view.figure(lines))
        steady = m.steady_samples_per_s  # after warm-up (core.figures): the header's, compare's, the summary's
        self.border_subtitle = f"steady {steady:,.0f} samples/s" if steady else "-"
        ms = m.step_time_ms
        parts = [f"now {m.samples_per_s:,.0f} samples/s" if m.samples_per_s else "",
                 (f"{ms:,.0f} ms/step" if ms >= 100 else f"{ms:.1f} ms/step") if ms else ""]  # 1,360 ms, 27.6 ms
        if m.tflops:
            rate = fmt_flops(m.tflops)  # core.fmt's unit rule, as doctor and the notes say rates
            share = 100 * m.tflops / m.peak_tflops if m.peak_tflops else None
            parts.append(rate + ("" if share is None else f" ({share:.0f}% of peak)" if share >= 1 else " (<1% of peak)"))
        self.query_one("#speed-info", Static).update(" · ".join(p for p in parts if p))
