"""Panel 8, the gradient norm: the total norm of the unscaled gradients at each logged step (the
step record's optional grad_norm: amptui's trainer writes it when `amp.clip_grad_norm` is set, a
script's run when the script calls `clip_grad_norm_`), the largest of each window kept when the
series thins out, so a spike stays visible; the clipping threshold as a dotted level. Shown only
for a run that wrote one."""

from __future__ import annotations

from textual.app import ComposeResult

from amptui.core.stream.records import Step
from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import Plot, RunModel
from amptui.dashboard.widgets.plot import Line, MetricPlot


def clip_threshold(model: RunModel) -> float | None:
    """The run's `amp.clip_grad_norm` (its start record's config), when it clips."""
    amp = model.run.config.get("amp")
    clip = amp.get("clip_grad_norm") if isinstance(amp, dict) else None
    return float(clip) if isinstance(clip, (int, float)) and not isinstance(clip, bool) and clip > 0 else None


class GradNormPanel(RunPanel):
    KEY, NAME, TITLE, PLACE = "grad_norm", "grad norm", "gradient norm (unscaled)", 5.5
    OPTIONAL = True
    MISSING = "this run records no gradient norm: set amp.clip_grad_norm (a script: call clip_grad_norm_)"
    PLOTS = (Plot("grad_norm", Step, lambda rec: rec.grad_norm, how="max"),)

    def compose(self) -> ComposeResult:
        yield MetricPlot(id="plot-grad-norm")

    def has_data(self, model: RunModel) -> bool:
        return len(model.series["grad_norm"]) > 0

    def draw(self, view: PanelView) -> None:
        xs, ys = view.x(view.model.series["grad_norm"])
        lines = [Line(xs, ys, label="grad norm", color="yellow")]
        clip = clip_threshold(view.model)
        if clip is not None and xs:
            lines.append(Line([xs[0], xs[-1]], [clip, clip], label="clip", color="red", sparse=True))
        self.query_one(MetricPlot).update_figure(view.figure(lines))
        latest = view.model.run.grad_norm
        said = f"now {latest:.3g}" if latest is not None else "-"
        self.border_subtitle = said + (f" · clip {clip:.3g}" if clip is not None else "")
