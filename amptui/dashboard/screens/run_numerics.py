"""The run screen's range-headroom panel (key 7): a heat map of layers x samples beside the loss
scale, with the narrowest layers and the latest first non-finite module. Shown only for a run that
wrote `numerics` records; the other panels keep their places and keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import Static

from amptui.dashboard.runmodel import RunModel
from amptui.dashboard.widgets.heatmap import HeatMapView, legend_and_narrowest

if TYPE_CHECKING:  # to the type checker the mixin is the screen it is part of; at run time it adds no base
    from amptui.dashboard.screens.base import DashboardScreen as _Screen
else:
    _Screen = object

NUMERICS_KEY = "7"
NUMERICS_TITLE = f"{NUMERICS_KEY} range headroom (log2)"


class RunNumerics(_Screen):
    model: RunModel
    numerics_active = False  # the compact layout shows this panel (key 7)

    def _numerics_panel(self) -> None:
        summary = self.model.numerics
        shown = summary.records > 0
        self.set_class(shown, "-numerics")
        if not shown:
            return
        panel = self.query_one("#p-numerics")
        panel.border_title = NUMERICS_TITLE
        narrowest = summary.narrowest_bits
        panel.border_subtitle = f"narrowest {narrowest:.1f} bits" if narrowest not in (None, float("-inf")) else (
            "inf/NaN seen" if narrowest is not None else "")
        self.query_one("#heatmap", HeatMapView).show(summary)
        self.query_one("#numerics-info", Static).update(legend_and_narrowest(summary))

    def action_numerics_panel(self) -> None:
        """Key 7: the heat map alone (compact layout) or maximized; again restores."""
        if not self.has_class("-numerics"):
            self.notify("this run has no range samples: run it with --set numerics.every=N", timeout=5)
            return
        panel = self.query_one("#p-numerics")
        self.numerics_active = not self.numerics_active or not panel.has_class("-active")
        panel.set_class(self.numerics_active, "-active")
        for other in self.query(".panel"):
            if other is not panel and self.numerics_active:
                other.set_class(False, "-active")
        if not self.has_class("-compact"):
            if self.maximized is panel:
                self.minimize()
            else:
                self.maximize(panel, container=False)
