"""Panel 3: the GradScaler's loss scale (log2) with its backoffs (▼) and growths (▲), the skipped
steps, and a scrolling list of every backoff and growth, newest first, naming the parameters that
held inf/NaN. A run without a GradScaler says whether it needs one."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from amptui.core.config.precision import DTYPES, Precision, precision_or_unseen
from amptui.core.fmt import fmt_scale
from amptui.core.stream.records import Scaler, Step
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import SERIES_CAP, Plot
from amptui.dashboard.widgets.plot import Line, MetricPlot


def no_scaler_why(precision: Precision | None) -> str:
    """Whether a run without a GradScaler needs one, from the dtype it autocasts to."""
    if precision is None or not precision.autocast:
        return "float32 gradients need no loss scaling."
    dtype = DTYPES.get(precision.dtype)
    if dtype is not None and not dtype.needs_scaler:
        return (f"{precision.dtype} keeps float32's exponent range, so small gradients do not underflow: "
                "no loss scaling needed.")
    return (f"{precision.dtype} without a GradScaler: small gradients can underflow to zero. Turn the "
            "GradScaler on (amp.grad_scaler).")


def _log2(scale: float | None) -> float | None:
    return math.log2(scale) if scale is not None and scale > 0 else None


def scaler_event_line(ev: dict) -> Text:
    """One backoff or growth: the step, the scale's change, and the parameters that held inf/NaN
    (all of them kept; the line wraps rather than cutting a name)."""
    mark, style = ("▼", "red") if ev["event"] == "backoff" else ("▲", "green")
    text = Text.assemble((f"{mark} step {ev['step']}: {fmt_scale(ev['old'])}→{fmt_scale(ev['new'])}", style))
    if ev["overflow"]:
        more = ev["n_overflow"] - len(ev["overflow"])
        text.append(" inf in " + ", ".join(ev["overflow"]) + (f" +{more} more" if more > 0 else ""))
    return text


class LossScalePanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "scale", "loss scale", "loss scale (log2)", 3
    PLOTS = (Plot("log2_scale", Step, lambda rec: _log2(rec.scale)),
             Plot("backoffs", Scaler, lambda rec: _log2(rec.new_scale) if rec.event == "backoff" else None, how="min",
                  cap=SERIES_CAP // 2, every_rank=True),
             Plot("growths", Scaler, lambda rec: _log2(rec.new_scale) if rec.event != "backoff" else None, how="max",
                  cap=SERIES_CAP // 2, every_rank=True))
    _events_shown: tuple[int, int | None] | None = None  # the scaler events listed: how many, the newest's step

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-scale")
        yield Static(id="scale-info", classes="info")
        with VerticalScroll(id="scale-events"):
            yield Static(id="scale-list")

    def draw(self, view: PanelView) -> None:
        model, m = view.model, view.model.run
        plot = self.query_one(MetricPlot)
        info = self.query_one("#scale-info", Static)
        events = self.query_one("#scale-events")
        plot.display = events.display = m.has_scaler
        if not m.has_scaler:
            info.update(Text.assemble(("no GradScaler", "bold"), f" ({precision_or_unseen(m.precision_words)}) · skipped "
                                      f"{m.skipped_total}\n", (no_scaler_why(m.precision), "dim")))
            self.border_subtitle = ""
            return
        xs, ys = view.x(model.series["log2_scale"])
        bx, by = view.x(model.series["backoffs"])
        gx, gy = view.x(model.series["growths"])
        lines = [Line(xs, ys, label="log2 scale", color="magenta")]
        if bx:
            lines.append(Line(bx, by, label="backoff", color="red", marker="▼", scatter=True))
        if gx:
            lines.append(Line(gx, gy, label="growth", color="green", marker="▲", scatter=True))
        plot.update_figure(view.figure(lines, log2_ticks=True, legend=False))  # the info below says ▼ / ▲
        self.border_subtitle = f"scale {fmt_scale(m.scale)}"
        info.update(Text.assemble("skipped ", (str(m.skipped_total), "bold red" if m.skipped_total else "bold"),
                                  " · ", (f"▼ {model.n_backoff}", "red"), " backoff · ", (f"▲ {model.n_growth}", "green"),
                                  " growth"))
        newest_first = list(reversed(model.scaler_events))
        shown = (len(newest_first), newest_first[0]["step"] if newest_first else None)
        if shown != self._events_shown:
            self._events_shown = shown
            self.query_one("#scale-list", Static).update(Text("\n").join(scaler_event_line(ev)
                                                                         for ev in newest_first))
