"""The loop's shape, as the hooks see it: which modules run forward before the first step (the
script's models and their batch sizes), evaluation (the model's forward with gradients off,
between steps: out of the step clock), and the DataLoaders (data wait; epochs are the passes of the
training loader that feed steps). Part of ScriptSession (session.py), which holds the state these read.

The training loader is the one whose batch came last, with gradients on, before the first step. A
pass of it is an epoch when a step is fed by it (its batch came last before the step): iterating the
same loader again to evaluate (under no_grad/inference_mode), or a peek with `next(iter(loader))`,
starts a pass that feeds no step and counts nothing. The epoch record is written at the first step
of the next training pass, its time measured up to that pass's start.

Evaluation (docs/your-own-code.md, "Steps, loss and epochs"): no-grad work between training steps
-- a forward of the script's model, a DataLoader pass or batch, with gradients off -- starts a
quiet stretch, which training work ends (a forward or training batch with gradients on, an
optimizer step); a DataLoader pass begun with gradients off starts a new one. The stretch belongs
to the step (training accuracy on the batch just trained on, one validation batch per step: the
step's rhythm) unless it shows it is evaluation: a model runs forward a second time in it, a second
DataLoader batch comes in it, or it starts after the training loader's pass ran out (between
epochs). The clock's pause is then dated back to where the evaluation began: the stretch's start
when a pass began it; else the first batch since the repeated model's previous forward (or that
forward itself: the earlier one was the step's)."""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import TYPE_CHECKING, Any

import torch

from amptui.telemetry.scripthooks.guard import guarded
from amptui.telemetry.scripthooks.models import batch_size

if TYPE_CHECKING:
    from amptui.telemetry import Recorder


class LoopShape:
    # the session's state these read and set (ScriptSession.__init__ sets them)
    off: bool
    started: bool
    recorder: Recorder
    models: list[torch.nn.Module]
    seen_modules: dict[int, torch.nn.Module]
    first_forwards: list[tuple[int, int]]
    samples: int
    loader_of: weakref.WeakKeyDictionary
    loader_passes: int
    feeding: int | None
    steps_in_epoch: int
    waits_before: dict[int, float]
    last_loader: int | None
    train_loader: int | None
    _eval: Any
    _quiet_since: float | None        # the quiet stretch's start (perf_counter), None outside one
    _quiet_models: set[int]           # models that ran forward in it
    _quiet_batches: int               # DataLoader batches that came in it
    _quiet_pass: bool                 # it began with a DataLoader pass (gradients off)
    _quiet_first_batch: float | None  # when its first batch came
    _batch_after_forward: float | None  # when the first batch after its latest forward came
    train_pass_over: bool             # the training loader's pass ran out; no training batch since

    if TYPE_CHECKING:  # the session's own
        def _meter(self, device: torch.device | None = None) -> None: ...
        def _write_step(self, reduce: bool = True) -> None: ...
    # --- evaluation ---------------------------------------------------------------------------------

    def _enter_eval(self, since: float) -> None:
        if self._eval is None and self.recorder.meter is not None:
            self._eval = self.recorder.paused("eval", since=since)
            self._eval.__enter__()

    def _leave_eval(self) -> None:
        """Training work: the quiet stretch ends (the step's own time unless it was evaluation)."""
        self._quiet_since = None
        if self._eval is not None:
            pause, self._eval = self._eval, None
            pause.__exit__(None, None, None)

    def _quiet(self, model: int | None = None, batch: bool = False, new_pass: bool = False) -> None:
        """No-grad work between steps: `model` (its id) ran forward, a DataLoader `batch` came, or
        a DataLoader pass began. Evaluation once the stretch shows it (the module doc's rule)."""
        if self._eval is not None or not self.started:
            return
        now = time.perf_counter()
        if self._quiet_since is None or new_pass:  # an eval loop begins by iterating its loader
            self._quiet_since, self._quiet_pass, self._quiet_batches = now, new_pass, 0
            self._quiet_models.clear()
            self._quiet_first_batch = self._batch_after_forward = None
            if self.train_pass_over:
                self._enter_eval(now)
                return
        if batch:
            self._quiet_batches += 1
            self._quiet_first_batch = self._quiet_first_batch or now
            self._batch_after_forward = self._batch_after_forward or now
            if self._quiet_batches > 1:
                self._enter_eval(self._quiet_since if self._quiet_pass else self._quiet_first_batch)
        elif model is not None:
            if model in self._quiet_models:  # the earlier forward was the step's, unless a pass began this
                self._enter_eval(self._quiet_since if self._quiet_pass else self._batch_after_forward or now)
            self._quiet_models.add(model)
            self._batch_after_forward = None

    @guarded
    def any_forward(self, module, args) -> None:
        """The global forward pre-hook, until the first step: which modules run, and their batches."""
        if self.started or not torch.is_grad_enabled():
            return
        self.seen_modules.setdefault(id(module), module)
        size = batch_size(args)
        if size is not None and len(self.first_forwards) < 100_000:  # bounded, however long the first step
            self.first_forwards.append((id(module), size))
        if self.recorder.meter is None or not self.recorder.meter.micro_batches:
            tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
            self._meter(tensor.device if tensor is not None else None)

    @guarded
    def model_forward(self, module, args, kwargs) -> None:
        if torch.is_grad_enabled():
            if self._quiet_since is not None:
                self._leave_eval()
            if module is self.models[0]:
                self.samples += batch_size(args, kwargs) or 0
        else:
            self._quiet(model=id(module))

    @guarded
    def loader_pass(self, loader, iterator) -> None:
        self.loader_passes += 1
        with contextlib.suppress(TypeError):
            self.loader_of[iterator] = (id(loader), self.loader_passes)
        if not torch.is_grad_enabled():
            self._quiet(new_pass=True)
        if id(loader) == self.train_loader and self.steps_in_epoch:
            self._write_step()  # if this pass trains, the epoch's steps ended here

    @guarded
    def batch_waited(self, iterator, seconds: float, ran_out: bool = False) -> None:
        known = self.loader_of.get(iterator)
        if not torch.is_grad_enabled():  # evaluation's batches: neither wait nor feed
            if not ran_out:
                self._quiet(batch=True)
            return
        if known is None:
            return
        loader, serial = known
        if self.train_loader is None:
            self._meter()
            self.last_loader, self.feeding = loader, serial
            self.waits_before[loader] = self.waits_before.get(loader, 0.0) + seconds
        elif loader == self.train_loader:
            self._leave_eval()  # a quiet stretch still open (the last step's accuracy) was the step's
            self.train_pass_over = ran_out
            if not ran_out:
                self.feeding = serial
            self.recorder.add_data_wait(seconds)
