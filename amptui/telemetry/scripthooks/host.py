"""What the session's parts (loopshape, scalerhooks, stephooks, underflow, probe) read and change
of the script session they belong to (session.py), and of each other through it. They are typed
against these protocols, not against session.py, so the session imports its parts and no part
imports the session back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from amptui.telemetry import Recorder
    from amptui.telemetry.scripthooks.precision import AutocastSeen
    from amptui.telemetry.scripthooks.stepclock import StepClock


class Steps(Protocol):
    """The step clock's side (stephooks.StepWatch), as the scaler's hooks and the checks use it."""

    clock: StepClock
    optimizers: list[torch.optim.Optimizer]
    trained: set[int]
    pending: bool
    losses_seen: int

    def optimizer(self, opt: Any) -> None: ...

    def add_loss(self, loss: Any) -> None: ...

    def check_schedulers(self) -> None: ...


class Scaling(Protocol):
    """The GradScaler's side (scalerhooks.ScalerWatch), as the step hooks and the checks use it."""

    scaler: Any
    initial_scale: float | None
    in_step: Any
    stepped_in_step: bool
    unscaled_since_update: set[int]
    scaled_since_update: bool
    losses_from_scaler: bool
    skipped_untrained: set[int]

    @property
    def on(self) -> bool: ...


class Session(Protocol):
    """session.ScriptSession, as its parts see it."""

    recorder: Recorder
    started: bool
    models: list[torch.nn.Module]
    log_every: int
    world_size: int
    seen: AutocastSeen
    probe: str | None

    @property
    def steps(self) -> Steps: ...

    @property
    def scaling(self) -> Scaling: ...

    def warn(self, code: str, message: str) -> None: ...

    def meter(self, device: torch.device | None = None) -> None: ...

    def begin(self, seen: bool = True) -> None: ...

    def finish_step(self) -> None: ...

    def write_step(self, reduce: bool = True) -> None: ...
