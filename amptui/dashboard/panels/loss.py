"""Panel 1: the training loss (and the validation loss, as dots), with the latest loss and
validation accuracy in its footer."""

from __future__ import annotations

import math

from textual.app import ComposeResult

from amptui.core.fmt import fmt_accuracy, fmt_loss
from amptui.core.numerics import nonfinite_text
from amptui.core.stream.records import Epoch, Step
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import SERIES_CAP, Plot, RunModel
from amptui.dashboard.widgets.plot import Line, MetricPlot


def loss_missing_words(m: RunModel) -> tuple[str, str]:
    """What the loss panel shows with no point to draw, and its footer with no finite latest loss:
    waiting, until a step record arrives; after that, that the steps had no finite loss (a float16
    run that skipped every step), which "waiting" or "-" would hide, and where the inf/NaN came
    from when the numerics records found it. A null loss in a step record is one the writer found
    inf/NaN, or (a script's) one it never saw."""
    run = m.run
    if run.last_step is None:
        return "waiting for data", "-"
    words = f"no finite loss yet: {run.step} steps, every loss inf/NaN or not measured"
    first = m.numerics.latest_first()
    if first is not None:
        words += f"\nstep {first['step']}: first non-finite: {nonfinite_text(first)}"  # the heat map's words
    if run.has_scaler and run.skipped_total:
        words += f"\n{run.skipped_total} steps skipped for inf/NaN gradients: see the loss scale"
    return words, "inf/NaN"  # 7 letters: the footer is cut at the panel's width


class LossPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "loss", "loss", "loss", 1
    PLOTS = (Plot("loss", Step, lambda rec: rec.loss, how="mean"),
             Plot("val_loss", Epoch, lambda rec: rec.val_loss, cap=SERIES_CAP // 2))  # at each evaluated epoch

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-loss")

    def draw(self, view: PanelView) -> None:
        m = view.model
        xs, ys = view.x(m.series["loss"])
        vx, vy = view.x(m.series["val_loss"])
        lines = [Line(xs, ys, label="train", color="cyan")]
        if vx:
            lines.append(Line(vx, vy, label="val", color="green", marker="●", scatter=True))
        missing, missing_footer = loss_missing_words(m)
        self.query_one(MetricPlot).update_figure(view.figure(lines, empty=missing))
        ep = m.epochs_seen[-1] if m.epochs_seen else None
        extra = f" · val acc {fmt_accuracy(ep.val_acc)}" if ep and ep.val_acc is not None else ""
        loss = m.run.loss
        loss_said = fmt_loss(loss) if loss is not None and math.isfinite(loss) else missing_footer
        self.border_subtitle = f"{loss_said}{extra}"
