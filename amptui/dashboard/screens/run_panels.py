"""The run screen's plot panels, drawn from its RunModel: loss, learning rate, loss scale (with its
scrolling list of backoffs and growths), memory, throughput.

Every panel shares one x axis: optimizer steps from the run's first drawn step to its latest (or,
after `t`, the training seconds at those steps), so a backoff at step 99 sits above step 99 in
every panel. Footers keep to a few words; the figures that need more room go in wrapping lines
inside the panel, so no number or layer name is cut off.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from amptui.core import axis
from amptui.core.config.precision import DTYPES, Precision, precision_or_unseen
from amptui.core.fmt import fmt_accuracy as fmt_acc
from amptui.core.fmt import fmt_bytes, fmt_flops, fmt_loss, fmt_scale
from amptui.core.numerics import nonfinite_text
from amptui.core.series import Series, interpolate, rolling_median
from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.screens.base import DashboardScreen
from amptui.dashboard.widgets.plot import COLORS, Figure, Line, MetricPlot

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    _Screen = DashboardScreen
else:
    _Screen = object

MEDIAN_WINDOW = 9  # throughput windows in the rolling median drawn over the raw ones
RAW_SPEED = (150, 95, 40)  # the raw throughput windows: a dim orange under the median


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


def scaler_event_line(ev: dict) -> Text:
    """One backoff or growth: the step, the scale's change, and the parameters that held inf/NaN
    (all of them kept; the line wraps rather than cutting a name)."""
    mark, style = ("▼", "red") if ev["event"] == "backoff" else ("▲", "green")
    text = Text.assemble((f"{mark} step {ev['step']}: {fmt_scale(ev['old'])}→{fmt_scale(ev['new'])}", style))
    if ev["overflow"]:
        more = ev["n_overflow"] - len(ev["overflow"])
        text.append(" inf in " + ", ".join(ev["overflow"]) + (f" +{more} more" if more > 0 else ""))
    return text


def loss_missing_words(m: RunModel) -> tuple[str, str]:
    """What the loss panel shows with no point to draw, and its footer with no finite latest loss:
    waiting, until a step record arrives; after that, that the steps had no finite loss (a float16
    run that skipped every step), which "waiting" or "-" would hide, and where the inf/NaN came
    from when the numerics records found it. A null loss in a step record is one the writer found
    inf/NaN, or (a script's) one it never saw."""
    if m.last_step is None:
        return "waiting for data", "-"
    words = f"no finite loss yet: {m.step} steps, every loss inf/NaN or not measured"
    first = m.numerics.latest_first()
    if first is not None:
        words += f"\nstep {first['step']}: first non-finite: {nonfinite_text(first)}"  # the heat map's words
    if m.has_scaler and m.skipped_total:
        words += f"\n{m.skipped_total} steps skipped for inf/NaN gradients: see the loss scale"
    return words, "inf/NaN"  # 7 letters: the footer is cut at the panel's width


class RunPanels(_Screen):
    x_unit = "step"  # or "seconds" (the `t` key)
    model: RunModel  # the run screen's (RunScreen.__init__)
    _range: tuple[float, float] | None  # the x span of the plots being drawn
    _events_shown: tuple[int, int | None]  # the scaler events listed: how many, the newest's step

    def _x(self, series: Series) -> tuple[list[float], list[float]]:
        """A series' points on the shared x axis (steps, or training seconds at those steps)."""
        xs, ys = series.points()
        if self.x_unit == "step":
            return xs, ys
        kx, ky = self.model.time_s.points()
        at = interpolate(xs, kx, ky)
        kept = [(t, y) for t, y in zip(at, ys, strict=False) if t is not None]
        return [t for t, _ in kept], [y for _, y in kept]

    def x_range(self) -> tuple[float, float] | None:
        """The span every panel draws: from the first step any panel holds to the run's latest."""
        m = self.model
        if self.x_unit == "seconds":
            _, ts = m.time_s.points()
            return (0.0, max(ts)) if ts else None
        held = [s.points()[0] for s in (m.loss_s, m.lr_s, m.scale_s, m.sps_s, *m.mem.values()) if len(s)]
        if not held:
            return None
        return min(xs[0] for xs in held), max(float(m.step), *(xs[-1] for xs in held))

    def _figure(self, lines: list[Line], **kwargs) -> Figure:
        return Figure(lines, x_unit=self.x_unit, x_range=self._range, **kwargs)

    def _plots(self) -> None:
        m = self.model
        self._range = self.x_range()
        xs, ys = self._x(m.loss_s)
        vx, vy = self._x(m.val_s)
        lines = [Line(xs, ys, label="train", color="cyan")]
        if vx:
            lines.append(Line(vx, vy, label="val", color="green", marker="●", scatter=True))
        missing, missing_footer = loss_missing_words(m)
        self.query_one("#plot-loss", MetricPlot).update_figure(self._figure(lines, empty=missing))
        ep = m.epochs_seen[-1] if m.epochs_seen else None
        extra = f" · val acc {fmt_acc(ep['val_acc'])}" if ep and ep.get("val_acc") is not None else ""
        loss = fmt_loss(m.loss) if m.loss is not None and math.isfinite(m.loss) else missing_footer
        self.query_one("#p-loss").border_subtitle = f"{loss}{extra}"
        xs, ys = self._x(m.lr_s)
        self.query_one("#plot-lr", MetricPlot).update_figure(self._figure([Line(xs, ys, color="green")], y_unit="lr"))
        self.query_one("#p-lr").border_subtitle = axis.eng(m.lr) if m.lr is not None else "-"
        self._scale_panel()
        self._mem_panel()
        self._speed_panel()

    def _scale_panel(self) -> None:
        m = self.model
        plot = self.query_one("#plot-scale", MetricPlot)
        info = self.query_one("#scale-info", Static)
        events = self.query_one("#scale-events")
        plot.display = events.display = m.has_scaler
        if not m.has_scaler:
            info.update(Text.assemble(("no GradScaler", "bold"), f" ({precision_or_unseen(m.precision_words)}) · skipped "
                                      f"{m.skipped_total}\n", (no_scaler_why(m.precision), "dim")))
            self.query_one("#p-scale").border_subtitle = ""
            return
        xs, ys = self._x(m.scale_s)
        bx, by = self._x(m.backoffs)
        gx, gy = self._x(m.growths)
        lines = [Line(xs, ys, label="log2 scale", color="magenta")]
        if bx:
            lines.append(Line(bx, by, label="backoff", color="red", marker="▼", scatter=True))
        if gx:
            lines.append(Line(gx, gy, label="growth", color="green", marker="▲", scatter=True))
        plot.update_figure(self._figure(lines, log2_ticks=True, legend=False))  # the info below says ▼ / ▲
        self.query_one("#p-scale").border_subtitle = f"scale {fmt_scale(m.scale)}"
        info.update(Text.assemble("skipped ", (str(m.skipped_total), "bold red" if m.skipped_total else "bold"),
                                  " · ", (f"▼ {m.n_backoff}", "red"), " backoff · ", (f"▲ {m.n_growth}", "green"),
                                  " growth"))
        newest_first = list(reversed(m.scaler_events))
        shown = (len(newest_first), newest_first[0]["step"] if newest_first else None)
        if shown != getattr(self, "_events_shown", None):
            self._events_shown = shown
            self.query_one("#scale-list", Static).update(Text("\n").join(scaler_event_line(ev)
                                                                         for ev in newest_first))

    def _mem_panel(self) -> None:
        m = self.model
        lines = []
        for i, (label, series) in enumerate(m.mem.items()):
            xs, ys = self._x(series)
            lines.append(Line(xs, ys, label=label, color=COLORS[i % len(COLORS)]))
        self.query_one("#plot-mem", MetricPlot).update_figure(self._figure(lines, y_unit="bytes"))
        peaks = list(m.mem_peak.values())
        self.query_one("#p-mem").border_subtitle = f"peak {fmt_bytes(max(peaks))}" if peaks else ""
        parts = []
        for label, (value, total) in m.mem_now.items():
            of = f"/{fmt_bytes(total)}" if total else ""
            parts.append(f"{label} {fmt_bytes(value)}{of} · peak {fmt_bytes(m.mem_peak.get(label))}")
        self.query_one("#mem-info", Static).update(Text("\n".join(parts[:4])))

    def _speed_panel(self) -> None:
        m = self.model
        xs, ys = self._x(m.sps_s)
        median = rolling_median(ys, MEDIAN_WINDOW)
        lines = [Line(xs, ys, label="windows", color=RAW_SPEED),
                 Line(xs, median, label=f"median of {MEDIAN_WINDOW}", color="orange")]
        self.query_one("#plot-speed", MetricPlot).update_figure(self._figure(lines))
        self.query_one("#p-speed").border_subtitle = f"median {median[-1]:,.0f} samples/s" if median else "-"
        ms = m.step_time_ms
        parts = [f"now {m.samples_per_s:,.0f} samples/s" if m.samples_per_s else "",
                 (f"{ms:,.0f} ms/step" if ms >= 100 else f"{ms:.1f} ms/step") if ms else ""]  # 1,360 ms, 27.6 ms
        if m.tflops:
            rate = fmt_flops(m.tflops)  # core.fmt's unit rule, as doctor and the notes say rates
            share = 100 * m.tflops / m.peak_tflops if m.peak_tflops else None
            parts.append(rate + ("" if share is None else f" ({share:.0f}% of peak)" if share >= 1 else " (<1% of peak)"))
        self.query_one("#speed-info", Static).update(" · ".join(p for p in parts if p))
