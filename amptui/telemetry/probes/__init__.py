"""The runtime halves of the modes' numerics probes (core/modes/base.py `NumericsProbe`): each
module of this package that says `attach(model)` measures its mode's figures per layer on the
steps the range sampler (telemetry/numerics.py) samples, in rows of the sampler's device buffer.
A new probe is a module here; the sampler, the Recorder and the script hooks ask this package.

A module's `attach(model)` is its probe for that model (None: nothing of its mode there): `key` (the
`numerics` record's field), `rows` (buffer rows of 4 values), `hook(buffer, first_row, quiet)` (its
hooks for one sampled step) and `records(values)` (its entries from its rows, read back). Its
`seen(model)`: what a script's model shows of its mode (LoopFacts.seen), None when nothing."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable, Protocol

import torch
from torch import nn


class Probe(Protocol):
    key: str
    rows: int

    def hook(self, buffer: torch.Tensor, first_row: int, quiet: Callable[[], bool]) -> list[Any]: ...

    def records(self, values: list[float]) -> list[dict[str, Any]]: ...


def _found() -> list[ModuleType]:
    modules = (importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__))
    return [m for m in modules if callable(getattr(m, "attach", None))]


MODULES = _found()


def attach(model: nn.Module) -> list[Probe]:
    """Every probe that finds its mode in `model`."""
    return [p for m in MODULES if (p := m.attach(model)) is not None]


def seen(models: list[nn.Module]) -> dict[str, Any]:
    """By mode name, what the loop's models show of each mode (the first model that shows any)."""
    out = {}
    for m in MODULES:
        found = next((s for s in map(m.seen, models) if s), None)
        if found:
            out[m.KEY] = found
    return out
