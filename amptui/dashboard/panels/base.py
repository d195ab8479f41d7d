"""What every run-screen panel is: a bordered widget that knows its title, the series it draws and
how it draws them from the run model.

Every panel shares one x axis (PanelView): optimizer steps from the run's first drawn step to its
latest (or, after `t`, the training seconds at those steps), so a backoff at step 99 sits above
step 99 in every panel. Footers keep to a few words; the figures that need more room go in wrapping
lines inside the panel, so no number or layer name is cut off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.containers import Vertical

from amptui.core.series import Series, interpolate
from amptui.core.stream.records import Step
from amptui.dashboard.runmodel import Plot, RunModel
from amptui.dashboard.widgets.plot import Figure, Line


@dataclass(frozen=True)
class PanelView:
    """The run as every panel draws it this time: the model (its lock held), and the shared x axis."""
    model: RunModel
    x_unit: str = "step"  # or "seconds" (the `t` key)
    x_range: tuple[float, float] | None = None  # the span every panel draws

    def x(self, series: Series) -> tuple[list[float], list[float]]:
        """A series' points on the shared x axis (steps, or training seconds at those steps)."""
        xs, ys = series.points()
        if self.x_unit == "step":
            return xs, ys
        kx, ky = self.model.time_s.points()
        at = interpolate(xs, kx, ky)
        kept = [(t, y) for t, y in zip(at, ys, strict=False) if t is not None]
        return [t for t, _ in kept], [y for _, y in kept]

    def figure(self, lines: list[Line], **kwargs) -> Figure:
        return Figure(lines, x_unit=self.x_unit, x_range=self.x_range, marks=self.switch_marks(), **kwargs)

    def switch_marks(self) -> tuple[float, ...]:
        """Where the autopilot switched the run's precision, on the shared x axis (marked on every panel)."""
        steps = [float(rec["step"]) for rec in self.model.run.switches]
        if self.x_unit == "step" or not steps:
            return tuple(steps)
        kx, ky = self.model.time_s.points()
        return tuple(t for t in interpolate(steps, kx, ky) if t is not None)


def shared_x_range(model: RunModel, x_unit: str, held: list[Series]) -> tuple[float, float] | None:
    """The span every panel draws: from the first step any panel holds to the run's latest (or,
    in seconds, from 0 to the latest training time)."""
    if x_unit == "seconds":
        _, ts = model.time_s.points()
        return (0.0, max(ts)) if ts else None
    points = [s.points()[0] for s in held if len(s)]
    if not points:
        return None
    return min(xs[0] for xs in points), max(float(model.run.step), *(xs[-1] for xs in points))


class RunPanel(Vertical):
    """One panel of the run screen. A subclass in a module of amptui/dashboard/panels/ is all a new
    panel takes: the run screen lays the registry out in PLACE order, numbers the panels (its number
    key, its tab, its title) and draws each from the model."""

    ALLOW_MAXIMIZE = True
    KEY: ClassVar[str] = ""        # its widget id is p-KEY; an OPTIONAL one sets the screen's class -KEY
    NAME: ClassVar[str] = ""       # on its tab and its key's help ("panel: NAME")
    TITLE: ClassVar[str] = ""      # on its border, after its number
    PLACE: ClassVar[float] = 0     # where it sits in the grid (lowest first)
    OPTIONAL: ClassVar[bool] = False  # shown only for runs it has data for; numbered after the others
    MISSING: ClassVar[str] = ""    # an OPTIONAL panel's words when its key is pressed for a run without its data
    PLOTS: ClassVar[tuple[Plot, ...]] = ()  # the series it draws: the model keeps them (model.series[name])
    registered: ClassVar[list[type[RunPanel]]] = []

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KEY:
            RunPanel.registered.append(cls)

    def __init__(self, number: int) -> None:
        super().__init__(id=f"p-{self.KEY}", classes="panel")
        self.number = number
        self.border_title = f"{number} {self.TITLE}"

    def held(self, model: RunModel) -> list[Series]:
        """The series it draws from step records: the shared x axis spans them all."""
        return [model.series[plot.name] for plot in self.PLOTS if plot.of is Step]

    def has_data(self, model: RunModel) -> bool:
        """Whether an OPTIONAL panel is shown for this run."""
        return True

    def draw(self, view: PanelView) -> None:
        """Draw the model (view.model, its lock held by the caller), at most PLOT_HZ times a second."""

    def follow(self, model: RunModel) -> None:
        """Show what arrived since the last call, at every flush of the screen (its lock held)."""

    def caught_up(self, model: RunModel) -> bool:
        """Everything read so far is on screen (a picture taken now shows it); the lock is held."""
        return True
