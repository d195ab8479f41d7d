"""The run screen's panels: one widget class each (a RunPanel subclass, panels/base.py), each in a
module of its own here. `registry()` finds them all, in their grid order: the run screen lays them
out, numbers them (keys 1-6, then the optional heat map's 7), and the footer, the tabs, the help and
the keymap follow."""

from __future__ import annotations

import importlib
import pkgutil

from amptui.dashboard.panels.base import PanelView, RunPanel
from amptui.dashboard.runmodel import Plot

__all__ = ["PanelView", "RunPanel", "plots", "registry"]


def registry() -> list[type[RunPanel]]:
    """Every panel class of this package: the always-shown ones in PLACE order, then the OPTIONAL
    ones (numbered after them)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")  # a panel registers itself (RunPanel.__init_subclass__)
    return sorted(RunPanel.registered, key=lambda cls: (cls.OPTIONAL, cls.PLACE))


def plots() -> list[Plot]:
    """The series every panel declares (PLOTS): what a RunModel for the run screen keeps."""
    return [plot for cls in registry() for plot in cls.PLOTS]
