"""The step-record window: metrics accumulated on the device, read once every `log.every` steps,
and a clock that holds training steps only.

The hot loop only adds tensors (`loss_sum += loss`) and keeps references to the GradScaler's scale
and the per-step overflow counts; `flush()` reads everything with one device-to-host copy. The
window's clock stops while the loop is paused (evaluation, checkpoints, writing records), so a
window's seconds are training-step seconds.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch


@dataclass
class Window:
    """What one step record reports, read back from the device."""

    steps: int
    loss: float | None
    scales: list[float]
    grad_norm: float | None
    seconds: float
    micro_batches: int = 0
    overflow_counts: dict[int, list[float]] = field(default_factory=dict)  # window step index -> per-parameter
    riders: list[list[float]] = field(default_factory=list)  # flush(riders=...) read back, in order
    # window step index (0-based) -> that step's own loss, for the steps that gave one (add_step_loss):
    # keyed, not listed, so a step with no loss cannot shift a later step's loss onto it
    step_losses: dict[int, float] = field(default_factory=dict)


class TrainingClock:
    """Seconds spent training, with pauses (evaluation, checkpoints, records) left out."""

    def __init__(self) -> None:
        self._elapsed = 0.0
        self._since: float | None = time.perf_counter()
        self._depth = 0

    def restart(self) -> None:
        self._elapsed, self._since, self._depth = 0.0, time.perf_counter(), 0

    def lap(self) -> float:
        """Training seconds since the last lap; the clock keeps its state (running or paused)."""
        now = time.perf_counter()
        seconds = self._elapsed + (now - self._since if self._since is not None else 0.0)
        self._elapsed = 0.0
        if self._since is not None:
            self._since = now
        return seconds

    @contextlib.contextmanager
    def paused(self, since: float | None = None) -> Iterator[list[float]]:
        """`with clock.paused() as took:` -- after the block, took[0] is its duration in seconds.
        `since` (a perf_counter time): the pause began then, not now (dated back no further than
        the clock's last lap or resume: time already reported stays reported)."""
        took = [0.0]
        t0 = time.perf_counter() if since is None else since
        if self._depth == 0 and self._since is not None:
            t0 = max(t0, self._since)
            self._elapsed += t0 - self._since
            self._since = None
        self._depth += 1
        try:
            yield took
        finally:
            self._depth -= 1
            now = time.perf_counter()
            took[0] = now - t0
            if self._depth == 0:
                self._since = now


class TimedBatches:
    """Iterates `batches`, summing the host seconds spent blocked in next() into `waited_s` (the
    one count of data wait: the trainer's and the Monitor's Recorder wrap their batches in it).
    Host time only: no device sync."""

    def __init__(self, batches: Iterable):
        self._it = iter(batches)
        self.waited_s = 0.0

    def __iter__(self) -> "TimedBatches":
        return self

    def __next__(self):
        t0 = time.perf_counter()
        try:
            return next(self._it)
        finally:
            self.waited_s += time.perf_counter() - t0


class StepMeter:
    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.clock = TrainingClock()
        self._reset()

    def _reset(self) -> None:
        self.loss_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        self.micro_batches = 0
        self.steps = 0
        self.scales: list[torch.Tensor] = []
        self.grad_norm: torch.Tensor | None = None
        self.overflow: dict[int, torch.Tensor] = {}
        self.step_losses: dict[int, torch.Tensor] = {}  # window step index -> its loss

    def restart_clock(self) -> None:
        self.clock.restart()

    def add_loss(self, loss: torch.Tensor) -> None:
        self.loss_sum += loss.detach().float()
        self.micro_batches += 1

    def add_step_loss(self, loss: torch.Tensor) -> None:
        """One optimizer step's loss as a whole (a device scalar): counted as one, and read back
        per step at the flush, so a non-finite one can be named by its step. Kept under the step
        it belongs to (the one optimizer_step() counts next); a second loss given for the same step
        is added to the first and still counted as one (no caller gives two today)."""
        held = self.step_losses.get(self.steps)
        self.step_losses[self.steps] = loss if held is None else held + loss

    def optimizer_step(self, scale: torch.Tensor | None, grad_norm: torch.Tensor | None,
                       overflow_counts: torch.Tensor | None = None) -> None:
        """Called after scaler.update(): keep the new scale (a device tensor; no sync) and, when
        traced, this step's non-finite gradient count per parameter (a device tensor)."""
        if overflow_counts is not None:
            self.overflow[self.steps] = overflow_counts
        self.steps += 1
        if scale is not None:
            self.scales.append(scale.detach().reshape(()).clone())
        if grad_norm is not None:
            self.grad_norm = grad_norm.detach()

    def flush(self, reduce=None, riders: list[torch.Tensor] | None = None) -> Window:
        """One host sync for the whole window. `reduce` averages the loss sum over ranks (DDP).
        `riders`: further device tensors (the range samples) read back with the same copy."""
        loss_sum, count = self.loss_sum, self.micro_batches + len(self.step_losses)
        per_step = torch.stack(list(self.step_losses.values())) if self.step_losses else None
        if per_step is not None:
            loss_sum = loss_sum + per_step.sum()
        totals = torch.stack([loss_sum, torch.tensor(float(count), device=self.device)])
        if reduce is not None:
            totals = reduce(totals)
        extra = list(self.scales) + ([self.grad_norm.float().reshape(())] if self.grad_norm is not None else [])
        extra += [c.float().reshape(-1) for c in self.overflow.values()]
        extra += [r.float().reshape(-1) for r in riders or []]
        extra += [per_step] if per_step is not None else []
        values = torch.cat([totals] + [t.reshape(-1) for t in extra]) if extra else totals
        host = values.tolist()  # the sync
        seconds = self.clock.lap()  # after the sync: the device's work for the window is done
        at = 2 + len(self.scales)
        scales = host[2:at]
        grad_norm = None
        if self.grad_norm is not None:
            grad_norm, at = host[at], at + 1
        counts = {}
        for index, tensor in self.overflow.items():
            n = tensor.numel()
            counts[index], at = host[at:at + n], at + n
        rode = []
        for tensor in riders or []:
            n = tensor.numel()
            rode.append(host[at:at + n])
            at += n
        total, counted = host[0], host[1]
        own_losses = dict(zip(self.step_losses, host[at:at + len(self.step_losses)], strict=True))
        window = Window(self.steps, total / counted if counted else None, scales, grad_norm, seconds,
                        count, counts, rode, own_losses)
        self._reset()
        return window
