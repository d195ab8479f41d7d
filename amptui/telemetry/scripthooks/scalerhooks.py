"""What the GradScaler patches say (patches.py): which scaler the loop uses and its first scale,
the loss it scales, where a training step ends with one (the `update()` after every optimizer in
use stepped, stepclock.py), whether the step was skipped, and the AMP mistakes only the scaler's
calls show. Part of ScriptSession (session.py), which holds the state these read.

Skipped steps, as the trainer learns them: each `scaler.step()`'s found_inf (a device tensor, not
read) goes into a SkipLedger at the step's end; on a CPU it is on the host at once, so the step
itself is traced and its backoff names the overflowing parameters even after a quiet window (when
the overflow tracer is otherwise disarmed). On a GPU a flag that has not arrived yet arms the
tracer for the steps after it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from amptui.telemetry import torch_amp
from amptui.telemetry.scaler import SkipLedger
from amptui.telemetry.scripthooks import mistakes
from amptui.telemetry.scripthooks.guard import guarded

if TYPE_CHECKING:
    from amptui.telemetry import Recorder
    from amptui.telemetry.scripthooks.stepclock import StepClock


class ScalerHooks:
    # the session's state these read and set (ScriptSession.__init__ sets them)
    off: bool
    started: bool
    scaler: Any
    initial_scale: float | None
    clock: StepClock
    pending: bool
    in_scaler_step: Any
    stepped_in_scaler: bool
    stepped_since_update: set[int]
    unscaled_since_update: set[int]
    scaled_since_update: bool
    losses_from_scaler: bool
    skipped_before_first_step: bool
    checked_fp16: set[int]
    recorder: Recorder
    log_every: int
    skips: SkipLedger | None
    found_inf: torch.Tensor | None

    if TYPE_CHECKING:  # the session's own
        def warn(self, code: str, message: str) -> None: ...
        def finish_step(self) -> None: ...
        def _optimizer(self, opt) -> None: ...
        def _add_loss(self, loss) -> None: ...

    @guarded
    def scaler_scale(self, scaler, outputs) -> None:
        self.losses_from_scaler = True
        if scaler.is_enabled():
            if self.scaler is None:
                self.scaler = scaler
                self.initial_scale = float(scaler.get_scale())  # before its first scale(): no device read
            self.scaled_since_update = True
        # Only a tensor or a list/tuple is looked into: a generator's first item taken here would be
        # missing from what torch scales.
        if isinstance(outputs, torch.Tensor):
            self._add_loss(outputs)
        elif isinstance(outputs, (list, tuple)) and outputs:
            self._add_loss(outputs[0])

    @guarded
    def scaler_unscale(self, scaler, opt) -> None:
        self.unscaled_since_update.add(id(opt))
        self._check_fp16(scaler, opt)

    def _check_fp16(self, scaler, opt) -> None:
        if scaler.is_enabled() and id(opt) not in self.checked_fp16:
            self.checked_fp16.add(id(opt))
            if mistakes.has_fp16_params(opt):
                self.warn("fp16_params", mistakes.FP16_PARAMS)

    @guarded
    def scaler_step_enter(self, scaler, opt) -> None:
        self._optimizer(opt)
        self._check_fp16(scaler, opt)
        if scaler.is_enabled() and id(opt) in self.stepped_since_update:
            self.warn("step_without_update", mistakes.STEP_WITHOUT_UPDATE)
        if self.pending:  # the last step's update() never came
            self.finish_step()
        if scaler.is_enabled():  # a disabled GradScaler's step is the optimizer's own
            self.in_scaler_step, self.stepped_in_scaler = opt, False

    @guarded
    def scaler_step_exit(self, scaler, opt, done: bool = True) -> None:
        self.in_scaler_step = None
        if not scaler.is_enabled() or not done:  # `done` False: torch raised (float16 params, no update())
            return
        self.stepped_since_update.add(id(opt))
        if not self.stepped_in_scaler and not self.started and not getattr(opt, "_step_supports_amp_scaling", False):
            self.skipped_before_first_step = True  # GradScaler.step read found_inf itself and skipped
        self._keep_found_inf(scaler, opt)
        self.clock.stepped(opt)
        self.pending = self.pending or self.clock.complete()

    def _keep_found_inf(self, scaler, opt) -> None:
        """This step's skip flag, over all its optimizers (device tensors: nothing is read)."""
        try:
            flag = torch_amp.found_inf(scaler, opt)
        except (AssertionError, AttributeError, KeyError, IndexError, RuntimeError):
            return  # no inf check ran for this optimizer (no gradients): nothing to know
        self.found_inf = flag if self.found_inf is None else torch.maximum(self.found_inf, flag)

    def _skipped_now(self, step: int) -> bool:
        """Is `step` (ending now) known to be skipped already? Every skip the host has learned
        arms the overflow tracer, as the trainer's flags do (the module doc)."""
        flag, self.found_inf = self.found_inf, None
        if flag is None or not self.recorder.scaler_enabled:
            return False
        if self.skips is None:
            self.skips = SkipLedger(self.recorder.active_meter.device, capacity=self.log_every + 1)
        self.skips.record(step, flag)
        now = False
        for at, skipped in self.skips.known():
            if skipped:
                now = now or at == step
                self.recorder.tracer.armed = True
        return now

    @guarded
    def scaler_updated(self, scaler) -> None:
        if scaler is not self.scaler:
            return
        self.stepped_since_update.clear()
        self.unscaled_since_update.clear()
        self.scaled_since_update = False
        if self.pending:
            self.finish_step()
