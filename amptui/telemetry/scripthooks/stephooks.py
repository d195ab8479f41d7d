"""`StepWatch`: what the hooks around a training step say, the GradScaler's aside (scalerhooks.py):
the optimizers the loop makes and steps (where a step ends without an enabled scaler), the loss
`backward()` runs on, the gradient norm `clip_grad_norm_` returns, the scheduler steps, and the AMP mistakes only those
calls show. It owns the step clock (stepclock.py) and the step's own state; the session
(session.py) hands it the hooks' news and writes the records when a step ends.
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

import torch

from amptui.core.fmt import fmt_scale
from amptui.telemetry.scripthooks import mistakes, probe
from amptui.telemetry.scripthooks.stepclock import StepClock, StepLr

if TYPE_CHECKING:
    from amptui.telemetry.scripthooks.host import Session

NO_OPTIMIZER_AFTER = 20   # backward() calls with no torch.optim optimizer made: said live (the run starts)


class StepWatch:
    def __init__(self, session: Session):
        self.session = session
        self.clock = StepClock()
        self.step_lr = StepLr()
        self.optimizers: list[torch.optim.Optimizer] = []
        self._optimizer_ids: set[int] = set()
        self.trained: set[int] = set()              # optimizers whose step() really ran (ids)
        self.stepping_threads: set[int] = set()     # the threads optimizers stepped on (idents)
        self.schedulers: list[tuple[weakref.ref, int]] = []  # LR schedulers made, with their first last_epoch
        self.pending = False                        # a scaler step waiting for its update()
        self.grad_norm: torch.Tensor | None = None
        self.losses_seen = 0

    def optimizer(self, opt) -> None:
        """An optimizer steps (the post hook, or entering scaler.step()) on the calling thread."""
        if len(self.stepping_threads) < 2:
            self.stepping_threads.add(threading.get_ident())
        if len(self.stepping_threads) > 1 and len(self._optimizer_ids | {id(opt)}) > 1:
            self.threaded()
        if id(opt) not in self._optimizer_ids:
            self._optimizer_ids.add(id(opt))
            self.optimizers.append(opt)

    def made(self, opt) -> None:
        self.clock.made(opt)

    def stepped(self, opt) -> None:
        """The global optimizer step post hook."""
        self.trained.add(id(opt))
        self.optimizer(opt)
        scaling = self.session.scaling
        if scaling.in_step is not None:
            scaling.stepped_in_step = True
            return
        self.clock.stepped(opt)
        if self.clock.complete():
            if scaling.on:  # an optimizer stepped without the scaler: the step ends at update()
                self.pending = True
            else:
                self.session.finish_step()

    def threaded(self) -> None:
        """Several optimizers stepped from several threads: no one loop's order to count steps by
        (one optimizer stepped from any thread is counted exactly: each of its steps is one)."""
        self.session.warn("threaded_steps", mistakes.THREADED_STEPS)

    def add_loss(self, loss) -> None:
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            session = self.session
            meter = session.recorder.meter
            if meter is None or not (meter.steps or meter.step_losses or self.clock.holds_losses):
                session.meter(loss.device)  # the window may still move to the loss's device
            self.clock.add_loss(loss if loss.dim() == 0 else loss.reshape(()))
            if session.recorder.hygiene is not None:
                session.recorder.hygiene.loss(loss)  # its dtype (a float16 loss)
            if not session.started:
                self.losses_seen += 1
                if self.losses_seen == NO_OPTIMIZER_AFTER and session.probe:  # stepped by hand, or never
                    probe.report(session, session.probe, stepped=False)
                if self.losses_seen == NO_OPTIMIZER_AFTER and not self.clock.knows_optimizers:
                    self.no_optimizer()

    def no_optimizer(self, at_end: bool = False) -> None:
        """Steps are torch.optim optimizer steps: a loop that updates its parameters by hand (or
        never steps) records none. Said live once NO_OPTIMIZER_AFTER losses came with no optimizer
        made (the run starts then, so the warning shows), and at the end of a run with 0 steps."""
        if not self.session.started:
            self.session.begin()
        self.session.warn("no_optimizer_step", mistakes.NO_OPTIMIZER.format(
            seen=f" ({self.losses_seen} backward() calls)" if self.losses_seen else ""))
        if at_end:
            print(f"[amptui] {mistakes.NO_OPTIMIZER_END}", file=sys.stderr, flush=True)

    def backward(self, tensors) -> None:
        if self.session.scaling.losses_from_scaler:
            return
        loss = tensors if isinstance(tensors, torch.Tensor) else (
            tensors[0] if isinstance(tensors, (list, tuple)) and tensors else None)  # never consume a generator
        if isinstance(loss, torch.Tensor) and loss.requires_grad:
            self.add_loss(loss)

    def clip(self, parameters: Any) -> None:
        scaling = self.session.scaling
        if scaling.on and scaling.scaled_since_update and not scaling.unscaled_since_update:
            self.session.warn("clip_scaled", mistakes.CLIP_SCALED.format(
                scale=fmt_scale(scaling.initial_scale) if not self.session.started else "the current scale"))

    def clipped(self, norm) -> None:
        if isinstance(norm, torch.Tensor):
            self.grad_norm = norm

    def scheduler_made(self, scheduler) -> None:
        self.schedulers.append((weakref.ref(scheduler), scheduler.last_epoch))

    def check_schedulers(self) -> None:
        """Did a scheduler step (its `last_epoch` moved) while its optimizer had never stepped,
        because the GradScaler skipped its step(s)? Then the schedule's first value is lost (what
        torch's Python warning says, unless warnings are off). Asked before each scaler step and at
        the end, only while such an optimizer exists."""
        waiting = self.session.scaling.skipped_untrained - self.trained
        if not waiting or not self.schedulers:
            return
        for ref, made_at in self.schedulers:
            scheduler = ref()
            if scheduler is not None and id(scheduler.optimizer) in waiting and scheduler.last_epoch != made_at:
                self.session.warn("scheduler_after_skip", mistakes.SCHED_SKIPPED)
                self.schedulers.clear()  # said once
                return
