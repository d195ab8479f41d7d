"""The trainer side of the precision modes: a module per mode that needs the trainer to do
something (convert the model, step with its own optimizer, act after each step), found the way the
core modes are (amptui/core/modes/): importing this package imports them all, and each registers
its `ModeRuntime` under its mode's name (base.py). A mode without one needs nothing beyond what its
Precision says (the autocast dtype, the GradScaler, an FSDP policy)."""

from __future__ import annotations

import importlib
import pkgutil

from amptui.trainer.modes.base import RUNTIMES, Conversion, ModeRuntime, register, runtimes_for

__all__ = ["RUNTIMES", "Conversion", "ModeRuntime", "register", "runtimes_for"]

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")  # a runtime registers itself (@register)
