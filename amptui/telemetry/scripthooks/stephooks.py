"""What the hooks around a training step say, the GradScaler's aside (scalerhooks.py): the
optimizers the loop makes and steps (where a step ends without an enabled scaler), the loss
`backward()` runs on, the gradient norm `clip_grad_norm_` returns, and the AMP mistakes only those
calls show. Part of ScriptSession (session.py), which holds the state these read; its own room so
that session.py keeps to the run's records (start, steps, epochs, end) and each hook's news reads
in one place, as the scaler's does.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch

from amptui.core.fmt import fmt_scale
from amptui.telemetry.scripthooks import mistakes
from amptui.telemetry.scripthooks.guard import guarded

if TYPE_CHECKING:
    from amptui.telemetry import Recorder
    from amptui.telemetry.scripthooks.stepclock import StepClock

NO_OPTIMIZER_AFTER = 20   # backward() calls with no torch.optim optimizer made: said live (the run starts)


class StepHooks:
    # the session's state these read and set (ScriptSession.__init__ sets them)
    off: bool
    started: bool
    scaler: Any
    initial_scale: float | None
    optimizers: list[torch.optim.Optimizer]
    _optimizer_ids: set[int]
    clock: StepClock
    pending: bool
    in_scaler_step: Any
    stepped_in_scaler: bool
    unscaled_since_update: set[int]
    scaled_since_update: bool
    losses_from_scaler: bool
    skipped_before_first_step: bool
    grad_norm: torch.Tensor | None
    losses_seen: int
    recorder: Recorder

    if TYPE_CHECKING:  # the session's own
        def warn(self, code: str, message: str) -> None: ...
        def begin(self) -> None: ...
        def finish_step(self) -> None: ...
        def _meter(self, device: torch.device | None = None) -> None: ...

    @property
    def scaler_on(self) -> bool:
        return self.scaler is not None and self.scaler.is_enabled()

    def _optimizer(self, opt) -> None:
        if id(opt) not in self._optimizer_ids:
            self._optimizer_ids.add(id(opt))
            self.optimizers.append(opt)

    @guarded
    def optimizer_made(self, opt) -> None:
        self.clock.made(opt)

    @guarded
    def optimizer_post(self, opt) -> None:
        self._optimizer(opt)
        if self.in_scaler_step is not None:
            self.stepped_in_scaler = True
            return
        self.clock.stepped(opt)
        if self.clock.complete():
            if self.scaler_on:  # an optimizer stepped without the scaler: the step ends at update()
                self.pending = True
            else:
                self.finish_step()

    def _add_loss(self, loss) -> None:
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            meter = self.recorder.meter
            if meter is None or not (meter.steps or meter.step_losses or self.clock.holds_losses):
                self._meter(loss.device)  # the window may still move to the loss's device
            self.clock.add_loss(loss if loss.dim() == 0 else loss.reshape(()))
            if not self.started:
                self.losses_seen += 1
                if self.losses_seen == NO_OPTIMIZER_AFTER and not self.clock.knows_optimizers:
                    self._no_optimizer()

    def _no_optimizer(self, at_end: bool = False) -> None:
        """Steps are torch.optim optimizer steps: a loop that updates its parameters by hand (or
        never steps) records none. Said live once NO_OPTIMIZER_AFTER losses came with no optimizer
        made (the run starts then, so the warning shows), and at the end of a run with 0 steps."""
        if not self.started:
            self.begin()
        self.warn("no_optimizer_step", mistakes.NO_OPTIMIZER.format(
            seen=f" ({self.losses_seen} backward() calls)" if self.losses_seen else ""))
        if at_end:
            print(f"[amptui] {mistakes.NO_OPTIMIZER_END}", file=sys.stderr, flush=True)

    @guarded
    def backward(self, tensors) -> None:
        if self.losses_from_scaler:
            return
        loss = tensors if isinstance(tensors, torch.Tensor) else (
            tensors[0] if isinstance(tensors, (list, tuple)) and tensors else None)  # never consume a generator
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            self._add_loss(loss)

    @guarded
    def clip(self, parameters) -> None:
        if self.scaler_on and self.scaled_since_update and not self.unscaled_since_update:
            self.warn("clip_scaled", mistakes.CLIP_SCALED.format(scale=fmt_scale(self.initial_scale)
                                                                 if not self.started else "the current scale"))

    @guarded
    def clipped(self, norm) -> None:
        if isinstance(norm, torch.Tensor):
            self.grad_norm = norm

    @guarded
    def python_warning(self, message: str) -> None:
        if "lr_scheduler.step()" in message and "optimizer.step()" in message and self.skipped_before_first_step:
            self.warn("scheduler_after_skip", mistakes.SCHED_SKIPPED)
