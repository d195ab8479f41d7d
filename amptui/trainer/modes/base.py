"""A precision mode's behaviour in the trainer: a `ModeRuntime` per mode, in a module of this
package, registered under the mode's name (amptui/core/modes/, `PrecisionMode.name`) with `@register`. It converts the model
before training (returning a `Conversion`: what it did, typed), acts after each optimizer step, and
gives the run's start notes. A mode without a runtime needs nothing of the trainer beyond what its
Precision says (the autocast dtype, the GradScaler, an FSDP policy).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    import torch
    from torch import nn

    from amptui.core.config.precision import Precision
    from amptui.core.config.values import Config
    from amptui.trainer.layers import LayerScope


class Conversion(ABC):
    """What a mode's conversion did to the model."""

    @abstractmethod
    def record(self) -> dict[str, Any]:
        """Its fields in the start record's `precision` (under the mode's own key)."""

    @abstractmethod
    def note(self, device: torch.device) -> str:
        """The run's warning line at the start: what converted, and how."""

    def variants(self) -> dict[str, str]:
        """Each layer it converted -> the layer variant it computes in now ([amp.layers]' labels and counts)."""
        return {}


class ModeRuntime:
    """The trainer side of one precision mode; every hook a no-op unless the mode needs it."""

    record_key = ""  # where record() goes in the start record's precision ("" : nowhere)

    def wanted(self, precision: Precision, scope: LayerScope | None) -> bool:
        """Whether this run (or one of its [amp.layers] rules) uses this mode."""
        return precision.mode.name in _names_of(self) or (
            scope is not None and any(_mode_name(v) in _names_of(self) for v in scope.own.values()))

    def convert(self, model: nn.Module, precision: Precision, cfg: Config, device: torch.device,
                scope: LayerScope | None) -> Conversion | None:
        """Change the model before training, in place (after the FLOP count, before DDP/FSDP)."""
        return None

    def converts(self, model: nn.Module, precision: Precision, cfg: Config, device: torch.device) -> dict[str, str]:
        """The layers `convert` would change for the run's own precision (without [amp.layers]), each
        with the variant it then computes in: what a mixed run's rules are counted against."""
        return {}

    def optimizer(self, cfg: Config, params: list[nn.Parameter], precision: Precision) -> torch.optim.Optimizer | None:
        """The optimizer this mode steps the parameters with; None: the preset's own (trainer/optim.py)."""
        return None

    def after_optimizer_step(self, model: nn.Module, done: Conversion | None) -> None:
        """After each optimizer step (before zero_grad)."""


RUNTIMES: dict[str, ModeRuntime] = {}
R = TypeVar("R", bound=type[ModeRuntime])


def register(*names: str) -> Callable[[R], R]:
    """`@register("NAME")`: this class is the runtime of the modes so named."""
    def put(cls: R) -> R:
        for name in names:
            RUNTIMES[name] = cls()
        return cls
    return put


def _names_of(runtime: ModeRuntime) -> set[str]:
    return {name for name, r in RUNTIMES.items() if r is runtime}


def _mode_name(variant: str) -> str:
    from amptui.core.config.precision import Precision

    return Precision.from_variant(variant).mode.name


def runtimes_for(precision: Precision, scope: LayerScope | None) -> list[ModeRuntime]:
    """The runtimes this run uses (its mode's, its [amp.layers] rules' modes'), once each."""
    return list({id(r): r for r in RUNTIMES.values() if r.wanted(precision, scope)}.values())
