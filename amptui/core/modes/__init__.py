"""The precision modes: each way amptui can train in reduced precision is one module of this
package, whose `MODE` is its `PrecisionMode` (base.py). `MODES` finds them all, the way the
dashboard's panels are found: a new mode is a new module here (and, where the trainer must do
something for it, a runtime module in amptui/trainer/modes/); no other file names it.

`Precision` (core/config/precision.py) is the value a run records; every question about it is
answered by the mode it names (`Precision.mode`). The modes name it in their annotations only:
precision.py imports this package, and this package never imports it back. No torch here."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from amptui.core.config.modefacts import Asked, LoopFacts, Note, RunFacts
from amptui.core.modes.base import SCALER, NumericsProbe, PrecisionMode

__all__ = ["Asked", "LoopFacts", "MODES", "Note", "NumericsProbe", "PrecisionMode", "RunFacts", "SCALER", "by_name", "detect",
           "probes", "tune_variants"]


def _found() -> list[PrecisionMode]:
    """Every module of this package that has a MODE, in the modes' `order`."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        mode = getattr(importlib.import_module(f"{__name__}.{module.name}"), "MODE", None)
        if isinstance(mode, PrecisionMode):
            found.append(mode)
    return sorted(found, key=lambda m: m.order)


# Every precision mode, in the order their variants are offered and a variant name is looked up.
MODES: list[PrecisionMode] = _found()


def by_name(name: str) -> PrecisionMode | None:
    return next((m for m in MODES if m.name == name), None)


def probes() -> list[NumericsProbe]:
    """Every mode's numerics probe (what it measures per layer on sampled steps), in MODES order."""
    return [m.probe for m in MODES if m.probe is not None]


def tune_variants() -> list[str]:
    """What `amptui tune` tries after fp32, every mode's in MODES order (the most specific: tried last)."""
    return [n for m in MODES for n in m.tune_variants()]


def detect(facts: LoopFacts) -> dict[str, Any]:
    """Every mode's reading of a watched loop, merged in MODES order (a later, more specific mode wins)."""
    out: dict[str, Any] = {}
    for m in MODES:
        out.update(m.detect(facts))
    return out
