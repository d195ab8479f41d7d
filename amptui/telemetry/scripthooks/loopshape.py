"""The loop's shape, as the hooks see it: which modules run forward before the first step (the
script's models and their batch sizes), evaluation (the model's forward with gradients off,
between steps: out of the step clock), and the DataLoaders (data wait; epochs are the passes of the
training loader that feed steps). Its own state; the session (session.py) hands it the hooks' news.

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

from amptui.telemetry.scripthooks.models import batch_size

if TYPE_CHECKING:
    from amptui.telemetry.scripthooks.host import Session


class LoopShape:
    def __init__(self, session: Session):
        self.session = session
        self.seen_modules: dict[int, torch.nn.Module] = {}
        self.first_forwards: list[tuple[int, int]] = []   # (id(module), batch size) before the first step
        self.samples = 0
        self.loader_of: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.waits_before: dict[int, float] = {}
        self.last_loader: int | None = None
        self.train_loader: int | None = None
        self.loader_passes = 0
        self.feeding: int | None = None                     # the train loader's pass its last batch came from
        self.epoch_pass: int | None = None                  # the pass that fed the current epoch's steps
        self.steps_in_epoch = 0
        self._eval: Any = None
        self._quiet_since: float | None = None              # the quiet stretch's start (perf_counter), None outside one
        self._quiet_models: set[int] = set()                # models that ran forward in it
        self._quiet_batches = 0                             # DataLoader batches that came in it
        self._quiet_pass = False                            # it began with a DataLoader pass (gradients off)
        self._quiet_first_batch: float | None = None        # when its first batch came
        self._batch_after_forward: float | None = None      # when the first batch after its latest forward came
        self.train_pass_over = False                        # the training loader's pass ran out; no training batch since

    # --- evaluation ---------------------------------------------------------------------------------

    def enter_eval(self, since: float) -> None:
        if self._eval is None and self.session.recorder.meter is not None:
            self._eval = self.session.recorder.paused("eval", since=since)
            self._eval.__enter__()

    def leave_eval(self) -> None:
        """Training work: the quiet stretch ends (the step's own time unless it was evaluation)."""
        self._quiet_since = None
        if self._eval is not None:
            pause, self._eval = self._eval, None
            pause.__exit__(None, None, None)

    def _quiet(self, model: int | None = None, batch: bool = False, new_pass: bool = False) -> None:
        """No-grad work between steps: `model` (its id) ran forward, a DataLoader `batch` came, or
        a DataLoader pass began. Evaluation once the stretch shows it (the module doc's rule)."""
        if self._eval is not None or not self.session.started:
            return
        now = time.perf_counter()
        if self._quiet_since is None or new_pass:  # an eval loop begins by iterating its loader
            self._quiet_since, self._quiet_pass, self._quiet_batches = now, new_pass, 0
            self._quiet_models.clear()
            self._quiet_first_batch = self._batch_after_forward = None
            if self.train_pass_over:
                self.enter_eval(now)
                return
        if batch:
            self._quiet_batches += 1
            self._quiet_first_batch = self._quiet_first_batch or now
            self._batch_after_forward = self._batch_after_forward or now
            if self._quiet_batches > 1:
                self.enter_eval(self._quiet_since if self._quiet_pass else self._quiet_first_batch)
        elif model is not None:
            if model in self._quiet_models:  # the earlier forward was the step's, unless a pass began this
                self.enter_eval(self._quiet_since if self._quiet_pass else self._batch_after_forward or now)
            self._quiet_models.add(model)
            self._batch_after_forward = None

    def any_forward(self, module, args) -> None:
        """The global forward pre-hook, until the first step: which modules run, and their batches."""
        if self.session.started or not torch.is_grad_enabled():
            return
        self.seen_modules.setdefault(id(module), module)
        size = batch_size(args)
        if size is not None and len(self.first_forwards) < 100_000:  # bounded, however long the first step
            self.first_forwards.append((id(module), size))
        if self.session.recorder.meter is None or not self.session.recorder.meter.micro_batches:
            tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
            self.session.meter(tensor.device if tensor is not None else None)

    def model_forward(self, module, args, kwargs) -> None:
        if torch.is_grad_enabled():
            if self._quiet_since is not None:
                self.leave_eval()
            if module is self.session.models[0]:
                self.samples += batch_size(args, kwargs) or 0
        else:
            self._quiet(model=id(module))

    def loader_pass(self, loader, iterator) -> None:
        self.loader_passes += 1
        with contextlib.suppress(TypeError):
            self.loader_of[iterator] = (id(loader), self.loader_passes)
        if not torch.is_grad_enabled():
            self._quiet(new_pass=True)
        if id(loader) == self.train_loader and self.steps_in_epoch:
            self.session.write_step()  # if this pass trains, the epoch's steps ended here

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
            self.session.meter()
            self.last_loader, self.feeding = loader, serial
            self.waits_before[loader] = self.waits_before.get(loader, 0.0) + seconds
        elif loader == self.train_loader:
            self.leave_eval()  # a quiet stretch still open (the last step's accuracy) was the step's
            self.train_pass_over = ran_out
            if not ran_out:
                self.feeding = serial
            self.session.recorder.add_data_wait(seconds)
