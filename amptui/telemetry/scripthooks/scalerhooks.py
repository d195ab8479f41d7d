"""`ScalerWatch`: what the GradScaler patches say (patches.py): which scaler the loop uses and its
first scale, the loss it scales, where a training step ends with one (the `update()` after every
optimizer in use stepped, stepclock.py), whether the step was skipped, and the AMP mistakes only
the scaler's calls show. It owns the scaler's state; the session (session.py) hands it the news.

Skipped steps, as the trainer learns them: each `scaler.step()`'s found_inf (a device tensor, not
read) goes into a SkipLedger at the step's end; on a CPU it is on the host at once, so the step
itself is traced and its backoff names the overflowing parameters even after a quiet window (when
the overflow tracer is otherwise disarmed). On a GPU a flag that has not arrived yet arms the
tracer for the steps after it."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from amptui.core import hygiene
from amptui.telemetry import torch_amp
from amptui.telemetry.scaler import SkipLedger
from amptui.telemetry.scripthooks import mistakes

if TYPE_CHECKING:
    from amptui.telemetry.scripthooks.host import Session


class ScalerWatch:
    def __init__(self, session: Session):
        self.session = session
        self.scaler: Any = None                        # the loop's enabled GradScaler, once it scaled
        self.initial_scale: float | None = None
        self.in_step: Any = None                       # the optimizer inside scaler.step(), if any
        self.stepped_in_step = False                   # ... and whether it really stepped
        self.stepped_since_update: set[int] = set()
        self.unscaled_since_update: set[int] = set()
        self.scaled_since_update = False
        self.losses_from_scaler = False
        self.skipped_untrained: set[int] = set()      # optimizers skipped before they ever stepped (ids)
        self.checked_fp16: set[int] = set()
        self.skips: SkipLedger | None = None           # the GradScaler's skip flags (the module doc)
        self.found_inf: torch.Tensor | None = None
        self._last_scaled: weakref.ref | None = None   # the loss the last scaler.scale() was given

    @property
    def on(self) -> bool:
        return self.scaler is not None and self.scaler.is_enabled()

    def scale(self, scaler, outputs) -> None:
        self.losses_from_scaler = True
        if scaler.is_enabled():
            if self.scaler is None:
                self.scaler = scaler
                self.initial_scale = float(scaler.get_scale())  # before its first scale(): no device read
            self.scaled_since_update = True
        # Only a tensor or a list/tuple is looked into: a generator's first item taken here would be
        # missing from what torch scales.
        steps = self.session.steps
        if isinstance(outputs, torch.Tensor):
            self._scaled_twice(outputs)
            steps.add_loss(outputs)
        elif isinstance(outputs, (list, tuple)) and outputs:
            steps.add_loss(outputs[0])

    def _scaled_twice(self, loss: torch.Tensor) -> None:
        """scaler.scale() of what scaler.scale() returned (its graph's last step multiplies the loss the
        previous call was given): the gradients carry the scale squared. Graph metadata only."""
        before = self._last_scaled() if self._last_scaled is not None else None
        self._last_scaled = weakref.ref(loss)
        node = loss.grad_fn
        if before is not None and before.grad_fn is not None and node is not None and \
                any(fn is before.grad_fn for fn, _ in node.next_functions):
            self.session.warn(hygiene.GRAD_SCALE_WRONG, hygiene.SCALED_TWICE)

    def unscale(self, scaler, opt) -> None:
        self.unscaled_since_update.add(id(opt))
        self._check_fp16(scaler, opt)

    def _check_fp16(self, scaler, opt) -> None:
        if scaler.is_enabled() and id(opt) not in self.checked_fp16:
            self.checked_fp16.add(id(opt))
            if mistakes.has_fp16_params(opt):
                self.session.warn("fp16_params", mistakes.FP16_PARAMS)

    def step_enter(self, scaler, opt) -> None:
        steps = self.session.steps
        steps.optimizer(opt)
        self._check_fp16(scaler, opt)
        if scaler.is_enabled() and id(opt) in self.stepped_since_update:
            self.session.warn("step_without_update", mistakes.STEP_WITHOUT_UPDATE)
        if steps.pending:  # the last step's update() never came
            self.session.finish_step()
        steps.check_schedulers()
        if scaler.is_enabled():  # a disabled GradScaler's step is the optimizer's own
            self.in_step, self.stepped_in_step = opt, False

    def step_exit(self, scaler, opt, done: bool = True) -> None:
        self.in_step = None
        if not scaler.is_enabled() or not done:  # `done` False: torch raised (float16 params, no update())
            return
        self.stepped_since_update.add(id(opt))
        if not self.stepped_in_step and id(opt) not in self.session.steps.trained \
                and not getattr(opt, "_step_supports_amp_scaling", False):
            self.skipped_untrained.add(id(opt))  # GradScaler.step read found_inf itself and skipped
        self._keep_found_inf(scaler, opt)
        steps = self.session.steps
        steps.clock.stepped(opt)
        steps.pending = steps.pending or steps.clock.complete()

    def _keep_found_inf(self, scaler, opt) -> None:
        """This step's skip flag, over all its optimizers (device tensors: nothing is read)."""
        try:
            flag = torch_amp.found_inf(scaler, opt)
        except (AssertionError, AttributeError, KeyError, IndexError, RuntimeError):
            return  # no inf check ran for this optimizer (no gradients): nothing to know
        self.found_inf = flag if self.found_inf is None else torch.maximum(self.found_inf, flag)

    def skipped_now(self, step: int) -> bool:
        """Is `step` (ending now) known to be skipped already? Every skip the host has learned
        arms the overflow tracer, as the trainer's flags do (the module doc)."""
        flag, self.found_inf = self.found_inf, None
        recorder = self.session.recorder
        if flag is None or not recorder.scaler_enabled:
            return False
        if self.skips is None:
            self.skips = SkipLedger(recorder.active_meter.device, capacity=self.session.log_every + 1)
        self.skips.record(step, flag)
        now = False
        for at, skipped in self.skips.known():
            if skipped:
                now = now or at == step
                recorder.tracer.armed = True
        return now

    def updated(self, scaler) -> None:
        if scaler is not self.scaler:
            return
        self.stepped_since_update.clear()
        self.unscaled_since_update.clear()
        self.scaled_since_update = False
        if self.session.steps.pending:
            self.session.finish_step()
